"""Change points in a release's watch series: E-divisive means, as Apache Otava (formerly Hunter) runs it.

One canary watch cannot prove a 3 % loss on a noisy server, but ten watches before and a few after a
persistent step can. The method (Matteson & James 2014, with Otava's significance test):

1. in a segment, the split that maximises the energy-distance statistic
   ``Q(τ) = m·n/(m+n) · (2·E|X−Y| − E|X−X'| − E|Y−Y'|)`` (X the values before τ, Y after) is a
   candidate, and both sides are searched again, down to segments too short to split;
2. every candidate is tested with Welch's t-test between its neighbouring segments; the weakest one
   above ``max_pvalue`` (Otava's default 0.001) is dropped, its segments merge, and the rest are
   tested again, until every change point left stands.

``apache-otava`` itself is not a dependency: it pins numpy/scipy exactly and pulls in BigQuery,
PostgreSQL and Slack clients; the method is this small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import stdtr

MIN_SIDE = 2  # values each side of a split: the t-test needs a spread on both


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first value after the change
    mean_before: float  # the segment before (up to the previous change point)
    mean_after: float  # the segment after (up to the next change point)
    pvalue: float

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.mean_after / self.mean_before - 1.0) if self.mean_before else 0.0


def change_points(series: Sequence[float], *, max_pvalue: float = 0.001) -> list[ChangePoint]:
    """The significant change points of ``series``, in order (empty for fewer than 2×MIN_SIDE values)."""
    x = np.asarray(series, dtype=float)
    found: list[int] = []
    _split(x, 0, len(x), found)
    bounds = sorted(found)
    while True:  # drop the weakest point that no longer stands against its final neighbours
        tested = _tested(x, bounds)
        weakest = max(tested, key=lambda cp: cp.pvalue, default=None)
        if weakest is None or weakest.pvalue <= max_pvalue:
            return tested
        bounds.remove(weakest.index)


def _split(x: np.ndarray, start: int, end: int, found: list[int]) -> None:
    tau = _best_split(x[start:end])
    if tau is None:
        return
    found.append(start + tau)
    _split(x, start, start + tau, found)
    _split(x, start + tau, end, found)


def _best_split(seg: np.ndarray) -> int | None:
    """τ maximising the E-divisive statistic Q over splits with at least MIN_SIDE values a side."""
    n = len(seg)
    if n < 2 * MIN_SIDE:
        return None
    d = np.abs(seg[:, None] - seg[None, :])
    best, best_q = None, -np.inf
    for tau in range(MIN_SIDE, n - MIN_SIDE + 1):
        m, k = tau, n - tau
        between = d[:tau, tau:].mean()
        within_left = d[:tau, :tau].sum() / (m * (m - 1))
        within_right = d[tau:, tau:].sum() / (k * (k - 1))
        q = m * k / n * (2 * between - within_left - within_right)
        if q > best_q:
            best, best_q = tau, q
    return best


def _pvalue(left: np.ndarray, right: np.ndarray) -> float:
    if np.ptp(left) == 0 and np.ptp(right) == 0:
        return 0.0 if left[0] != right[0] else 1.0  # two flat runs: a step or nothing, no test needed
    # Welch's t test, written out: scipy.stats would add 0.4 s to every deployctl command's start.
    v1, v2 = left.var(ddof=1) / len(left), right.var(ddof=1) / len(right)
    t = (left.mean() - right.mean()) / np.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 ** 2 / (len(left) - 1) + v2 ** 2 / (len(right) - 1))
    return float(2 * stdtr(df, -abs(t)))


def _tested(x: np.ndarray, bounds: list[int]) -> list[ChangePoint]:
    edges = [0, *bounds, len(x)]
    out = []
    for i in range(1, len(edges) - 1):
        left, right = x[edges[i - 1]:edges[i]], x[edges[i]:edges[i + 1]]
        out.append(ChangePoint(edges[i], float(left.mean()), float(right.mean()), _pvalue(left, right)))
    return out
