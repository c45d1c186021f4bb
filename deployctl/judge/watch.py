"""The canary's watch of a live release (pure): its measurement now against its own at promotion time,
and the change points of its whole watch series → ``ok``, ``degraded`` or ``unclear``, with the reasons.

Two ways to be degraded, because they catch different things:
- the judge's verdict on this watch is FAIL: a loss beyond the policy's limit, beyond noise, now;
- a significant step down of at least ``change_min_pct`` in the series of watches (E-divisive means):
  a small persistent loss that no single watch proves.

``unclear`` is the judge's INCONCLUSIVE (or INVALID) with its trial budget spent and no step down in the
series: the watch could not tell, e.g. −35 % measured with a 95 % interval of −57 … −9 % against a −8 %
limit. It is never read as ``ok`` (nothing was shown to be fine) nor acted on as ``degraded`` (nothing
was shown to be worse): the canary says so, and its next run looks again sooner.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Mapping, Sequence

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import CanaryPolicy, JudgePolicy
from deployctl.judge.metrics import METRICS
from deployctl.judge.outcome import JudgeOutcome

if TYPE_CHECKING:
    from deployctl.judge.changepoint import ChangePoint
    from deployctl.judge.verdict import Verdict


class Health(str, Enum):
    OK = "ok"
    DEGRADED = "degraded"
    UNCLEAR = "unclear"


@dataclass(frozen=True)
class LevelShift:
    concurrency: int
    point: ChangePoint
    watches: int  # the series' length: point.index of them came before the change


@dataclass(frozen=True)
class WatchVerdict:
    health: Health
    verdict: Verdict | None  # None when the release has nothing to compare with yet (its first watch)
    shifts: tuple[LevelShift, ...]
    reasons: tuple[str, ...]

    @property
    def degraded(self) -> bool:
        return self.health is Health.DEGRADED


@dataclass(frozen=True)
class CheckVerdict:
    """Another check's outcome in the same watch (``deployctl.flows.canary_watch.WatchCheck``)."""

    health: Health
    reasons: tuple[str, ...] = ()


_WORST_FIRST = (Health.DEGRADED, Health.UNCLEAR, Health.OK)


def with_checks(verdict: WatchVerdict, checks: Sequence[tuple[str, CheckVerdict]]) -> WatchVerdict:
    """The watch's verdict with the other checks folded in: the worst outcome wins, every reason is kept
    (each check's under its name)."""
    if not checks:
        return verdict
    health = min([verdict.health, *(c.health for _, c in checks)], key=_WORST_FIRST.index)
    reasons = [*verdict.reasons, *(f"{name}: {r}" for name, c in checks for r in c.reasons)]
    return WatchVerdict(health, verdict.verdict, verdict.shifts, tuple(reasons))


def level_means(result: BenchResult, metric: str) -> dict[int, float]:
    """The mean of ``metric`` over the valid trials of each level (the watch series' one point per level)."""
    value = METRICS[metric].value
    out = {}
    for level in result.levels:
        values = [v for t in level.trials if t.valid and (v := value(t)) is not None]
        if values:
            out[level.concurrency] = sum(values) / len(values)
    return out


def watch_verdict(reference: BenchResult | None, now: BenchResult, series: Mapping[int, Sequence[float]],
                  judge_policy: JudgePolicy, canary: CanaryPolicy) -> WatchVerdict:
    """``series``: per level, the metric of every watch of this release in order, this one last."""
    reasons: list[str] = []
    # The verdict and the change points here and in _shifts, not at the top: they need numpy and scipy, and the
    # health words and value types above are read by `deployctl canary`'s parser and the output gate (benchmarks/cli_startup.py).
    from deployctl.judge.verdict import judge

    verdict = judge(reference, now, judge_policy) if reference is not None else None
    if verdict is None:
        reasons.append("first measurement of this release: it is the reference from now on")
    elif verdict.outcome is JudgeOutcome.FAIL:
        reasons.extend(lv.reason for lv in verdict.levels if lv.role == "critical" and lv.state.value == "FAIL")
    elif verdict.outcome in (JudgeOutcome.INCONCLUSIVE, JudgeOutcome.INVALID):
        reasons.extend(f"not decided: {lv.reason}" for lv in verdict.levels
                       if lv.role == "critical" and lv.state.value in ("UNKNOWN", "INVALID"))
    higher_is_better = METRICS[judge_policy.metric].higher_is_better
    shifts = tuple(_shifts(series, canary.change_max_pvalue))
    worse = [s for s in shifts if _loss_pct(s.point, higher_is_better) >= canary.change_min_pct
             and judge_policy.rule_for(s.concurrency).role == "critical"]
    reasons.extend(
        f"C={s.concurrency}: a persistent step of {s.point.change_pct:+.1f} % from watch {s.point.index + 1} of "
        f"{s.watches} (change point, p={s.point.pvalue:.1g})" for s in worse
    )
    degraded = (verdict is not None and verdict.outcome is JudgeOutcome.FAIL) or bool(worse)
    unclear = verdict is not None and verdict.outcome in (JudgeOutcome.INCONCLUSIVE, JudgeOutcome.INVALID)
    health = Health.DEGRADED if degraded else Health.UNCLEAR if unclear else Health.OK
    return WatchVerdict(health, verdict, shifts, tuple(reasons))


def _shifts(series: Mapping[int, Sequence[float]], max_pvalue: float) -> list[LevelShift]:
    from deployctl.judge.changepoint import ChangePoint, change_points

    out = []
    for c, values in sorted(series.items()):
        points = change_points(values, max_pvalue=max_pvalue)
        if points:  # the release against its first segment: where it stands now
            first, last = points[0], points[-1]
            overall = ChangePoint(last.index, first.mean_before, last.mean_after, max(p.pvalue for p in points))
            out.append(LevelShift(c, overall, len(values)))
    return out


def _loss_pct(point: ChangePoint, higher_is_better: bool) -> float:
    return -point.change_pct if higher_is_better else point.change_pct
