"""Did the restored baseline come back as it was measured before the promotion? The rollback's
verification against the baseline, level by level (``drift_check``), and the verdict with it marked."""

from __future__ import annotations

from dataclasses import replace

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.metrics import METRICS, split_trials
from deployctl.judge.outcome import LevelState
from deployctl.judge.stats import log_ratio_interval
from deployctl.judge.verdict import DriftVerdict, LevelVerdict, Verdict
from deployctl.judge.wording import format_interval


def drift_check(pre: BenchResult, verify: BenchResult, policy: JudgePolicy) -> DriftVerdict:
    """Did the restored baseline come back as it was measured before the promotion?

    Only the levels the verification ran are compared. A level drifted when the difference is
    statistically clear and beyond the policy's limit in either direction (a host that got faster
    changed too). Unclear levels are reported, not counted as drift.
    """
    metric = METRICS[policy.metric]
    levels = []
    for lv in verify.levels:
        before = pre.level(lv.concurrency)
        if before is None:
            continue
        b_ok, _ = split_trials(before.trials, metric)
        v_ok, _ = split_trials(lv.trials, metric)
        c = lv.concurrency
        iv = log_ratio_interval(b_ok, v_ok, policy.confidence) if b_ok and v_ok else None
        limit = policy.rule_for(c).limit_pct or policy.limit_pct
        if iv is None:
            state, text = LevelState.UNKNOWN, f"C={c}: not enough valid trials to compare"
        else:
            moved = (iv.high < 0 or iv.low > 0) and abs(iv.change) > limit / 100
            state = LevelState.FAIL if moved else LevelState.PASS
            text = f"C={c}: restored baseline {format_interval(iv)} against before the promotion, limit ±{limit:g} %"
        levels.append(LevelVerdict(concurrency=c, role="critical", state=state, reason=text))
    drifted = [lv for lv in levels if lv.state is LevelState.FAIL]
    if not levels:
        return DriftVerdict(False, ("drift check: no level in common with the pre-promotion baseline",))
    if drifted:
        head = (
            "environment drift: the restored baseline no longer performs as before the promotion, "
            "so the candidate's result is not the candidate's alone"
        )
        return DriftVerdict(True, (head, *(lv.reason for lv in levels)), tuple(levels))
    return DriftVerdict(False, ("no drift: the restored baseline performs as before the promotion",
                                *(lv.reason for lv in levels)), tuple(levels))


def with_drift(verdict: Verdict, drift: DriftVerdict) -> Verdict:
    """The verdict as it stands after the rollback's verification, drift marked in its reasons."""
    reasons = verdict.reasons + (drift.reasons if drift.drift else drift.reasons[:1])
    return replace(verdict, drift=drift, reasons=reasons)
