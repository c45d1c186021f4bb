"""The live judge's drift check with the A-B-A reading: a promote's FAIL in doubt, a canary rollback's not."""

from __future__ import annotations

from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy, Policy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.live.bindings import LiveJudge

POLICY = Policy(judge=JudgePolicy(limit_pct=10), verify_concurrency=[2])
BEFORE = sweep({2: [1000.0, 1010.0, 995.0]})
SLOW_CANDIDATE = sweep({2: [800.0, 806.0, 797.0]})
SLOW_AFTER = sweep({2: [802.0]})


def test_a_drift_like_the_candidates_leaves_a_promotes_fail_in_doubt() -> None:
    drift = LiveJudge(POLICY).drift(BEFORE, SLOW_AFTER, SLOW_CANDIDATE, JudgeOutcome.FAIL)
    assert drift.drifted and drift.in_doubt and any(r.startswith("A-B-A:") for r in drift.reasons)


def test_without_a_drift_or_a_judged_candidate_nothing_is_in_doubt() -> None:
    assert not LiveJudge(POLICY).drift(BEFORE, sweep({2: [1001.0]}), SLOW_CANDIDATE, JudgeOutcome.FAIL).in_doubt
    gate = LiveJudge(POLICY).drift(BEFORE, SLOW_AFTER, None, None)  # rejected by a startup gate: no benchmark
    assert gate.drifted and not gate.in_doubt


def test_a_canary_rollback_trial_that_is_not_better_stays_failed_under_drift() -> None:
    drift = LiveJudge(POLICY, improvement=True).drift(BEFORE, SLOW_AFTER, SLOW_CANDIDATE, JudgeOutcome.FAIL)
    assert drift.drifted and not drift.in_doubt
