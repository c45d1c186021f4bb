"""Which of one side's trials at a level stalled: set aside, or one more trial before the judge decides — pure.

A stall is a hiccup of the host (docs/judge.md, "Stalls"): a trial that reads −36 % among clean ones at a
CV of about 1 %. The outlier rule (``stats.outlier_indices``) cannot see it among a level's first two
trials, and two stalls at one level are never its minority. So a trial is a *suspect* when

- its requests' timings show a stall (``TrialResult.stall``, ``deployctl.bench.stalls``), or
- it is further below the side's best trial than the noise allows (``STALL_SDS`` robust standard
  deviations of a pair's difference, ``stall_sigma``: a stall only ever makes a trial worse),

and the suspects are set aside when the side's other trials are at least two and the majority (or when
every suspect's own timings show its stall): the judgement then rests on trials that agree. A mix without such a majority asks one more trial at the level
first (``more``); set-aside trials do not count against ``max_trials``, up to ``MAX_STALL_EXTRA`` a side.
A slowdown every trial shows is never set aside: then nothing is a suspect by value, and a timing
signature every one of ``CONSISTENT`` trials shows (C above the server's capacity queues the batch's tail
every time) is the server's behaviour, judged as it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median
from typing import Iterable, Sequence

from deployctl.bench.result import TrialResult
from deployctl.judge.wording import format_pct

# A trial this far below its side's best (in log) is not noise: ``STALL_SDS`` standard deviations of a pair's
# difference (σ·√2) at the sweep's robust σ (``stall_sigma``), never closer than ``STALL_GAP_LOG`` (−14 %).
# At σ = 3 % that is 0.21 (−19 %); a stall reads −36 % (0.45); a host noisier than 6 % a trial hides it.
STALL_SDS = 5.0
STALL_GAP_LOG = 0.15
# A timing signature this many trials in a row show is the server's, not a hiccup: two stalls in a row
# (0.6 % of levels at 8 % stalls) are told from it by one more trial. A candidate whose baseline does not show
# it needs one more again (``judge``): three stalls in a row, 0.05 % of a side's levels at 8 %, were half of an
# unchanged candidate's false FAILs on the default sweep (benchmarks/judge_calibration.py --stalls).
CONSISTENT = 3
# At most this many trials a side and level may be set aside or asked on top of ``max_trials``: stalls
# are a few % of trials, and a host that stalls more than that is noise the judge must see.
MAX_STALL_EXTRA = 2


@dataclass(frozen=True)
class StallSort:
    """One side's valid trials at one level, sorted into those judged and those set aside."""

    kept: tuple[tuple[TrialResult, float], ...]  # (trial, value) the judge uses
    set_aside: tuple[str, ...] = ()  # one line per trial set aside, in the operator's words
    more: str | None = None  # why one more trial is wanted before deciding; None: nothing unresolved
    extra: int = 0  # trials beyond max_trials this side may run: one per suspect, at most MAX_STALL_EXTRA

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.kept]


def stall_sigma(sides: Iterable[Sequence[float]]) -> float:
    """A robust σ of the log trial values of ``sides`` (each one side's valid trials at one level), 0 with none.

    1.4826 × the median absolute deviation from each side's median, scaled by √(n/(n − 1)) for the side's
    own median: a stall or two among a sweep's trials do not move it, as they would a pooled variance."""
    deviations = []
    for values in sides:
        if len(values) < 2:
            continue
        logs = [math.log(v) for v in values]
        mid = median(logs)
        scale = math.sqrt(len(logs) / (len(logs) - 1))
        deviations += [abs(x - mid) * scale for x in logs]
    return 1.4826 * median(deviations) if deviations else 0.0


def sort_stalls(
    trials: Sequence[tuple[TrialResult, float]], concurrency: int, side: str, *, sigma: float = 0.0,
    higher_is_better: bool = True, consistent: int = CONSISTENT,
) -> StallSort:
    """``trials`` (valid, with their value of the judged metric) sorted for the judge; ``sigma``: the sweep's
    ``stall_sigma``, which a trial's distance below its side's best is held against; ``consistent``: how many
    trials all showing a stall are the server's behaviour.

    ``side`` names them in the lines (``candidate``: ``C=64 candidate trial 2 stalled 0.9 s …: set aside``)."""
    sign = 1 if higher_is_better else -1
    logs = [sign * math.log(v) for _, v in trials]
    best = max(logs, default=0.0)
    gap = max(STALL_GAP_LOG, STALL_SDS * math.sqrt(2) * sigma)
    suspects = [(t, _why(t, sign * (x - best))) for (t, _), x in zip(trials, logs)
                if t.stall is not None or best - x > gap]
    if not suspects:
        return StallSort(tuple(trials))
    extra = min(len(suspects), MAX_STALL_EXTRA)
    if len(suspects) == len(trials) >= consistent:  # every trial shows it: the server's behaviour, judged as it is
        return StallSort(tuple(trials))
    clean = tuple((t, v) for t, v in trials if all(t is not s for s, _ in suspects))
    # Trials whose own timings show the stall need no majority against them: two clean trials that agree do.
    seen = all(t.stall is not None for t, _ in suspects)
    if len(clean) >= 2 and (len(clean) > len(suspects) or seen):
        lines = tuple(f"C={concurrency} {side} trial {t.trial + 1} {why}: set aside" for t, why in suspects)
        return StallSort(clean, lines, extra=extra)
    named = ", ".join(f"trial {t.trial + 1} {why}" for t, why in suspects)
    return StallSort(tuple(trials), more=f"C={concurrency}: the {side}'s {named}: one more trial before deciding",
                     extra=extra)


def _why(t: TrialResult, log_gap: float) -> str:
    if t.stall is not None:
        return t.stall
    return (f"read {format_pct(math.expm1(log_gap))} against the side's best trial, beyond what the noise allows "
            "(a stall)")
