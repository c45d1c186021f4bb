"""Does an earlier release measure better now than a degraded live one? (pure)

The canary's ``on_degraded: rollback`` keeps an earlier release only when it is *better now*, measured
minutes apart on today's server, the live release as the baseline and the earlier one as the candidate:

1. the judge PASSes it: no critical level is worse beyond its limit, beyond noise (the promote's rule);
2. at every critical level its median is better than the live release's (higher tok/s; lower latency);
3. at one critical level at least the gain is significant: the judge's confidence interval of the
   change lies wholly on the better side.

(1) alone would restart the server onto a release that is merely "not worse"; (2) alone would follow
noise half of the time when both measure alike (an environment that slowed everything). So a tie keeps
the live release, and the operator is told there was no better release.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import median

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.metrics import METRICS
from deployctl.judge.verdict import Verdict


def improvement_verdict(verdict: Verdict, live: BenchResult, earlier: BenchResult, policy: JudgePolicy) -> Verdict:
    """``verdict`` (the judge's, live as baseline) as it stands for a rollback: a PASS that is not better
    now becomes a FAIL whose first reason says why; every other verdict is returned as it is."""
    if verdict.outcome is not JudgeOutcome.PASS:
        return verdict
    metric = METRICS[policy.metric]
    sign = 1.0 if metric.higher_is_better else -1.0
    critical = [lv for lv in verdict.levels if lv.role == "critical"]
    if not critical:
        return _not_better(verdict, "no critical level to tell better from worse")
    worse, significant = [], []
    for lv in critical:
        now, then = _median(live, lv.concurrency, policy.metric), _median(earlier, lv.concurrency, policy.metric)
        if now is None or then is None or sign * (then - now) <= 0:
            worse.append(f"C={lv.concurrency} ({_text(then)} against {_text(now)} now)")
        interval = next((ch.interval for ch in lv.checks if ch.metric == policy.metric and ch.interval), None)
        if interval is not None and (interval.low > 0 if sign > 0 else interval.high < 0):
            significant.append(lv.concurrency)
    if worse:
        return _not_better(verdict, f"its median is not better at {', '.join(worse)}")
    if not significant:
        return _not_better(verdict, "no critical level is significantly better (every interval includes no change)")
    levels = ", ".join(f"C={c}" for c in significant)
    return replace(verdict, reasons=(f"better now: not worse anywhere, better medians, significantly at {levels}",
                                     *verdict.reasons))


def _not_better(verdict: Verdict, why: str) -> Verdict:
    return replace(verdict, outcome=JudgeOutcome.FAIL, more_trials={},
                   reasons=(f"not better now: {why}; the live release stays", *verdict.reasons))


def _median(result: BenchResult, concurrency: int, metric: str) -> float | None:
    level = result.level(concurrency)
    value = METRICS[metric].value
    found = [v for t in level.trials if t.valid and (v := value(t)) is not None] if level else []
    return median(found) if found else None


def _text(value: float | None) -> str:
    return "nothing" if value is None else f"{value:.1f}"
