"""One noise level for the whole sweep: the levels' trial-to-trial spreads pooled, a far noisier level apart.

Benchmark noise is relative (multiplicative) and about the same at every concurrency of a sweep: the
same server, host and client, a few percent of throughput. So the spread of the log trial values at
the other levels says as much about a level's σ as its own trials do, and a brand-new host gets the
degrees of freedom of the whole sweep (5 levels × 2 trials a side: 10, not 2) — the t quantile of 2
df (6.96 at 99 %) is what otherwise forces a host with nothing learned into a long baseline.

Pooling a level that is really noisier than the rest would understate its σ and fail an unchanged
candidate too often, so each level's variance is first tested against the pool of the others (a
one-sided F test at ``GUARD_ALPHA``); a level far above them stands alone, on its own trials (and its
learned σ), while the others keep pooling it (which only widens their intervals when it is truly
noisier). With 2–3 trials a side the test sees only gross heterogeneity: one level twice as noisy as
the other four still fails an unchanged candidate about 3 % of the time at σ = 3 % on a brand-new host
(3.8 % without the guard; 0.7 % once the host has learned each level's σ; simulated, docs/judge.md).
Pooling assumes what benchmark noise usually is; the guard stops the worst of the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from scipy.special import fdtri

from deployctl.judge.stats import Spread

# The chance that a homogeneous sweep sends a level to stand alone at a look: small, because a level
# standing alone with 2 df needs its full trial budget; large enough to catch a level 2–3× noisier.
GUARD_ALPHA = 0.01

NOTHING = Spread(0.0, 0)


@dataclass(frozen=True)
class Shared:
    """What a level borrows from the sweep's other levels."""

    spread: Spread  # the pooled spread of the other levels (not this one's)
    levels: tuple[int, ...]  # which levels
    alone: str | None = None  # why this level stands alone, in the operator's words


def far_noisier(own: Spread, rest: Spread, alpha: float = GUARD_ALPHA) -> float | None:
    """The ratio σ_level / σ_rest when the level is significantly noisier than the rest, else None."""
    if own.df < 1 or rest.df < 1 or own.ss <= 0:
        return None
    if rest.ss <= 0:
        return math.inf
    ratio = (own.ss / own.df) / (rest.ss / rest.df)
    return math.sqrt(ratio) if ratio > float(fdtri(own.df, rest.df, 1 - alpha)) else None


def shared_spreads(spreads: Mapping[int, Spread], alpha: float = GUARD_ALPHA) -> dict[int, Shared]:
    """Per level, the spread it pools from the others; a level far noisier than the rest pools nothing.

    The others still pool the noisy level's spread: leaving it out would keep exactly the pools that
    look quiet, a σ biased low (simulated: it raised the sweep's A/A false-fail rate by a third).
    """
    total = sum(spreads.values(), NOTHING)
    out = {}
    for c, own in spreads.items():
        rest = Spread(total.ss - own.ss, total.df - own.df)
        ratio = far_noisier(own, rest, alpha)
        if ratio is None:
            out[c] = Shared(rest, tuple(d for d in sorted(spreads) if d != c))
        else:
            times = "far" if math.isinf(ratio) else f"{ratio:.1f}×"
            out[c] = Shared(NOTHING, (), f"C={c}: its trials spread {times} more than the other levels' "
                                        "(F test): judged on its own trials, not pooled with them")
    return out
