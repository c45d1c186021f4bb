"""The promote state machine, driven by scripted outcomes: every path, including a failed rollback."""

from __future__ import annotations

import json

import pytest

from deployctl.errors import ExitCode
from deployctl.judge.outcome import JudgeOutcome
from deployctl.decisions import machine as m

OK = m.Succeeded()


def drive(outcomes, limits=m.Limits(), unchanged=False):
    """Feed ``outcomes`` in order; return the final state and the actions asked for."""
    state = m.start(limits, unchanged=unchanged)
    actions = []
    for outcome in outcomes:
        action = m.next_action(state)
        assert action is not None, f"machine finished early in {state.phase}"
        actions.append(type(action).__name__)
        state = m.advance(state, outcome)
        # Every intermediate state survives the ledger's JSON round trip unchanged.
        assert m.State.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    return state, actions


HAPPY_PREFIX = [OK, OK, OK, OK, OK, OK]  # preflight, baseline, install, restart, gates, bench


def test_pass_keeps_the_candidate():
    state, actions = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.PASS, ("all levels within noise",)), OK])
    assert state.phase is m.Phase.DONE and state.result is m.Result.KEPT
    assert state.exit_code == ExitCode.OK
    assert actions == [
        "RunPreflight", "MeasureBaseline", "InstallTrial", "RestartCandidate",
        "CheckStartupGates", "BenchCandidate", "JudgeCandidate", "KeepCandidate",
    ]
    assert m.next_action(state) is None


def test_a_bisect_trial_that_passes_is_rolled_back_not_kept():
    state, actions = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.PASS, ("within noise",)), OK, m.Verified(True)],
                           limits=m.Limits(keep=False))
    assert state.phase is m.Phase.DONE and state.result is m.Result.PASSED and state.exit_code == ExitCode.OK
    assert "KeepCandidate" not in actions and actions[-2:] == ["RestoreBaseline", "VerifyBaseline"]


def test_judge_fail_rolls_back_and_verifies():
    state, actions = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL, ("C=64: −87 %",)), OK, m.Verified(True)])
    assert state.result is m.Result.REJECTED and state.phase is m.Phase.DONE
    assert state.exit_code == ExitCode.REJECTED
    assert actions[-2:] == ["RestoreBaseline", "VerifyBaseline"]
    assert "C=64: −87 %" in state.reasons


def test_invalid_benchmark_is_a_rejection():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INVALID, ("30 % of requests failed",)), OK, m.Verified(True)])
    assert state.result is m.Result.REJECTED


@pytest.mark.parametrize("failing_step", range(2, 6))
def test_failure_after_install_rolls_back(failing_step):
    outcomes = HAPPY_PREFIX[:failing_step] + [m.Failed(("it broke",)), OK, m.Verified(True)]
    state, actions = drive(outcomes)
    assert state.result is m.Result.REJECTED and state.phase is m.Phase.DONE
    assert actions[-2:] == ["RestoreBaseline", "VerifyBaseline"]
    assert "it broke" in state.reasons


def test_startup_gate_failure_skips_the_benchmark():
    state, actions = drive(HAPPY_PREFIX[:4] + [m.Failed(("max_running_requests 48 → 26",)), OK, m.Verified(True)])
    assert "BenchCandidate" not in actions
    assert state.result is m.Result.REJECTED


@pytest.mark.parametrize("failing_step", [0, 1])
def test_preflight_or_baseline_failure_refuses_without_touching(failing_step):
    state, actions = drive(HAPPY_PREFIX[:failing_step] + [m.Failed(("no",))])
    assert state.result is m.Result.REFUSED and state.phase is m.Phase.DONE
    assert state.exit_code == ExitCode.PREFLIGHT_REFUSED
    assert "InstallTrial" not in actions and not state.touched


def test_unchanged_candidate_does_nothing():
    state, actions = drive([], unchanged=True)
    assert state.result is m.Result.UNCHANGED and state.terminal and actions == []
    assert state.exit_code == ExitCode.OK and m.next_action(state) is None


def test_preflight_can_be_skipped():
    state, actions = drive([OK], limits=m.Limits(preflight=False))
    assert actions == ["MeasureBaseline"] and state.phase is m.Phase.INSTALL


def test_a_stored_baseline_is_confirmed_before_it_is_reused():
    state, actions = drive([OK, m.BaselineStored(7), m.Confirmed(True, ("reused release 7",)), OK])
    assert actions == ["RunPreflight", "MeasureBaseline", "ConfirmBaseline", "InstallTrial"]
    assert state.phase is m.Phase.RESTART and state.reused_from == 7
    assert m.next_action(m.State(phase=m.Phase.CONFIRM, reused_from=7)) == m.ConfirmBaseline(reused_from=7)


def test_a_disagreeing_confirmation_measures_a_fresh_baseline_once():
    state, actions = drive([OK, m.BaselineStored(7), m.Confirmed(False, ("C=1 moved −20 %",))])
    assert state.phase is m.Phase.BASELINE and state.fresh_baseline and "C=1 moved −20 %" in state.reasons
    assert m.next_action(state) == m.MeasureBaseline(fresh=True)
    with pytest.raises(ValueError):  # a fresh baseline was asked for: a stored one is a bug
        m.advance(state, m.BaselineStored(7))
    state = m.advance(state, OK)
    assert state.phase is m.Phase.INSTALL and state.reused_from is None


def test_a_confirmation_trial_that_fails_outright_refuses_without_touching_the_host():
    state, _ = drive([OK, m.BaselineStored(7), m.Failed(("all 2 requests failed",))])
    assert state.result is m.Result.REFUSED and "nothing on the host was changed" in state.reasons


def test_inconclusive_asks_for_more_trials_then_keeps_the_baseline():
    more = ((16, 1), (64, 2))
    limits = m.Limits(bench_rounds=2)
    state, actions = drive(
        HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, (), more), OK, m.Judged(JudgeOutcome.INCONCLUSIVE, (), more), OK, m.Verified(True)],
        limits=limits,
    )
    assert actions.count("BenchCandidate") == 2
    assert state.result is m.Result.INCONCLUSIVE and state.exit_code == ExitCode.INCONCLUSIVE
    assert "still inconclusive after 2 benchmark round(s); the policy keeps the baseline" in state.reasons


def test_second_bench_round_carries_the_judges_request():
    more = ((64, 2),)
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, (), more)])
    action = m.next_action(state)
    assert action == m.BenchCandidate(round=1, more_trials=more)


def test_inconclusive_may_keep_the_candidate_by_policy():
    state, actions = drive(
        HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE), OK], limits=m.Limits(keep_when_inconclusive=True)
    )
    assert state.result is m.Result.KEPT and actions[-1] == "KeepCandidate"


def test_a_bisect_trial_is_not_passed_on_an_inconclusive_whatever_the_policy_keeps():
    plan = ((2, 1), (8, 1))
    state, actions = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, ("unclear",), over_starts=plan), OK],
                           limits=m.Limits(keep=False, keep_when_inconclusive=True))
    assert state.result is m.Result.INCONCLUSIVE and state.exit_code == ExitCode.INCONCLUSIVE
    assert actions[-1] == "SecondCandidateStart" and state.phase is m.Phase.ROLLBACK  # decided over starts
    assert state.reasons[-1] == "inconclusive with no trial left to ask on this server start; a bisect trial: neither passed nor failed"


def test_rollback_is_retried_then_fails():
    state, actions = drive(
        HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), m.Failed(("restart: start-limit-hit",)), m.Failed(("exit 1",))]
    )
    assert state.phase is m.Phase.ROLLBACK_FAILED and state.result is m.Result.ROLLBACK_FAILED
    assert state.exit_code == ExitCode.ROLLBACK_FAILED
    assert actions[-2:] == ["RestoreBaseline", "RestoreBaseline"]
    assert m.next_action(state) is None


def test_second_rollback_attempt_succeeds():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), m.Failed(("flaky",)), OK, m.Verified(True)])
    assert state.result is m.Result.REJECTED and state.phase is m.Phase.DONE


def test_failed_verification_is_a_failed_rollback():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), OK, m.Verified(False, reasons=("health 503",))])
    assert state.phase is m.Phase.ROLLBACK_FAILED and "health 503" in state.reasons


def test_drift_is_recorded():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), OK, m.Verified(True, drift=True, reasons=("drift",))])
    assert state.drift and state.result is m.Result.REJECTED


def test_failed_keep_rolls_back():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.PASS), m.Failed(("disk full",)), OK, m.Verified(True)])
    assert state.result is m.Result.REJECTED and "disk full" in state.reasons


def test_interrupt_before_any_change_just_stops():
    state, _ = drive([OK, m.Interrupted("aborted by alice")])
    assert state.phase is m.Phase.DONE and state.result is m.Result.ABORTED and not state.touched


def test_interrupt_during_bench_rolls_back():
    state, _ = drive(HAPPY_PREFIX[:5] + [m.Interrupted("aborted"), OK, m.Verified(True)])
    assert state.result is m.Result.ABORTED and state.phase is m.Phase.DONE
    assert state.exit_code == ExitCode.INTERRUPTED


def test_interrupt_during_rollback_finishes_the_rollback():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), m.Interrupted("again")])
    assert state.phase is m.Phase.ROLLBACK and state.result is m.Result.REJECTED


@pytest.mark.parametrize("phase", [p for p in m.Phase if p not in m.TERMINAL])
def test_crash_in_any_phase_resumes_somewhere_safe(phase):
    state = m.State(phase=phase, result=m.Result.KEPT if phase is m.Phase.KEEP else None)
    resumed = m.resume_after_crash(state, "controller died")
    if phase in (m.Phase.PREFLIGHT, m.Phase.BASELINE, m.Phase.CONFIRM):
        assert resumed.phase is m.Phase.DONE and resumed.result is m.Result.ABORTED
    elif phase is m.Phase.KEEP:
        assert resumed.phase is m.Phase.KEEP and resumed.result is m.Result.KEPT
    else:
        assert resumed.phase is m.Phase.ROLLBACK
    assert "controller died" in resumed.reasons


def test_crash_after_the_end_changes_nothing():
    state = m.State(phase=m.Phase.DONE, result=m.Result.KEPT)
    assert m.resume_after_crash(state, "x") == state


def test_wrong_outcome_is_a_bug():
    with pytest.raises(ValueError):
        m.advance(m.start(), m.Verified(True))
    with pytest.raises(ValueError):
        m.advance(m.State(phase=m.Phase.DONE, result=m.Result.KEPT), OK)
    with pytest.raises(ValueError):
        m.advance(m.State(phase=m.Phase.JUDGE), m.Judged("MAYBE"))


def test_rollback_to_a_release_skips_evaluation():
    limits = m.Limits(evaluate=False)
    state, actions = drive([OK, OK, OK], limits=limits)
    assert actions == ["InstallTrial", "RestartCandidate", "KeepCandidate"]
    assert state.result is m.Result.KEPT and state.phase is m.Phase.DONE


def test_rollback_to_a_release_that_does_not_start_restores_what_was_live():
    state, actions = drive([OK, m.Failed(("crashed",)), OK, m.Verified(True)], limits=m.Limits(evaluate=False))
    assert actions[-2:] == ["RestoreBaseline", "VerifyBaseline"] and state.result is m.Result.REJECTED


def test_a_state_saved_by_0_1_before_its_first_step_resumes_as_untouched():
    saved = {**m.State().to_dict(), "phase": "PLAN"}  # 0.1 had a PLAN phase that did nothing
    resumed = m.resume_after_crash(m.State.from_dict(saved), "controller died")
    assert resumed.result is m.Result.ABORTED and not resumed.touched


GATED = m.Limits(output_gate=True)
PASSED = m.Judged(JudgeOutcome.PASS, ("all levels within noise",))


def test_the_output_gate_runs_between_a_passing_verdict_and_keep():
    state, actions = drive(HAPPY_PREFIX + [PASSED, m.OutputsChecked(JudgeOutcome.PASS, ("outputs unchanged",)), OK],
                           limits=GATED)
    assert state.result is m.Result.KEPT and actions[-3:] == ["JudgeCandidate", "CheckOutputs", "KeepCandidate"]
    assert "outputs unchanged" in state.reasons


@pytest.mark.parametrize("verdict, result", [(JudgeOutcome.FAIL, m.Result.REJECTED), (JudgeOutcome.INVALID, m.Result.REJECTED),
                                             (JudgeOutcome.INCONCLUSIVE, m.Result.INCONCLUSIVE)])
def test_fast_but_wrong_is_never_kept(verdict, result):
    state, actions = drive(HAPPY_PREFIX + [PASSED, m.OutputsChecked(verdict, ("output changed: accuracy 8/8 → 0/8",)),
                                           OK, m.Verified(True)], limits=GATED)
    assert state.phase is m.Phase.DONE and state.result is result and "KeepCandidate" not in actions
    assert actions[-2:] == ["RestoreBaseline", "VerifyBaseline"]
    assert state.exit_code == (ExitCode.REJECTED if result is m.Result.REJECTED else ExitCode.INCONCLUSIVE)


def test_a_bisect_trial_is_output_gated_too():
    state, _ = drive(HAPPY_PREFIX + [PASSED, m.OutputsChecked(JudgeOutcome.FAIL, ("output changed",)), OK, m.Verified(True)],
                     limits=m.Limits(keep=False, output_gate=True))
    assert state.result is m.Result.REJECTED


def test_the_output_gate_may_run_first_and_spare_a_wrong_candidate_the_sweep():
    first = m.Limits(output_gate=True, output_first=True)
    state, actions = drive([OK] * 5 + [m.OutputsChecked(JudgeOutcome.FAIL, ("output changed",)), OK, m.Verified(True)],
                           limits=first)
    assert state.result is m.Result.REJECTED and "BenchCandidate" not in actions
    state, actions = drive([OK] * 5 + [m.OutputsChecked(JudgeOutcome.PASS, ("unchanged",)), OK, PASSED, OK], limits=first)
    assert state.result is m.Result.KEPT
    assert actions[4:] == ["CheckStartupGates", "CheckOutputs", "BenchCandidate", "JudgeCandidate", "KeepCandidate"]


def test_a_drift_that_may_explain_a_rejection_makes_it_inconclusive():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL), OK,
                                     m.Verified(True, drift=True, in_doubt=True, reasons=("environment drift",))])
    assert state.phase is m.Phase.DONE and state.result is m.Result.INCONCLUSIVE
    assert state.exit_code == ExitCode.INCONCLUSIVE and state.drift
    assert "environment drift" in state.reasons and "inconclusive, not rejected" in state.reasons[-1]


def test_a_drift_leaves_an_abort_and_a_startup_rejection_as_they_were():
    state, _ = drive(HAPPY_PREFIX[:5] + [m.Interrupted("aborted"), OK,
                                         m.Verified(True, drift=True, in_doubt=True)])
    assert state.result is m.Result.ABORTED
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE), OK, m.Verified(True, drift=True, in_doubt=True)])
    assert state.result is m.Result.INCONCLUSIVE


def test_a_bisect_trial_that_passed_on_a_drift_is_inconclusive():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.PASS), OK, m.Verified(True, drift=True, in_doubt=True)],
                     limits=m.Limits(keep=False))
    assert state.result is m.Result.INCONCLUSIVE


# --- a rolled-back verdict decided over server starts (deployctl.judge.starts) ------------------

PLAN = ((2, 3), (8, 3))  # the verification's trials a critical level


def _over_starts(judged, starts, *, drift=False, limits=m.Limits()):
    """Judged, then the candidate's second start, the rollback and the verification; the last action asked."""
    outcomes = HAPPY_PREFIX + [judged, OK, OK, m.Verified(True, drift=drift, reasons=("over two starts: …",), starts=starts)]
    state = m.start(limits)
    for outcome in outcomes:
        action = m.next_action(state)
        state = m.advance(state, outcome)
        assert m.State.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    return state, action


def test_a_fail_a_restart_offset_could_explain_is_inconclusive_over_two_starts_not_rejected():
    judged = m.Judged(JudgeOutcome.FAIL, ("C=8: −7 %",), over_starts=PLAN)
    _, actions = drive(HAPPY_PREFIX + [judged, OK, OK])
    assert actions[-3:] == ["JudgeCandidate", "SecondCandidateStart", "RestoreBaseline"]
    state, verify = _over_starts(judged, JudgeOutcome.INCONCLUSIVE)
    assert verify == m.VerifyBaseline(over_starts=PLAN)  # the verification measures every critical level
    assert state.result is m.Result.INCONCLUSIVE and state.exit_code == ExitCode.INCONCLUSIVE
    assert "over two starts: …" in state.reasons
    assert state.reasons[-1].startswith("inconclusive, not rejected: a slower server start could explain the FAIL")


def test_a_fail_that_stands_over_two_starts_is_rejected():
    state, _ = _over_starts(m.Judged(JudgeOutcome.FAIL, ("C=8: −9 %",), over_starts=PLAN), JudgeOutcome.FAIL)
    assert state.result is m.Result.REJECTED and state.exit_code == ExitCode.REJECTED
    assert state.reasons[-1].startswith("rejected: worse beyond the limit against the baseline on both")


def test_a_final_inconclusive_can_become_a_rejection_over_two_starts():
    judged = m.Judged(JudgeOutcome.INCONCLUSIVE, ("C=8: unclear",), over_starts=PLAN)
    state, verify = _over_starts(judged, JudgeOutcome.FAIL, limits=m.Limits(bench_rounds=1))
    assert verify.over_starts == PLAN and state.result is m.Result.REJECTED
    state, _ = _over_starts(judged, JudgeOutcome.INCONCLUSIVE, limits=m.Limits(bench_rounds=1))
    assert state.result is m.Result.INCONCLUSIVE and state.reasons[-1].startswith("still inconclusive over two")


def test_a_fail_over_two_starts_with_a_drifted_baseline_is_inconclusive_one_story():
    state, _ = _over_starts(m.Judged(JudgeOutcome.FAIL, over_starts=PLAN), JudgeOutcome.FAIL, drift=True)
    assert state.result is m.Result.INCONCLUSIVE and state.drift
    assert state.reasons[-1].startswith("inconclusive, not rejected: the restored baseline drifted")
    assert not any(r.startswith("rejected") for r in state.reasons)


def test_a_robust_fail_verifies_as_before_and_a_non_final_inconclusive_carries_no_plan():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL, ("C=64: −87 %",)), OK])
    assert m.next_action(state) == m.VerifyBaseline()
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=PLAN, more_trials=((8, 1),))])
    assert state.phase is m.Phase.BENCH and state.over_starts == ()


@pytest.mark.parametrize("steps", [0, 2], ids=["in-the-second-start", "in-the-verification"])
def test_a_controller_killed_deciding_over_starts_rolls_back_and_verifies_over_starts_again(steps):
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL, over_starts=PLAN)] + [OK] * steps)
    assert state.phase is (m.Phase.SECOND_START, m.Phase.ROLLBACK, m.Phase.VERIFY)[steps] and state.touched
    resumed = m.resume_after_crash(state, "the controller died")
    assert resumed.phase is m.Phase.ROLLBACK and resumed.result is m.Result.REJECTED
    resumed = m.advance(resumed, OK)
    assert m.next_action(resumed) == m.VerifyBaseline(over_starts=PLAN)


def test_the_second_start_asks_for_the_plan_and_an_abort_there_still_decides_over_starts():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=PLAN)], limits=m.Limits(bench_rounds=1))
    assert m.next_action(state) == m.SecondCandidateStart(over_starts=PLAN)
    aborted = m.advance(state, m.Interrupted("aborted by the operator"))
    assert aborted.phase is m.Phase.ROLLBACK and aborted.result is m.Result.INCONCLUSIVE
    assert aborted.over_starts == PLAN and aborted.reasons[-1] == "aborted by the operator"


def test_a_candidate_that_does_not_come_back_on_its_second_start_is_rejected_on_that():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=PLAN),
                                     m.Failed(("the candidate did not come back on its second start (crashed)",)), OK],
                     limits=m.Limits(bench_rounds=1))
    assert state.result is m.Result.REJECTED and state.over_starts == ()
    assert m.next_action(state) == m.VerifyBaseline()  # nothing left to decide over starts: the plain check
    assert "the candidate did not come back on its second start (crashed)" in state.reasons


# --- three starts a side: a one-level sweep (``judge.starts.starts_a_side``) ----------------------

ONE = ((64, 5),)


def test_a_one_level_plan_restarts_the_candidate_twice_and_asks_the_verification_for_a_third_baseline_start():
    judged = m.Judged(JudgeOutcome.FAIL, ("C=64: −7 %",), over_starts=ONE, starts=3)
    state, actions = drive(HAPPY_PREFIX + [judged, OK, OK, OK])
    assert actions[-4:] == ["JudgeCandidate", "SecondCandidateStart", "SecondCandidateStart", "RestoreBaseline"]
    assert state.phase is m.Phase.VERIFY and state.candidate_starts == 3
    assert m.next_action(state) == m.VerifyBaseline(over_starts=ONE, starts=3)
    done = m.advance(state, m.Verified(True, reasons=("over starts: …",), starts=JudgeOutcome.FAIL, baseline_starts=3))
    assert done.result is m.Result.REJECTED
    assert done.reasons[-1] == "rejected: worse beyond the limit against the baseline on all three of its server starts"
    inconclusive = m.advance(state, m.Verified(True, starts=JudgeOutcome.INCONCLUSIVE, baseline_starts=2))
    assert inconclusive.reasons[-1] == ("inconclusive, not rejected: a slower server start could explain the FAIL "
                                        "(judged over two baseline starts)")  # B3 not measured: says two


def test_each_of_the_candidate_s_later_starts_is_asked_by_its_number():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=ONE, starts=3)],
                     limits=m.Limits(bench_rounds=1))
    assert m.next_action(state) == m.SecondCandidateStart(over_starts=ONE, start=2)
    state = m.advance(state, OK)
    assert state.phase is m.Phase.SECOND_START and m.next_action(state) == m.SecondCandidateStart(over_starts=ONE, start=3)


def test_an_abort_on_the_candidate_s_third_start_rolls_back_keeping_what_was_measured():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=ONE, starts=3), OK],
                     limits=m.Limits(bench_rounds=1))
    aborted = m.advance(state, m.Interrupted("aborted by the operator"))
    assert aborted.phase is m.Phase.ROLLBACK and aborted.result is m.Result.INCONCLUSIVE
    assert aborted.over_starts == ONE and aborted.candidate_starts == 2
    assert m.next_action(m.advance(aborted, OK)) == m.VerifyBaseline(over_starts=ONE, starts=3)


@pytest.mark.parametrize("steps", [1, 2, 3], ids=["after-C2", "in-the-rollback", "in-the-verification"])
def test_a_controller_killed_on_three_starts_a_side_resumes_at_the_rollback_and_still_asks_for_b3(steps):
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL, over_starts=ONE, starts=3)] + [OK] * steps)
    resumed = m.resume_after_crash(m.State.from_dict(json.loads(json.dumps(state.to_dict()))), "the controller died")
    assert resumed.phase is m.Phase.ROLLBACK and resumed.result is m.Result.REJECTED
    assert m.next_action(m.advance(resumed, OK)) == m.VerifyBaseline(over_starts=ONE, starts=3)


def test_a_candidate_that_does_not_come_back_on_its_third_start_is_rejected_on_that():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.INCONCLUSIVE, over_starts=ONE, starts=3), OK,
                                     m.Failed(("the candidate did not come back on a third server start (crashed)",)), OK],
                     limits=m.Limits(bench_rounds=1))
    assert state.result is m.Result.REJECTED and state.over_starts == ()
    assert m.next_action(state) == m.VerifyBaseline()


def test_a_state_saved_before_three_starts_existed_decides_over_two_as_then():
    state, _ = drive(HAPPY_PREFIX + [m.Judged(JudgeOutcome.FAIL, over_starts=PLAN)])
    old = {k: v for k, v in state.to_dict().items() if k not in ("starts", "candidate_starts")}
    loaded = m.State.from_dict(json.loads(json.dumps(old)))
    assert loaded == state and loaded.phase is m.Phase.SECOND_START
    after = m.advance(loaded, OK)
    assert after.phase is m.Phase.ROLLBACK
    assert m.next_action(m.advance(after, OK)) == m.VerifyBaseline(over_starts=PLAN)
