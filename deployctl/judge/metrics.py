"""What the judge reads off a trial: the metrics, and which of a level's trial values it uses (invalid
trials and outliers set aside, ``stats.outlier_indices``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Callable, Iterable

from deployctl.bench.result import LevelResult, TrialResult
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


def judgeable(trials: Iterable[TrialResult], metric: Metric) -> list[float]:
    """The values of ``metric`` the judge uses (invalid trials left out, outliers set aside)."""
    return set_aside_outliers(split_trials(trials, metric)[0])[0]


def judgeable_by_trial(level: LevelResult | None, metric: str) -> dict[int, float]:
    """A level's values of ``metric`` the judge would use, by trial number (invalid and outlier trials left
    out, as ``judgeable`` does)."""
    if level is None:
        return {}
    value = METRICS[metric].value
    ok = [t for t in level.trials if t.invalid_reason is None and (v := value(t)) is not None
          and math.isfinite(v) and v > 0]
    far = set(outlier_indices([float(value(t)) for t in ok]))  # type: ignore[arg-type]
    return {t.trial: float(value(t)) for i, t in enumerate(ok) if i not in far}  # type: ignore[arg-type]


def split_trials(trials: Iterable[TrialResult], metric: Metric) -> tuple[list[float], list[tuple[TrialResult, str]]]:
    """The judgeable values, and the trials left out with why."""
    ok: list[float] = []
    bad: list[tuple[TrialResult, str]] = []
    for t in trials:
        value = metric.value(t)
        if t.invalid_reason is not None:
            bad.append((t, t.invalid_reason))
        elif value is None or not math.isfinite(value) or value <= 0:
            bad.append((t, f"no {metric.label} measured"))
        else:
            ok.append(float(value))
    return ok, bad


def set_aside_outliers(values: list[float]) -> tuple[list[float], list[tuple[float, float, int]]]:
    """The values to judge, and the outliers left out as (value, median of all, count of all)."""
    far = set(outlier_indices(values))
    if not far:
        return values, []
    mid = median(values)
    return [v for i, v in enumerate(values) if i not in far], [(values[i], mid, len(values)) for i in sorted(far)]
