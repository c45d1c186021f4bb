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
- A learned noise level (``deployctl.judge.noise``) is pooled into the variance as a prior with its
  own degrees of freedom: with 2–3 trials a side the t quantile otherwise dominates the interval.
- The other levels of the same sweep are pooled in too (``deployctl.judge.pooling``): the noise is
  relative and about the same at every level, so a brand-new host gets the degrees of freedom of the
  whole sweep, not of one level; a level much noisier than the others is judged on its own.
- Sequential looks are handled by ``deployctl.judge.sequential`` (error spending over the looks); this
  interval is the one-look interval the verdict shows.
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
    log_change: float = 0.0  # mean log(candidate) − mean log(baseline)
    se: float = 0.0  # its standard error
    sigma: float = 0.0  # the pooled trial-to-trial σ of the logs
    prior_df: int = 0  # degrees of freedom of σ learned from earlier measurements
    shared_df: int = 0  # degrees of freedom from the sweep's other levels


# A prior worth more than this many degrees of freedom is scaled down to it: 24 df pins a t quantile
# within 4 % of the normal one, so more buys nothing but inertia when a host's noise changes.
MAX_PRIOR_DF = 24


@dataclass(frozen=True)
class NoiseEstimate:
    """Trial-to-trial σ of the log of a metric at one level of one deployment, with its degrees of freedom."""

    sigma: float
    df: int

    def to_dict(self) -> dict[str, float | int]:
        return {"sigma": self.sigma, "df": self.df}

    @classmethod
    def from_dict(cls, data: dict[str, float | int]) -> "NoiseEstimate":
        sigma, df = float(data["sigma"]), int(data["df"])
        if not (math.isfinite(sigma) and sigma >= 0 and df >= 1):
            raise ValueError(f"not a noise estimate: sigma={sigma}, df={df}")
        return cls(sigma, df)


@dataclass(frozen=True)
class PooledNoise:
    """The σ a look uses: the learned prior pooled with the current trials."""

    sigma: float
    df: int
    prior_df: int  # how much of df came from earlier measurements


@dataclass(frozen=True)
class Spread:
    """Σ(log x − mean)² within each side of some trials, and its degrees of freedom."""

    ss: float
    df: int

    def __add__(self, other: "Spread") -> "Spread":
        return Spread(self.ss + other.ss, self.df + other.df)


def spread(*sides: Sequence[float]) -> Spread:
    """The within-side spread of the logs of positive values, each side about its own mean."""
    ss, df = 0.0, 0
    for values in sides:
        if not values:
            continue
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        ss += sum((x - mean) ** 2 for x in logs)
        df += len(logs) - 1
    return Spread(ss, df)


def pool(prior: NoiseEstimate | None, current_ss: float, current_df: int) -> PooledNoise | None:
    """The prior pooled with the current trials' within-side sum of squares; None with no df at all."""
    prior_df = min(prior.df, MAX_PRIOR_DF) if prior is not None else 0
    df = prior_df + current_df
    if df < 1:
        return None
    ss = current_ss + (prior.sigma ** 2 * prior_df if prior is not None else 0.0)
    return PooledNoise(math.sqrt(ss / df), df, prior_df)


def log_ratio_interval(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float,
    *,
    prior: NoiseEstimate | None = None,
    shared: Spread | None = None,
) -> ChangeInterval | None:
    """The change of ``candidate`` over ``baseline`` (positive values) with a pooled-t interval.

    ``shared``: the spread of the sweep's other levels pooled into this one (``pooling.shared_spreads``).
    Returns None when there is no estimate of the noise (fewer than three values in all and no learned
    ``prior`` or ``shared`` spread, so no degree of freedom is left after the two means).
    """
    if any(v <= 0 or not math.isfinite(v) for v in (*baseline, *candidate)):
        raise ValueError("log-ratio intervals need positive, finite values")
    nb, nc = len(baseline), len(candidate)
    if nb == 0 or nc == 0:
        return None
    xb = [math.log(v) for v in baseline]
    xc = [math.log(v) for v in candidate]
    mb, mc = sum(xb) / nb, sum(xc) / nc
    own = spread(baseline, candidate) + (shared or Spread(0.0, 0))
    noise = pool(prior, own.ss, own.df)
    if noise is None:
        return None
    df = noise.df
    se = noise.sigma * math.sqrt(1 / nb + 1 / nc)
    half = _t_quantile(1 - (1 - confidence) / 2, df) * se
    d = mc - mb
    test = f"pooled t on log trial values, df={df}"
    sources = ([f"{shared.df} of them from the sweep's other levels"] if shared is not None and shared.df else []) + (
        [f"{noise.prior_df} of them from this host's earlier measurements"] if noise.prior_df else [])
    if sources:
        test += f" ({', '.join(sources)})"
    return ChangeInterval(
        change=math.expm1(d),
        low=math.expm1(d - half),
        high=math.expm1(d + half),
        confidence=confidence,
        n_baseline=nb,
        n_candidate=nc,
        df=df,
        test=test,
        log_change=d,
        se=se,
        sigma=noise.sigma,
        prior_df=noise.prior_df,
        shared_df=shared.df if shared is not None else 0,
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


@lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    # Cached: the calibration calls the judge hundreds of thousands of times with a few (q, df) pairs.
    return float(stdtrit(df, q))
