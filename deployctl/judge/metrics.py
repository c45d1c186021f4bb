"""What the judge reads off a trial: the metrics, and which of a level's trial values it uses (invalid
trials, stalls and outliers set aside: ``stalls.sort_stalls``, ``stats.outlier_indices``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Callable, Iterable

from deployctl.bench.result import BenchResult, LevelResult, TrialResult
from deployctl.judge.stalls import sort_stalls, stall_sigma
from deployctl.judge.stats import outlier_indices


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    higher_is_better: bool
    value: Callable[[TrialResult], float | None]


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("output_tok_s", "output tok/s", True, lambda t: t.output_tok_s),
        Metric("per_request_tok_s", "per-request tok/s", True, lambda t: t.per_request_tok_s.mean),
        Metric("ttft_p99_s", "TTFT p99", False, lambda t: t.ttft_s.p99),
        Metric("itl_p99_s", "ITL p99", False, lambda t: t.itl_s.p99),
        Metric("e2e_p50_s", "E2E p50", False, lambda t: t.e2e_s.p50),
    )
}


def judgeable(trials: Iterable[TrialResult], metric: Metric, sigma: float = 0.0) -> list[float]:
    """The values of ``metric`` the judge uses (invalid trials left out, stalls and outliers set aside);
    ``sigma``: the sweep's ``stall_scale``."""
    return [v for _, v in judged_trials(trials, metric, sigma)]


def judgeable_by_trial(level: LevelResult | None, metric: str, sigma: float = 0.0) -> dict[int, float]:
    """A level's values of ``metric`` the judge would use, by trial number (invalid, stalled and outlier trials
    left out, as ``judgeable`` does)."""
    if level is None:
        return {}
    return {t.trial: v for t, v in judged_trials(level.trials, METRICS[metric], sigma)}


def judged_trials(trials: Iterable[TrialResult], metric: Metric, sigma: float = 0.0) -> list[tuple[TrialResult, float]]:
    """The valid trials with their value of ``metric``, stalls (``stalls.sort_stalls``) and outliers set aside."""
    kept = sort_stalls(valid_trials(trials, metric)[0], 0, "", sigma=sigma,
                       higher_is_better=metric.higher_is_better).kept
    far = set(outlier_indices([v for _, v in kept]))
    return [pair for i, pair in enumerate(kept) if i not in far]


def stall_scale(results: Iterable[BenchResult | None], metric: Metric) -> float:
    """The robust σ (``stalls.stall_sigma``) of every level and side of ``results`` (None: a side not measured)."""
    return stall_sigma([v for _, v in valid_trials(lv.trials, metric)[0]]
                       for r in results if r is not None for lv in r.levels)


def split_trials(trials: Iterable[TrialResult], metric: Metric) -> tuple[list[float], list[tuple[TrialResult, str]]]:
    """The judgeable values, and the trials left out with why."""
    ok, bad = valid_trials(trials, metric)
    return [v for _, v in ok], bad


def valid_trials(
    trials: Iterable[TrialResult], metric: Metric
) -> tuple[list[tuple[TrialResult, float]], list[tuple[TrialResult, str]]]:
    """The valid trials with their value of ``metric``, and the trials left out with why."""
    ok: list[tuple[TrialResult, float]] = []
    bad: list[tuple[TrialResult, str]] = []
    for t in trials:
        value = metric.value(t)
        if t.invalid_reason is not None:
            bad.append((t, t.invalid_reason))
        elif value is None or not math.isfinite(value) or value <= 0:
            bad.append((t, f"no {metric.label} measured"))
        else:
            ok.append((t, float(value)))
    return ok, bad


def set_aside_outliers(values: list[float]) -> tuple[list[float], list[tuple[float, float, int]]]:
    """The values to judge, and the outliers left out as (value, median of all, count of all)."""
    far = set(outlier_indices(values))
    if not far:
        return values, []
    mid = median(values)
    return [v for i, v in enumerate(values) if i not in far], [(values[i], mid, len(values)) for i in sorted(far)]
