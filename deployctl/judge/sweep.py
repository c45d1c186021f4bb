"""The sweep as a whole: how many of its tests decide, each test's share of the false-fail rate, and the
spreads and shared per-trial shock of its levels that the judge pools (``deployctl.judge.pooling``)."""

from __future__ import annotations

import math
from typing import Iterable, Mapping

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.metrics import METRICS, judgeable, judgeable_by_trial, stall_scale
from deployctl.judge.multiplicity import per_test_rate
from deployctl.judge.pooling import NOTHING, shock_correlation, trial_effect
from deployctl.judge.stats import Spread, spread


def critical_count(policy: JudgePolicy, levels: Iterable[int]) -> int:
    """How many of ``levels`` decide the verdict (the rest are advisory)."""
    return sum(1 for c in levels if policy.rule_for(c).role == "critical")


def false_fail_per_test(policy: JudgePolicy, levels: Iterable[int], correlation: float = 0.0) -> float:
    """The false-fail rate of each test, so that the candidate's is ``policy.false_fail``.

    An unchanged candidate is failed when any decisive test fails: every critical level, each with the
    policy's metric and its latency limits. The rate is split evenly over the checks (the metric, each
    latency limit), and a check's share over its critical levels: evenly (Bonferroni, which bounds the
    candidate's rate whatever the tests' dependence; simulated over the default sweep: 0.73–0.92 % for
    1 %), or, given the levels' ``correlation`` (``sweep_correlation``: a shared per-trial shock seen, for
    the policy's metric), as the largest of that many equicorrelated tests (``multiplicity``).
    """
    critical = critical_count(policy, levels)
    checks = 1 + sum(1 for name, pct in (("ttft_p99_s", policy.ttft_p99_limit_pct),
                                         ("itl_p99_s", policy.itl_p99_limit_pct))
                     if pct is not None and name != policy.metric)
    return per_test_rate(policy.false_fail / checks, max(1, critical), correlation, math.inf)


def sweep_correlation(spreads: Mapping[int, Spread], shock: Spread) -> float:
    """The correlation of the levels' changes that the sweep's shared per-trial shock shows, bounded from
    below (``pooling.shock_correlation``); 0 when no shock is seen."""
    total = sum(spreads.values(), NOTHING)
    if not 1 <= shock.df < total.df:
        return 0.0
    return shock_correlation(shock, Spread(max(0.0, total.ss - shock.ss), total.df - shock.df), len(spreads))


def sweep_spreads(baseline: BenchResult, candidate: BenchResult | None, metric: str) -> dict[int, Spread]:
    """Per level, the within-side spread of the judgeable trials of ``metric`` (stalls and outliers set aside)."""
    out = {}
    sigma = stall_scale((baseline, candidate), METRICS[metric])
    for lv in baseline.levels:
        cand = candidate.level(lv.concurrency) if candidate is not None else None
        b_ok = judgeable(lv.trials, METRICS[metric], sigma)
        c_ok = judgeable(cand.trials if cand else (), METRICS[metric], sigma)
        if b_ok:
            out[lv.concurrency] = spread(b_ok, c_ok)
    return out


def sweep_shock(baseline: BenchResult, candidate: BenchResult | None, metric: str) -> Spread:
    """The sweep's per-trial effect shared by its levels (``pooling.trial_effect``), on the judgeable trials."""
    sides = []
    sigma = stall_scale((baseline, candidate), METRICS[metric])
    for side in (baseline, candidate):
        if side is None:
            continue
        by_level = {}
        for lv in side.levels:
            if baseline.level(lv.concurrency) is None:
                continue
            by_trial = judgeable_by_trial(lv, metric, sigma)
            by_level[lv.concurrency] = {k: math.log(v) for k, v in by_trial.items()}
        sides.append(by_level)
    return trial_effect(sides)
