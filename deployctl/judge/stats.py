"""Confidence intervals for "how much did the candidate change the metric", from a handful of trials.

The unit of replication is the trial (one run of one concurrency level): requests inside a trial share
the server's state and are not independent, so they do not count as replicates.

Method: a two-sample Student t interval on the log of the per-trial values, with the variance pooled
over both sides, turned back into a relative change (``exp(x) − 1``). Why this one:

- Logs make the change a ratio (−12 % means the same at C=1 and C=64) and make benchmark noise,
  which is proportional to the value, roughly constant.
- With 2–5 trials a side a bootstrap has almost nothing to resample (two values give three distinct
  means), and its intervals are too narrow; t intervals are exact for normal noise at any n.
- Welch's unequal-variance interval was simulated too (docs/judge.md): with 2–3 trials on one
  side its degrees of freedom collapse towards 1 and the interval becomes useless
  (t(0.975, 1) = 12.7). Both sides run the same server software on the same host under the same
  load, so one relative noise level for both is the better assumption.
- Sequential looks: the judge may look at the same comparison after every added trial. Each look is a
  fresh chance of a false verdict, so the interval of each look is widened by Bonferroni over the
  number of looks the budget allows (``looks``); the stated confidence then holds over all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import median
from typing import Sequence

# scipy.special, not scipy.stats: the same t quantile (stdtrit is what t.ppf calls) at under half the
# import time, which every deployctl command that judges pays.
from scipy.special import stdtrit


@dataclass(frozen=True)
class ChangeInterval:
    """A relative change (candidate / baseline − 1) with its confidence interval."""

    change: float  # e.g. −0.124 for −12.4 %
    low: float
    high: float
    confidence: float  # the stated (overall) confidence, e.g. 0.95
    n_baseline: int
    n_candidate: int
    df: int
    test: str


def log_ratio_interval(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float,
    *,
    looks: int = 1,
) -> ChangeInterval | None:
    """The change of ``candidate`` over ``baseline`` (positive values) with a pooled-t interval.

    Returns None when there is no estimate of the noise (fewer than three values in all, so no degree
    of freedom is left after the two means). ``looks`` > 1 widens the interval so that ``confidence``
    holds across that many sequential looks (Bonferroni).
    """
    if any(v <= 0 or not math.isfinite(v) for v in (*baseline, *candidate)):
        raise ValueError("log-ratio intervals need positive, finite values")
    nb, nc = len(baseline), len(candidate)
    df = nb + nc - 2
    if nb == 0 or nc == 0 or df < 1:
        return None
    xb = [math.log(v) for v in baseline]
    xc = [math.log(v) for v in candidate]
    mb, mc = sum(xb) / nb, sum(xc) / nc
    ss = sum((x - mb) ** 2 for x in xb) + sum((x - mc) ** 2 for x in xc)
    se = math.sqrt(ss / df * (1 / nb + 1 / nc))
    half = _t_quantile(_per_look_tail(confidence, looks), df) * se
    d = mc - mb
    test = f"pooled t on log trial values, df={df}"
    if looks > 1:
        test += f", Bonferroni over {looks} looks"
    return ChangeInterval(
        change=math.expm1(d),
        low=math.expm1(d - half),
        high=math.expm1(d + half),
        confidence=confidence,
        n_baseline=nb,
        n_candidate=nc,
        df=df,
        test=test,
    )


def outlier_indices(values: Sequence[float], *, k: float = 5.0, floor: float = 0.02) -> list[int]:
    """Indices of trials far from the others: a hiccup of a shared host, not the server's behaviour.

    Robust on logs: a value is an outlier when it lies more than ``k`` robust standard deviations
    (1.4826 × MAD) from the median, the deviation never smaller than ``k × floor`` (10 % by default),
    so ordinary noise of a few percent is never set aside. Needs three values, and sets aside at most
    a minority, so the judgement always rests on the majority of trials. One slow trial otherwise
    widens a pooled-t interval enough to make a neutral candidate INCONCLUSIVE (seen on a loaded
    2-core CI machine: 4255 tok/s among four trials at 5219–5243).
    """
    n = len(values)
    if n < 3:
        return []
    logs = [math.log(v) for v in values]
    med = median(logs)
    mad = median([abs(x - med) for x in logs])
    limit = k * max(1.4826 * mad, floor)
    far = [i for i, x in enumerate(logs) if abs(x - med) > limit]
    return far if len(far) <= (n - 1) // 2 else []


def _per_look_tail(confidence: float, looks: int) -> float:
    """Upper quantile for a two-sided interval at ``confidence`` spread over ``looks`` looks."""
    return 1 - (1 - confidence) / (2 * max(1, looks))


@lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    # Cached: the calibration calls the judge hundreds of thousands of times with a few (q, df) pairs.
    return float(stdtrit(df, q))
