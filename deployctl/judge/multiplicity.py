"""How the candidate's false-fail rate is split over the levels' tests when the levels move together.

An unchanged candidate is failed when any critical level's test fails, so each test gets a share of
``policy.false_fail``. Split evenly (Bonferroni) the shares are right for independent tests and too
small for tests that move together: trial k of every level runs in the same pass over the same server,
a shock of that pass moves every level's change alike, and five levels that move as one are nearly one
test — Bonferroni then spends a fifth of the rate where the whole of it is the candidate's, and with
the few degrees of freedom such a sweep has (its trials', not its levels') the t quantile at 0.2 % is
far out (7.45 at 3 df against 4.54 at 1 %).

The levels' statistics T_l = d_l / se are equicorrelated: d_l = S + e_l with S the difference of the
shared shocks (correlation r of the changes), and they share the pooled σ̂ (S² = σ̂²/σ² ~ χ²_ν/ν). The
chance that the largest of L of them exceeds c is a two-dimensional integral,
``P(max T_l > c) = E_S[1 − ∫ φ(w) Φ((c·S − √r·w)/√(1 − r))^L dw]``; the per-test rate is the tail of
one T at the c that makes it ``false_fail``. ``effective_tests`` gives ``false_fail`` over that rate,
the number of independent tests the levels are worth, rounded up to a quarter (never more than L), and
is computed on a grid that errs towards more tests: r rounded down to 0.05, ν rounded up (above
``MAX_DF``: the normal). The correlation comes from the data (``pooling.shock_correlation``: a lower
confidence bound, so an unsure estimate counts the levels as independent).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import chdtri, ndtr, stdtr

# A quarter of a test: the boundaries are cached per rate, so the rates are few.
STEP = 0.25
# Correlations are rounded down to this, degrees of freedom up to a whole number.
CORRELATION_STEP = 0.05
# Above this many degrees of freedom σ̂ counts as known (the normal's max, the smaller gain).
MAX_DF = 60

_W, _WW = np.polynomial.hermite_e.hermegauss(64)
_WW = _WW / _WW.sum()
# S by equal-probability midpoints of χ²_ν: its small values, where the levels exceed together, weigh in.
_S_POINTS = 400


def effective_tests(levels: int, correlation: float, df: float, false_fail: float = 0.01) -> float:
    """How many independent tests ``levels`` equicorrelated ones sharing σ̂ (``df``) are worth at ``false_fail``."""
    if levels <= 1:
        return 1.0
    r = math.floor(max(0.0, min(correlation, 0.99)) / CORRELATION_STEP + 1e-9) * CORRELATION_STEP
    nu = math.inf if not math.isfinite(df) or df > MAX_DF else float(math.ceil(df - 1e-9))
    return _effective(levels, round(r, 2), nu, false_fail)


def per_test_rate(false_fail: float, levels: int, correlation: float, df: float) -> float:
    """The false-fail rate of each of ``levels`` tests so that the largest of them fails ``false_fail``."""
    return false_fail / effective_tests(levels, correlation, df, false_fail)


@lru_cache(maxsize=4096)
def _effective(levels: int, r: float, nu: float, alpha: float) -> float:
    if r <= 0:
        return float(levels)  # Bonferroni: independent levels, as before a shared shock is seen
    s = np.ones(1) if math.isinf(nu) else np.sqrt(chdtri(nu, 1 - (np.arange(_S_POINTS) + 0.5) / _S_POINTS) / nu)

    def any_exceeds(c: float) -> float:
        inner = ndtr((c * s[:, None] - math.sqrt(r) * _W[None, :]) / math.sqrt(1 - r)) ** levels
        return float(1 - (inner @ _WW).mean())

    lo, hi = 0.0, 200.0
    while hi - lo > 1e-7 * max(1.0, lo):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if any_exceeds(mid) > alpha else (lo, mid)
    one = float(ndtr(-lo)) if math.isinf(nu) else float(stdtr(nu, -lo))
    tests = alpha / one
    return float(min(levels, max(1.0, math.ceil(tests / STEP - 1e-9) * STEP)))
