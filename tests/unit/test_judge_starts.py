"""Deciding over server starts: a verdict a restart offset could explain, judged on a second baseline start."""

from __future__ import annotations

import json
import math

import pytest
from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy, LevelRule
from deployctl.judge.noise import DEFAULT_RESTART_WEIGHT
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import (
    FOCUS_TRIALS, MIN_RESTART_PAIRS, RESTART_GUARD, SHOCK_VERIFICATION_TRIALS, VERIFICATION_TRIALS, judge_over_starts, over_starts_needed,
    pass_robust, recheck_pass, restart_in_force, verification_plan,
)
from deployctl.judge.stats import DEFAULT_RESTART, RestartNoise
from deployctl.judge.verdict import judge

LEVELS = (1, 4, 16, 32, 64)
POLICY = JudgePolicy()


def start(speed: float, trials: list[float], levels: tuple[int, ...] = LEVELS):
    """One server start of a sweep: every level at ``speed`` (its restart offset and any change) × the trials,
    rotated level by level so that the levels do not move together trial by trial."""
    return sweep({c: [speed * v for v in trials[j % len(trials):] + trials[:j % len(trials)]]
                  for j, c in enumerate(levels)})


B1 = start(1.0, [1000.0, 1010.0, 995.0])


def learned(sigma: float, pairs: int) -> RestartNoise:
    """A σ_r as ``noise.learn_restart`` returns it from ``pairs`` pairs."""
    return RestartNoise(sigma, DEFAULT_RESTART_WEIGHT + pairs, f"learned from {pairs} restart pair(s)")


def test_an_unchanged_candidate_on_a_slow_start_fails_stage_one_but_not_over_starts():
    # The candidate's start runs 5 % slow, its release unchanged: with the default 0.5 % restart σ stage 1
    # fails it; the guard says a restart offset could explain it, and the second baseline start (as fast
    # as the first) does not make it a regression.
    c1 = start(0.95, [1001.0, 994.0, 1006.0, 1000.0, 999.0])
    verdict = judge(B1, c1, POLICY)
    assert verdict.outcome is JudgeOutcome.FAIL
    assert over_starts_needed(verdict, B1, c1, POLICY, None, None)
    over = judge_over_starts([B1, start(1.0, [1003.0, 997.0])], c1, POLICY, None, None)
    assert over.outcome is JudgeOutcome.INCONCLUSIVE
    assert over.reasons[0].startswith("INCONCLUSIVE over server starts: the sweep's mean change −5.1 %")
    assert "a restart offset of up to 2.0 % a start could explain it" in over.reasons[0]
    assert over.restart.sigma == RESTART_GUARD and over.restart.source.startswith("guard")
    assert over.reasons[1].startswith("restart σ 2.0 % a start: guard: this host has 1 restart pair(s)")


def test_a_regression_of_twenty_percent_fails_over_starts():
    c1 = start(0.80, [1001.0, 994.0, 1006.0])
    over = judge_over_starts([B1, start(1.01, [1003.0, 997.0])], c1, POLICY, None, None)
    assert over.outcome is JudgeOutcome.FAIL
    assert over.reasons[0].startswith("FAIL over server starts: the sweep's mean change −20.")
    assert "regressed beyond the limit even allowing a restart offset of 2.0 % a start" in over.reasons[0]
    assert over.interval is not None and over.interval.high < -0.05
    assert [line.split(":")[0] for line in over.reasons[2:-1]] == [f"C={c}" for c in LEVELS]
    assert over.reasons[-1] == "between the starts (sweep means): baseline start 2 +0.8 % from start 1"
    data = json.loads(json.dumps(over.to_dict()))
    assert data["outcome"] == "FAIL" and data["restart"]["sigma"] == RESTART_GUARD


def test_a_regression_the_guard_cannot_explain_is_robust_and_not_sent_over_starts():
    c1 = start(0.80, [1001.0, 994.0])
    verdict = judge(B1, c1, POLICY)
    assert verdict.outcome is JudgeOutcome.FAIL
    assert not over_starts_needed(verdict, B1, c1, POLICY, None, None)


def test_only_a_final_inconclusive_or_a_fail_is_decided_over_starts():
    kept = start(1.0, [1002.0, 1001.0])
    assert not over_starts_needed(judge(B1, kept, POLICY), B1, kept, POLICY, None, None)  # PASS
    unclear = start(1.0, [900.0, 1000.0])
    asking = judge(B1, unclear, POLICY)
    assert not asking.final and not over_starts_needed(asking, B1, unclear, POLICY, None, None)
    spent = start(1.0, [900.0, 1000.0])
    final = judge(B1, spent, POLICY.model_copy(update={"max_trials": 2}))
    assert final.final and final.outcome is JudgeOutcome.INCONCLUSIVE
    assert over_starts_needed(final, B1, spent, POLICY, None, None)


def test_a_learned_restart_sigma_replaces_the_guard_only_with_enough_pairs():
    assert restart_in_force(None).sigma == RESTART_GUARD
    assert restart_in_force(DEFAULT_RESTART).sigma == RESTART_GUARD
    few = restart_in_force(learned(0.002, MIN_RESTART_PAIRS - 1))
    assert few.sigma == RESTART_GUARD and few.source.startswith("guard")
    enough = restart_in_force(learned(0.002, MIN_RESTART_PAIRS))
    assert 0.002 < enough.sigma < 0.006 and enough.df is None  # its upper bound, taken as known
    assert enough.source.startswith(f"learned from {MIN_RESTART_PAIRS} restart pair(s)")
    more = restart_in_force(learned(0.002, 20))
    assert 0.002 < more.sigma < enough.sigma  # more pairs, a tighter bound
    wild = restart_in_force(learned(0.03, 2))
    assert wild.sigma == pytest.approx(0.03) and "above the 2 % guard" in wild.source


def test_a_host_that_learned_small_restarts_keeps_its_fail_without_a_second_start():
    c1 = start(0.94, [1001.0, 994.0, 1006.0])
    verdict = judge(B1, c1, POLICY, restart=learned(0.002, 12))
    assert verdict.outcome is JudgeOutcome.FAIL
    assert over_starts_needed(verdict, B1, c1, POLICY, None, None)  # a brand-new host: the guard
    assert not over_starts_needed(verdict, B1, c1, POLICY, None, learned(0.002, 12))
    over = judge_over_starts([B1, start(1.0, [1003.0, 997.0])], c1, POLICY, None, learned(0.002, 12))
    assert over.outcome is JudgeOutcome.FAIL
    assert "learned from 13 restart pair(s) of this host (this promote's own starts included)" \
        in over.reasons[1]


def test_the_two_baseline_starts_are_a_restart_pair_pooled_into_the_learned_sigma():
    c1 = start(0.92, [1001.0, 994.0, 1006.0])
    host = learned(0.002, MIN_RESTART_PAIRS - 1)
    close = judge_over_starts([B1, start(1.0, [1003.0, 997.0])], c1, POLICY, None, host)
    assert close.restart.source.startswith(f"learned from {MIN_RESTART_PAIRS} restart pair(s)")  # the eighth
    assert close.restart.sigma < RESTART_GUARD and close.outcome is JudgeOutcome.FAIL
    apart = judge_over_starts([B1, start(1.06, [1003.0, 997.0])], c1, POLICY, None, host)
    # 6 % between the two baseline starts: the host's restarts move more than it had learned.
    assert apart.restart.sigma > 2 * close.restart.sigma
    assert apart.reasons[-1] == "between the starts (sweep means): baseline start 2 +5.8 % from start 1"


def test_levels_that_move_together_count_as_one_trial_each():
    # A host that learned tiny restart offsets: the within-run part decides, with the df it has.
    host = learned(0.001, 20)
    shocks = [1.0, 1.03, 0.98]
    moved = sweep({c: [1000.0 * s * (1 + 0.001 * i) for i, s in enumerate(shocks)] for c in LEVELS})
    over = judge_over_starts([moved, start(1.0, [1030.0, 985.0])], start(0.9, [1000.0, 1025.0]), POLICY, None, host)
    assert over.interval is not None and over.interval.df < 5  # the trials' df a start (2 + 1 + 1), not 5 levels'
    apart = judge_over_starts([start(1.0, shocks), start(1.0, [1030.0, 985.0])], start(0.9, [1000.0, 1025.0]),
                              POLICY, None, host)
    assert apart.interval is not None and apart.interval.df > 15


def test_levels_that_move_together_get_more_verification_trials():
    shocks = [1.0, 1.03, 0.98]
    moved = sweep({c: [1000.0 * s * (1 + 0.001 * (i + j)) for i, s in enumerate(shocks)] for j, c in enumerate(LEVELS)})
    assert verification_plan(POLICY, moved) == {c: min(SHOCK_VERIFICATION_TRIALS, POLICY.max_trials) for c in LEVELS}
    assert verification_plan(POLICY, B1, start(0.98, [1001.0, 994.0])) == {c: 1 for c in LEVELS}
    assert verification_plan(JudgePolicy(levels={c: LevelRule(role="advisory") for c in LEVELS}), B1) == {}


def test_a_level_the_candidate_is_beyond_the_limit_at_gets_the_most_verification_trials():
    slow = sweep({c: [v * (0.85 if c == 64 else 1.0) for v in [1001.0, 994.0, 1006.0]] for c in LEVELS})
    assert verification_plan(POLICY, B1, slow) == {1: 1, 4: 1, 16: 1, 32: 1, 64: min(FOCUS_TRIALS, POLICY.max_trials)}


def test_no_level_gets_the_most_trials_when_the_whole_sweep_moved():
    # −8 % everywhere, −15 % at C=64: the other levels' mean is past FOCUS_SWEEP of the limit: the sweep's test decides
    slow = sweep({c: [v * (0.85 if c == 64 else 0.92) for v in [1001.0, 994.0, 1006.0]] for c in LEVELS})
    assert verification_plan(POLICY, B1, slow) == {c: 1 for c in LEVELS}


def test_the_verification_measures_every_critical_level():
    policy = JudgePolicy(levels={1: LevelRule(role="advisory")})
    assert verification_plan(policy, B1) == {4: 2, 16: 2, 32: 2, 64: 2}  # 5 trials over the 4 critical levels
    assert verification_plan(POLICY, B1) == {c: 1 for c in LEVELS}
    assert verification_plan(POLICY, start(1.0, [1000.0], levels=(64,))) == {64: VERIFICATION_TRIALS}


def test_one_baseline_start_or_no_common_level_cannot_decide():
    with pytest.raises(ValueError, match="two server starts"):
        judge_over_starts([B1], B1, POLICY, None, None)
    elsewhere = start(1.0, [1000.0, 1001.0], levels=(8,))
    over = judge_over_starts([B1, elsewhere], B1, POLICY, None, None)
    assert over.outcome is JudgeOutcome.INCONCLUSIVE and "no critical level" in over.reasons[0]
    assert math.isclose(over.restart.sigma, RESTART_GUARD)


def test_a_second_candidate_start_halves_the_restart_part_on_the_candidate_side():
    c1, c2 = start(0.90, [1001.0, 994.0, 1006.0]), start(0.93, [1000.0, 1004.0])
    b2 = start(1.01, [1003.0, 997.0])
    one = judge_over_starts([B1, b2], c1, POLICY, None, None)
    two = judge_over_starts([B1, b2], [c1, c2], POLICY, None, None)
    assert two.interval.se < one.interval.se  # σ_r²·(1/2 + 1/2) instead of σ_r²·(1/2 + 1)
    assert "against the baseline on 2 server starts, the candidate on 2" in two.reasons[0]
    assert two.reasons[-1].endswith("candidate start 2 +3.5 % from start 1")
    assert "2 restart pair(s)" in two.reasons[1]  # B1–B2 and C1–C2, both pooled in


def test_a_regression_at_one_level_only_is_failed_by_that_level_s_own_test():
    slow = sweep({c: [v * (0.80 if c == 64 else 1.0) for v in [1001.0, 994.0, 1006.0]] for c in LEVELS})
    over = judge_over_starts([B1, start(1.0, [1003.0, 997.0])], slow, POLICY, None, None)
    assert over.outcome is JudgeOutcome.FAIL
    assert over.reasons[0].startswith("FAIL over server starts: C=64 −20.")  # the sweep's mean is only −4 %
    assert [line for line in over.reasons if line.endswith("regressed beyond the limit")] == [over.reasons[-2]]


# A stage-1 PASS on one server start a side stands only when a restart offset of the guard's size could not
# hide a regression of twice the limit (``pass_robust``); else it is decided over starts like an INCONCLUSIVE.
ONE = (64,)
B1_ONE = start(1.0, [1000.0, 1030.0, 975.0, 1010.0, 990.0], levels=ONE)


def test_a_one_level_pass_at_minus_five_percent_on_a_brand_new_host_is_decided_over_starts():
    c1 = start(0.955, [1030.0, 960.0, 1010.0], levels=ONE)
    verdict = judge(B1_ONE, c1, POLICY)
    assert verdict.outcome is JudgeOutcome.PASS and verdict.final  # stage 1 alone would keep it
    assert not pass_robust(verdict, B1_ONE, c1, POLICY, None, None)
    assert over_starts_needed(verdict, B1_ONE, c1, POLICY, None, None)
    rechecked = recheck_pass(verdict, B1_ONE, c1, POLICY, None, None)
    assert rechecked.outcome is JudgeOutcome.INCONCLUSIVE and rechecked.final
    assert rechecked.reasons[0] == (
        "INCONCLUSIVE: PASS on one server start a side, but a restart offset of up to 2.0 % a start (guard: this "
        "host has 0 restart pair(s), 12 needed to use its own) could hide a regression of twice the limit (−9.8 %): "
        "decided over server starts")
    assert rechecked.reasons[1] == ("C=64 allowing that offset: −4.6 % (95 % CI −11.0 … +2.2 %), limit −5 %; −9.8 % is "
                                   "not ruled out at 0.033 one-sided")
    assert rechecked.reasons[2] == "stage 1, one server start a side: PASS: no critical level regressed beyond its limit"
    assert rechecked.to_dict()["outcome"] == "INCONCLUSIVE"
    assert over_starts_needed(rechecked, B1_ONE, c1, POLICY, None, None)
    assert verification_plan(POLICY, B1_ONE, c1) == {64: VERIFICATION_TRIALS}


def test_with_inconclusive_keep_candidate_the_words_say_the_policy_keeps_it():
    policy = JudgePolicy(inconclusive="keep_candidate")
    c1 = start(0.955, [1030.0, 960.0, 1010.0], levels=ONE)
    rechecked = recheck_pass(judge(B1_ONE, c1, policy), B1_ONE, c1, policy, None, None)
    assert rechecked.outcome is JudgeOutcome.INCONCLUSIVE
    assert rechecked.reasons[0].endswith(
        "could hide a regression of twice the limit (−9.8 %): the policy (inconclusive: keep_candidate) keeps the "
        "candidate all the same")


def test_a_clear_pass_with_small_noise_stands():
    b1 = start(1.0, [1000.0, 1003.0, 998.0], levels=ONE)
    c1 = start(1.0, [1001.0, 999.0, 1002.0], levels=ONE)
    verdict = judge(b1, c1, POLICY)
    assert verdict.outcome is JudgeOutcome.PASS and pass_robust(verdict, b1, c1, POLICY, None, None)
    assert not over_starts_needed(verdict, b1, c1, POLICY, None, None)
    assert recheck_pass(verdict, b1, c1, POLICY, None, None) is verdict


def test_a_harmless_five_level_pass_stands_on_the_sweep_s_mean():
    # −2 % at every level, σ ≈ 2 %: the sweep's mean rules out −9.8 % even allowing a 2 % offset a start.
    c1 = start(0.98, [1005.0, 985.0, 1020.0])
    verdict = judge(start(1.0, [1000.0, 1030.0, 975.0]), c1, POLICY)
    assert verdict.outcome is JudgeOutcome.PASS
    assert pass_robust(verdict, start(1.0, [1000.0, 1030.0, 975.0]), c1, POLICY, None, None)


def test_a_host_that_learned_small_restarts_keeps_a_borderline_pass():
    c1 = start(0.955, [1030.0, 960.0, 1010.0], levels=ONE)
    verdict = judge(B1_ONE, c1, POLICY, restart=learned(0.002, MIN_RESTART_PAIRS))
    assert verdict.outcome is JudgeOutcome.PASS
    assert pass_robust(verdict, B1_ONE, c1, POLICY, None, learned(0.002, MIN_RESTART_PAIRS))
    assert not pass_robust(verdict, B1_ONE, c1, POLICY, None, learned(0.002, MIN_RESTART_PAIRS - 4))  # too few pairs


def test_only_a_final_pass_is_rechecked_and_a_sweep_without_critical_levels_passes_as_it_is():
    advisory = JudgePolicy(levels={64: LevelRule(role="advisory")})
    c1 = start(0.95, [1005.0, 985.0, 1020.0], levels=ONE)
    verdict = judge(B1_ONE, c1, advisory)
    assert verdict.outcome is JudgeOutcome.PASS and pass_robust(verdict, B1_ONE, c1, advisory, None, None)
    slow = start(0.80, [1005.0, 985.0, 1020.0], levels=ONE)
    failed = judge(B1_ONE, slow, POLICY)
    assert failed.outcome is JudgeOutcome.FAIL and recheck_pass(failed, B1_ONE, slow, POLICY, None, None) is failed
