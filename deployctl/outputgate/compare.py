"""Token-level comparison of two servers' answers to the same prompt, as llama.cpp's ``perplexity
--kl-divergence`` reports a quantisation's damage: per-token KL divergence of the top-k distributions,
the shift of the reference token's probability (Δp), and "same top token" (the argmax agrees).

The reference is the baseline's greedy answer with its top-k log-probabilities at every step; the other
server *scores the same tokens* (teacher forcing: prompt + reference answer as its input, the input
tokens' log-probabilities back), so each position compares two distributions over the same context.
Only the top k of each distribution is known: the KL is taken over the reference's top k plus one "rest"
bucket, a token missing from the other's top k counted at no more than its smallest listed probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

TopK = tuple[tuple[int, float], ...]  # (token id, log-probability), most likely first
_FLOOR = 1e-9


@dataclass(frozen=True)
class Reference:
    """The baseline's greedy answer to one probe."""

    probe_id: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    top: tuple[TopK, ...]
    text: str


@dataclass(frozen=True)
class Scored:
    """One server's teacher-forced scoring of a reference's tokens."""

    probe_id: str
    logprobs: tuple[float, ...]  # of the reference's own tokens
    top: tuple[TopK, ...]


@dataclass(frozen=True)
class Shift:
    """Per position of one reference answer: KL, Δp of the reference token, whether the argmax agrees."""

    probe_id: str
    kl: tuple[float, ...]
    dp: tuple[float, ...]
    same_top: tuple[bool, ...]

    @property
    def first_divergence(self) -> int | None:
        """The first token where the scoring server's greedy choice leaves the reference's answer."""
        return next((i for i, same in enumerate(self.same_top) if not same), None)


def topk_kl(p_top: TopK, q_top: TopK, q_known: dict[int, float] | None = None) -> float:
    """KL(P‖Q) in nats over P's top k plus the rest; ``q_known``: Q's exact log-probabilities of some
    tokens beyond its own top k (the reference token's, from teacher forcing)."""
    q = dict(q_top)
    q.update(q_known or {})
    q_listed = [math.exp(lp) for _, lp in q_top]
    q_cap = min(min(q_listed, default=_FLOOR), max(1.0 - sum(q_listed), _FLOOR))
    kl, p_sum, q_sum = 0.0, 0.0, 0.0
    for token, lp in p_top:
        p = math.exp(lp)
        qi = math.exp(q[token]) if token in q else q_cap
        qi = max(qi, _FLOOR)
        kl += p * (lp - math.log(qi))
        p_sum += p
        q_sum += qi
    p_rest, q_rest = max(1.0 - p_sum, _FLOOR), max(1.0 - q_sum, _FLOOR)
    kl += p_rest * math.log(p_rest / q_rest)
    return max(kl, 0.0)


def shift(ref: Reference, scored: Scored) -> Shift:
    n = min(len(ref.token_ids), len(scored.logprobs), len(scored.top), len(ref.top))
    kl, dp, same = [], [], []
    for i in range(n):
        token = ref.token_ids[i]
        kl.append(topk_kl(ref.top[i], scored.top[i], {token: scored.logprobs[i]}))
        dp.append(math.exp(scored.logprobs[i]) - math.exp(ref.logprobs[i]))
        same.append(bool(scored.top[i]) and scored.top[i][0][0] == token)
    return Shift(ref.probe_id, tuple(kl), tuple(dp), tuple(same))


@dataclass(frozen=True)
class ShiftStats:
    """Over every token of every prompt (llama.cpp's summary lines)."""

    tokens: int
    mean_kl: float
    median_kl: float
    p99_kl: float
    max_kl: float
    same_top_pct: float
    dp_rms: float
    diverged_prompts: int  # prompts whose greedy answer would leave the reference's somewhere
    prompts: int
    kl_quantiles: tuple[float, ...]  # 0, 10, …, 100 %: the report's distribution

    def to_dict(self) -> dict[str, object]:
        return {"tokens": self.tokens, "mean_kl": self.mean_kl, "median_kl": self.median_kl, "p99_kl": self.p99_kl,
                "max_kl": self.max_kl, "same_top_pct": self.same_top_pct, "dp_rms": self.dp_rms,
                "diverged_prompts": self.diverged_prompts, "prompts": self.prompts,
                "kl_quantiles": list(self.kl_quantiles)}


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def stats(shifts: Sequence[Shift]) -> ShiftStats:
    kls = sorted(k for s in shifts for k in s.kl)
    dps = [d for s in shifts for d in s.dp]
    same = [x for s in shifts for x in s.same_top]
    n = len(kls)
    return ShiftStats(
        tokens=n, mean_kl=sum(kls) / n if n else 0.0, median_kl=_quantile(kls, 0.5), p99_kl=_quantile(kls, 0.99),
        max_kl=kls[-1] if kls else 0.0, same_top_pct=100.0 * sum(same) / len(same) if same else 100.0,
        dp_rms=math.sqrt(sum(d * d for d in dps) / len(dps)) if dps else 0.0,
        diverged_prompts=sum(1 for s in shifts if s.first_divergence is not None), prompts=len(shifts),
        kl_quantiles=tuple(_quantile(kls, i / 10) for i in range(11)),
    )
