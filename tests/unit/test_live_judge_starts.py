"""The live judge says, with each verdict, whether a rollback on it is decided over server starts."""

from __future__ import annotations

from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy, LevelRule, Policy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import verification_plan
from deployctl.live.bindings import LiveJudge

POLICY = Policy(judge=JudgePolicy(limit_pct=3))
LEVELS = (2, 8, 32)
TRIALS = [1000.0, 1010.0, 995.0, 1004.0, 998.0]
NOISY = [1000.0, 1060.0, 950.0, 1030.0, 970.0]


def _start(speed: float, n: int = 5, trials: list[float] = TRIALS, turn: int = 0):
    """Every level at ``speed``, the trials rotated level by level (the levels do not move together)."""
    return sweep({c: [speed * v for v in (trials[j + turn:] + trials[:j + turn])[:n]] for j, c in enumerate(LEVELS)})


def _plan(baseline, candidate):
    return tuple(sorted(verification_plan(POLICY.judge, baseline, candidate).items()))


def test_a_fail_a_restart_offset_could_explain_carries_the_verification_plan() -> None:
    verdict = LiveJudge(POLICY).judge(_start(1.0), _start(0.95))
    assert verdict.outcome is JudgeOutcome.FAIL and verdict.over_starts == _plan(_start(1.0), _start(0.95))
    assert {c for c, _ in verdict.over_starts} == set(LEVELS)  # every critical level


def test_a_robust_fail_and_a_pass_carry_none() -> None:
    assert LiveJudge(POLICY).judge(_start(1.0), _start(0.75)).over_starts == ()
    assert LiveJudge(POLICY).judge(_start(1.0), _start(1.0)).outcome is JudgeOutcome.PASS
    assert LiveJudge(POLICY).judge(_start(1.0), _start(1.0)).over_starts == ()


def test_an_inconclusive_still_asking_for_trials_carries_the_plan_the_machine_uses_if_its_rounds_end() -> None:
    base, cand = _start(1.0, trials=NOISY), _start(0.97, n=2, trials=NOISY, turn=1)
    verdict = LiveJudge(POLICY).judge(base, cand)
    assert verdict.outcome is JudgeOutcome.INCONCLUSIVE and verdict.more_trials and verdict.over_starts == _plan(base, cand)


def test_the_canary_rollback_trial_is_never_decided_over_starts() -> None:
    verdict = LiveJudge(POLICY, improvement=True).judge(_start(1.0), _start(0.95))
    assert verdict.outcome is JudgeOutcome.FAIL and verdict.over_starts == ()


ONE_LEVEL = Policy(judge=JudgePolicy(levels={2: LevelRule(role="advisory"), 8: LevelRule(role="advisory")}))


def test_a_pass_a_restart_offset_could_explain_is_a_final_inconclusive_with_the_plan() -> None:
    # −4.8 % at the one critical level, a noisy candidate (σ ≈ 4 %): stage 1 passes it (not beyond −5 %), a 2 %
    # offset a start could hide −9.8 %.
    base, cand = _start(1.0), _start(0.952, trials=NOISY)
    verdict = LiveJudge(ONE_LEVEL).judge(base, cand)
    assert verdict.outcome is JudgeOutcome.INCONCLUSIVE and not verdict.more_trials
    assert verdict.reasons[0].startswith("INCONCLUSIVE: PASS on one server start a side, but a restart offset of up to "
                                         "2.0 % a start (guard: this host has 0 restart pair(s)")
    assert verdict.record["outcome"] == "INCONCLUSIVE"  # what show / --json / the ledger say
    assert verdict.over_starts == tuple(sorted(verification_plan(ONE_LEVEL.judge, base, cand).items())) == ((32, 5),)
    assert [row.verdict.value for row in verdict.levels if row.concurrency == 32] == ["PASS"]  # stage 1's level


def test_the_canary_rollback_trial_keeps_its_own_reading_of_a_pass() -> None:
    better = LiveJudge(ONE_LEVEL, improvement=True).judge(_start(1.0), _start(1.10))
    assert better.outcome is JudgeOutcome.PASS and better.over_starts == ()
