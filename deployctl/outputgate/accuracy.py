"""Answer accuracy on the checkable probes, paired: McNemar's exact test on the discordant prompts (right
on the baseline and wrong on the candidate, or the reverse), and a Wilson interval for each accuracy."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Paired:
    prompts: int
    baseline_right: int
    candidate_right: int
    lost: int  # right on the baseline, wrong on the candidate
    gained: int  # the reverse
    p_worse: float  # one-sided exact McNemar: chance of ≥ ``lost`` of the discordant pairs if nothing changed

    def interval(self, right: int, confidence: float = 0.95) -> tuple[float, float]:
        return wilson(right, self.prompts, confidence)

    def to_dict(self) -> dict[str, object]:
        return {"prompts": self.prompts, "baseline_right": self.baseline_right,
                "candidate_right": self.candidate_right, "lost": self.lost, "gained": self.gained,
                "p_worse": self.p_worse, "baseline_interval": list(self.interval(self.baseline_right)),
                "candidate_interval": list(self.interval(self.candidate_right))}


def paired(baseline: Sequence[bool], candidate: Sequence[bool]) -> Paired:
    if len(baseline) != len(candidate):
        raise ValueError("paired accuracy needs the same prompts on both sides")
    lost = sum(1 for b, c in zip(baseline, candidate) if b and not c)
    gained = sum(1 for b, c in zip(baseline, candidate) if c and not b)
    n = lost + gained
    # scipy here and in wilson, not at the top: a stored output verdict is read back (`deployctl show`)
    # without it (benchmarks/cli_startup.py).
    from scipy.special import bdtrc

    # P(X ≥ lost) for X ~ Binomial(n, ½); bdtrc(k, n, p) is P(X > k)
    p = 1.0 if lost == 0 else float(bdtrc(lost - 1, n, 0.5))
    return Paired(len(baseline), sum(baseline), sum(candidate), lost, gained, p)


def wilson(right: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    from scipy.special import ndtri

    z = float(ndtri(0.5 + confidence / 2))
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
