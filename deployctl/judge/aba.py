"""After a drift: does the candidate's verdict still stand? The A-B-A reading of a rolled-back promote.

A promote measures the baseline (A), then the candidate (B), and — after a rollback — the restored
baseline again (A′, the verification). When A′ is outside A's noise (``drift.drift_check``), the
environment moved somewhere in between, and the B-against-A verdict alone cannot say whether the candidate
or the environment did it. B against A′ can, where the verification measured:

- a FAIL stands when the candidate is also clearly worse than the restored baseline (worse than both
  the before and after baselines, beyond the limit): the environment moved, the candidate regressed too;
- a PASS stands when the candidate is not clearly worse than the restored baseline either;
- anything else is in doubt: the after-baseline is as slow as the candidate (or faster than a candidate
  that passed against a slower A), so the drift may explain the verdict. The promote is then
  INCONCLUSIVE (exit 11), never rejected or passed on it.

Pure: the three sweeps, the judged outcome and the policy in, an ``AbaVerdict`` out. The verification runs
one trial at the policy's ``verify_concurrency``; the candidate's trials give the interval its spread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deployctl.bench.result import BenchResult, LevelResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.stats import log_ratio_interval
from deployctl.judge.metrics import METRICS, Metric
from deployctl.judge.wording import format_interval


@dataclass(frozen=True)
class AbaVerdict:
    stands: bool  # the candidate's verdict holds against the restored baseline too
    reasons: tuple[str, ...]


def aba_check(candidate: BenchResult, after: BenchResult, judged: JudgeOutcome, policy: JudgePolicy) -> AbaVerdict:
    """Does ``judged`` (the candidate against the baseline before) hold against ``after``, the restored
    baseline the verification measured? Only FAIL and PASS can stand; the levels compared are ``after``'s."""
    metric = METRICS[policy.metric]
    worse: list[str] = []
    compared: list[str] = []
    for lv in after.levels:
        cand = candidate.level(lv.concurrency)
        a_ok, c_ok = _values(lv, metric), _values(cand, metric) if cand else []
        iv = log_ratio_interval(a_ok, c_ok, policy.confidence) if a_ok and c_ok else None
        if iv is None:
            continue
        limit = policy.rule_for(lv.concurrency).limit_pct or policy.limit_pct
        sign = 1 if metric.higher_is_better else -1
        clearly_worse = (iv.high < 0 if sign > 0 else iv.low > 0) and sign * iv.change < -limit / 100
        text = f"C={lv.concurrency}: candidate {format_interval(iv)} against the restored baseline, limit −{limit:g} %"
        compared.append(text)
        if clearly_worse:
            worse.append(text)
    if not compared:
        return AbaVerdict(False, ("A-B-A: no level of the verification to compare the candidate with: the drift "
                                  "leaves the verdict in doubt",))
    if judged is JudgeOutcome.FAIL and worse:
        return AbaVerdict(True, ("A-B-A: the candidate is clearly worse than the restored baseline too "
                                 "(worse than both the before and after baselines): the rejection stands",
                                 *worse))
    if judged is JudgeOutcome.PASS and not worse:
        return AbaVerdict(True, ("A-B-A: the candidate is not clearly worse than the restored baseline either: "
                                 "the pass stands", *compared))
    if judged is JudgeOutcome.FAIL:
        why = "the candidate is not clearly worse than the restored baseline, so the drift may explain the rejection"
    else:
        why = "the candidate is clearly worse than the restored baseline, so the drift may explain the pass"
    return AbaVerdict(False, (f"A-B-A: {why}: inconclusive", *compared))


def _values(level: LevelResult, metric: Metric) -> list[float]:
    out = []
    for t in level.trials:
        value = metric.value(t) if t.valid else None
        if value is not None and math.isfinite(value) and value > 0:
            out.append(float(value))
    return out
