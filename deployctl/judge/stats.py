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
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class ChangeInterval:
    """A relative change (candidate / baseline − 1) with its confidence interval."""

    change: float  # e.g. −0.124 for −12.4 %
    low: float
    high: float
    confidence: float  # the stated (overall) confidence, e.g. 0.95
    n_baseline: int
    n_candidate: int
    df: float  # effective (Satterthwaite) degrees of freedom of se; a whole number when nothing was combined
    test: str
    log_change: float = 0.0  # mean log(candidate) − mean log(baseline)
    se: float = 0.0  # its standard error
    sigma: float = 0.0  # the pooled trial-to-trial σ of the logs
    prior_df: int = 0  # degrees of freedom of σ learned from earlier measurements
    shared_df: int = 0  # degrees of freedom from the sweep's other levels
    restart_sigma: float = 0.0  # the between-restart σ added to se (each side runs on its own server start)


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
class RestartNoise:
    """The between-restart σ of the log of a metric: each server start has its own speed.

    The baseline is measured on one server process and the candidate on another, so their difference
    carries ``2·sigma²`` that no number of trials averages away (CUDA graphs, memory layout, KV pool
    differ per start). ``df`` is None for a default, taken as known; ``source`` says where it came from.
    ``seen``: whether the pairs it was learned from show a restart offset beyond what their trials alone
    make them differ by (``noise.learn_restart``); a learned σ that is not is used as the default
    (``in_test``).
    """

    sigma: float
    df: int | None
    source: str
    seen: bool = True

    def in_test(self) -> "RestartNoise":
        """The σ_r the one-start test adds and the baseline is sized for: this one, or the default (known)
        where the pairs show no restart offset beyond chance.

        A host without any restart offset learns one of 0–1.5 % by chance from 8 pairs of one-trial
        verifications at σ = 3 % (their difference is mostly within-run noise); used, it widened every
        look of that host (one level: −10 % caught 92.4 % instead of 95 %; 5 levels moving together
        90.0 %; benchmarks/judge_calibration.py). Not used where chance explains the pairs, at
        ``RESTART_SEEN_ALPHA``, so 1 host in 20 without an offset still uses its chance σ_r. The learned σ_r
        as it is stays what deciding over starts (``judge.starts``) bounds.
        """
        if self.seen or self.df is None:
            return self
        return RestartNoise(DEFAULT_RESTART_SIGMA, None, "default: this host's restart pairs show no offset beyond "
                                                         f"chance (learned {100 * self.sigma:.1f} %, {self.source})")

    def to_dict(self) -> dict[str, float | int | str | None]:
        return {"sigma": self.sigma, "df": self.df, "source": self.source, "seen": self.seen}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RestartNoise":
        sigma, df = float(data["sigma"]), data.get("df")
        if not (math.isfinite(sigma) and sigma >= 0) or (df is not None and int(df) < 1):
            raise ValueError(f"not a restart noise estimate: sigma={sigma}, df={df}")
        return cls(sigma, None if df is None else int(df), str(data.get("source", "")), bool(data.get("seen", True)))


# Until a host has restart pairs in its ledger (``noise.learn_restart``), the judge assumes each server
# start's own speed varies by this much (σ of the log, per start). Conservative against a host with no
# restart effect at all; a host whose restarts move more learns it (docs/judge.md has what it costs).
DEFAULT_RESTART_SIGMA = 0.005
DEFAULT_RESTART = RestartNoise(DEFAULT_RESTART_SIGMA, None, "default: no restart pairs of this host in the ledger yet")


def effective_df(parts: Iterable[tuple[float, float | None]]) -> float:
    """Welch–Satterthwaite degrees of freedom of a sum of independent variance components.

    ``parts``: (the component's contribution to the variance, its df; None for a known one). Equal to
    the plain sum of the df when every component estimates the same variance in proportion to its df.
    """
    parts = [(v, d) for v, d in parts if v > 0]
    total = sum(v for v, _ in parts)
    denominator = sum(v * v / d for v, d in parts if d is not None and d > 0)
    if denominator <= 0:
        return math.inf
    return total * total / denominator


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
    components: Sequence[Spread] = (),
    restart: RestartNoise | None = None,
) -> ChangeInterval | None:
    """The change of ``candidate`` over ``baseline`` (positive values) with a pooled-t interval.

    ``shared``: the spread of the sweep's other levels pooled into this one (``pooling.shared_spreads``);
    ``components``: that pool (this level's spread and ``shared``) split into parts that are independent
    when the levels share a per-trial shock (``pooling.Shared.components``), for its effective df;
    ``restart``: the between-restart σ, each side on its own server start, added to the standard error.
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
    within_df: float = noise.df
    if components:
        prior_part = [(prior.sigma ** 2 * noise.prior_df, noise.prior_df)] if prior is not None and noise.prior_df else []
        within_df = min(float(noise.df), effective_df([(p.ss, p.df) for p in components] + prior_part))
        if math.isinf(within_df):  # every component spread zero: nothing to correct
            within_df = noise.df
    within = noise.sigma ** 2 * (1 / nb + 1 / nc)
    between = 2 * restart.sigma ** 2 if restart is not None else 0.0
    # A default restart σ is taken as known, a learned one has its df: the Welch–Satterthwaite df of the
    # sum, but never above the within part's. Plugged in, Satterthwaite's df grows exactly when σ came out
    # low by chance (the restart part then dominates): with a known 1 % restart σ that raised the A/A
    # false-fail rate from 0.3 to 1.4 % at σ = 3 % (benchmarks/judge_calibration.py).
    df = within_df
    if between > 0 and restart is not None and restart.df is not None:
        df = min(within_df, effective_df([(within, within_df), (between, restart.df)]))
    se = math.sqrt(within + between)
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    d = mc - mb
    test = f"pooled t on log trial values, df={_df_text(df)}"
    sources = ([f"{shared.df} of them from the sweep's other levels"] if shared is not None and shared.df else []) + (
        [f"{noise.prior_df} of them from this host's earlier measurements"] if noise.prior_df else []) + (
        [f"{noise.df} pooled, {_df_text(within_df)} effective: the levels share a per-trial shock"]
        if within_df < noise.df - 0.05 else [])
    if sources:
        test += f" ({', '.join(sources)})"
    if between > 0:
        test += f"; restart σ {100 * restart.sigma:.1f} % a side ({restart.source})"
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
        restart_sigma=restart.sigma if restart is not None else 0.0,
    )


def _df_text(df: float) -> str:
    return "∞" if math.isinf(df) else f"{df:.1f}".removesuffix(".0")


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
def t_quantile(q: float, df: float) -> float:
    # Cached: the calibration calls the judge hundreds of thousands of times with a few (q, df) pairs.
    # scipy.special, not scipy.stats: the same t quantile (stdtrit is what t.ppf calls) at under half the
    # import time; imported here, not at the top, so the value types above cost a command no scipy
    # (`deployctl status` reads them from the ledger; benchmarks/cli_startup.py).
    from scipy.special import ndtri, stdtrit

    return float(stdtrit(df, q)) if df < 10_000 else float(ndtri(q))
