"""A host's trial-to-trial noise, learned from repeated measurements of an unchanged release.

Every time deployctl measures a release that did not change (a baseline, a rollback's verification, a
canary watch) the spread of its trials at a level is an A/A sample of that host's noise at that level.
Pooled over samples (within-sample variance only: a release measured on another day may sit at another
mean, which is drift, not noise) it gives an estimate σ with degrees of freedom Σ(nᵢ − 1). The judge
pools that estimate with the variance of the trials in front of it, so a quiet host decides in fewer
trials and a noisy one asks for more; the current trials always weigh in, so a host that became
noisier is seen at once.

What the ledger stores per (deployment, level, metric) is a ``NoiseEstimate``: ``sigma`` (of the log
trial values) and ``df``. ``learn`` folds a new A/A sample into a stored estimate; the prior's weight is
capped (``MAX_PRIOR_DF``) so that old history never drowns what the host does now.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from scipy.special import ndtri

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.stats import MAX_PRIOR_DF, NoiseEstimate, outlier_indices
from deployctl.judge.verdict import METRICS


def sample_sum_of_squares(values: Sequence[float]) -> tuple[float, int]:
    """Σ(log x − mean)² and its degrees of freedom for one A/A sample, outlier trials set aside."""
    far = set(outlier_indices(values))
    logs = [math.log(v) for i, v in enumerate(values) if i not in far and v > 0 and math.isfinite(v)]
    if len(logs) < 2:
        return 0.0, 0
    mean = sum(logs) / len(logs)
    return sum((x - mean) ** 2 for x in logs), len(logs) - 1


def learn(prior: NoiseEstimate | None, samples: Iterable[Sequence[float]]) -> NoiseEstimate | None:
    """``prior`` updated with new A/A samples (each the trial values of one unchanged release at one level)."""
    ss, df = 0.0, 0
    if prior is not None:
        df = min(prior.df, MAX_PRIOR_DF)
        ss = prior.sigma ** 2 * df
    for values in samples:
        s, d = sample_sum_of_squares(values)
        ss, df = ss + s, df + d
    if df == 0:
        return prior
    if df > MAX_PRIOR_DF:
        ss, df = ss * MAX_PRIOR_DF / df, MAX_PRIOR_DF
    return NoiseEstimate(math.sqrt(ss / df), df)


def planned_trials(
    sigma: float | None, limit_log: float, *, false_fail: float, miss: float, least: int, most: int
) -> int:
    """Trials a side for a fixed design that separates 0 from twice the limit at the two error rates.

    The baseline's count is fixed before the candidate runs, so it is sized from the learned σ: a quiet
    host gets ``least``, a noisy one more, never past ``most``. Without a learned σ: ``most``.
    """
    if sigma is None:
        return most
    z = float(ndtri(1 - false_fail) + ndtri(1 - miss))
    n = math.ceil(2 * (sigma * z / (2 * limit_log)) ** 2)
    return min(most, max(least, n))


def baseline_trials(policy: JudgePolicy, sigma: float | None, concurrency: int) -> int:
    """How many baseline trials this level gets: sized from the learned σ, within the policy's bounds.

    ``policy.baseline_trials`` set explicitly wins (an operator's choice); otherwise the learned σ plans
    it between ``min_trials`` and ``max_trials``, and with nothing learned it is ``max_trials``.
    """
    if policy.baseline_trials is not None:
        return policy.baseline_trials
    limit = policy.rule_for(concurrency).limit_pct or policy.limit_pct
    return planned_trials(
        sigma, -math.log1p(-min(limit, 99.0) / 100), false_fail=policy.false_fail, miss=policy.miss,
        least=policy.min_trials, most=policy.max_trials,
    )


def aa_samples(result: BenchResult, metric: str) -> dict[int, list[float]]:
    """The valid trial values of ``metric`` per level of one measurement of an unchanged release."""
    value = METRICS[metric].value
    out: dict[int, list[float]] = {}
    for level in result.levels:
        values = [value(t) for t in level.trials if t.invalid_reason is None]
        good = [float(v) for v in values if v is not None and math.isfinite(v) and v > 0]
        if len(good) >= 2:
            out[level.concurrency] = good
    return out


def learn_from(
    known: Mapping[int, NoiseEstimate], result: BenchResult, metric: str
) -> dict[int, NoiseEstimate]:
    """``known`` (per level, as the ledger holds it) updated with one more A/A measurement."""
    updated = dict(known)
    for c, values in aa_samples(result, metric).items():
        estimate = learn(known.get(c), [values])
        if estimate is not None:
            updated[c] = estimate
    return updated


def learn_history(results: Iterable[BenchResult], metric: str) -> dict[int, NoiseEstimate]:
    """Per level, the noise learned from stored A/A measurements, oldest first (the newest weigh most)."""
    known: dict[int, NoiseEstimate] = {}
    for result in results:
        known = learn_from(known, result, metric)
    return known
