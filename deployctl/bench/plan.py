"""What a sweep sends: levels, trials, request counts, prompts and arrival times — pure, seeded, no I/O.

Prompts are random token ids, unique per request, so the server's prefix (radix) cache cannot turn a
benchmark into a cache-hit test: every request of a sweep gets a distinct first token, and the rest is
random. Or one text prompt for all requests when the operator asks for it (``text_prompt``). Output
length is fixed: ``max_tokens`` with ``ignore_eos`` so the model cannot stop early.

Requests are built lazily (``LevelPlan.request(i)``) and deterministically from the seed, so a level of
2048 requests × 1000 tokens never sits in memory as Python ints, and a duration-bound level can draw
as many as it needs.
"""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from typing import Iterator, Sequence

from deployctl.inventory.policy import BenchPolicy

COMPLETIONS_PATH = "/v1/completions"
# Token ids are drawn away from both ends of the vocabulary, where tokenizers keep special and
# control tokens (Qwen's <|im_end|> etc. sit at the top, byte tokens at the bottom).
_ID_MARGIN = 1000
DEFAULT_VOCAB_SIZE = 32000  # the smallest common vocabulary; used when the server does not say


@dataclass(frozen=True)
class LoadRequest:
    """One request of a level: the JSON body to POST and what it asked for."""

    index: int
    body: bytes
    prompt_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class Workload:
    """The request shape shared by every level of a sweep."""

    model: str
    input_tokens: int
    output_tokens: int
    vocab_size: int = DEFAULT_VOCAB_SIZE
    text_prompt: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.text_prompt is None and self.vocab_size <= 2 * _ID_MARGIN + 1:
            raise ValueError(f"vocab_size {self.vocab_size} is too small for random token-id prompts")


@dataclass(frozen=True)
class LevelPlan:
    """One trial of one concurrency level.

    ``requests`` bounds the level by count; ``duration_s`` (when set) instead keeps starting requests
    until that much time has passed. ``request_rate`` (req/s) switches from closed loop (a new request
    as soon as one finishes) to open loop: Poisson arrivals, still capped at ``concurrency`` in flight.
    """

    concurrency: int
    trial: int
    requests: int
    workload: Workload
    first_index: int  # request indices are unique across the sweep: distinct first tokens
    duration_s: float | None = None
    request_rate: float | None = None

    def request(self, i: int) -> LoadRequest:
        return build_request(self.workload, self.first_index + i)

    def arrivals(self) -> Iterator[float]:
        """Offsets (s) from the level start at which successive requests become due, without end;
        all 0 in closed loop (a worker sends as soon as it is free)."""
        if self.request_rate is None:
            return itertools.repeat(0.0)
        return poisson_arrivals(self.request_rate, seed=hash((self.workload.seed, self.concurrency, self.trial)))


@dataclass(frozen=True)
class SweepPlan:
    warmup: tuple[LoadRequest, ...]
    levels: tuple[LevelPlan, ...]


def plan_sweep(
    policy: BenchPolicy,
    workload: Workload,
    *,
    levels: Sequence[int] | None = None,
    trials: int = 1,
    duration_s: float | None = None,
    request_rate: float | None = None,
) -> SweepPlan:
    """Levels in the given order, ``trials`` consecutive trials each, after ``policy.warmup_requests``
    discarded warm-up requests at the start of the sweep."""
    if trials < 1:
        raise ValueError("trials must be at least 1")
    if duration_s is not None and duration_s <= 0:
        raise ValueError("duration_s must be positive")
    if request_rate is not None and request_rate <= 0:
        raise ValueError("request_rate must be positive")
    concurrencies = list(levels) if levels is not None else list(policy.concurrency)
    if not concurrencies or any(c <= 0 for c in concurrencies):
        raise ValueError("concurrency levels must be positive integers")
    warmup = tuple(build_request(workload, i) for i in range(policy.warmup_requests))
    next_index = policy.warmup_requests
    plans = []
    for c in concurrencies:
        for t in range(trials):
            n = policy.requests_for(c)
            plans.append(LevelPlan(c, t, n, workload, next_index, duration_s, request_rate))
            # Duration-bound levels draw an unknown count; leave them a wide, disjoint index range.
            next_index += n if duration_s is None else 1_000_000
    return SweepPlan(warmup, tuple(plans))


def build_request(workload: Workload, index: int) -> LoadRequest:
    if workload.text_prompt is not None:
        prompt: str | list[int] = workload.text_prompt
        prompt_tokens = 0  # unknown without the tokenizer; the server's usage reports it
    else:
        prompt = random_prompt(workload, index)
        prompt_tokens = workload.input_tokens
    body = {
        "model": workload.model,
        "prompt": prompt,
        "max_tokens": workload.output_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return LoadRequest(index, json.dumps(body, separators=(",", ":")).encode(), prompt_tokens, workload.output_tokens)


def random_prompt(workload: Workload, index: int) -> list[int]:
    """``input_tokens`` ids; the first is a function of ``index`` alone, so no two requests of a sweep
    share even a one-token prefix (until the id range wraps, far beyond any sweep's request count)."""
    low, high = _ID_MARGIN, workload.vocab_size - _ID_MARGIN
    span = high - low
    first = low + (index * 7919 + workload.seed) % span  # 7919 is prime: consecutive indices spread out
    rng = random.Random(f"{workload.seed}:{index}")
    return [first] + [rng.randrange(low, high) for _ in range(workload.input_tokens - 1)]


def poisson_arrivals(rate: float, *, seed: int) -> Iterator[float]:
    """Arrival offsets of a Poisson process of ``rate`` requests/s (exponential gaps), first at 0."""
    rng = random.Random(seed)
    t = 0.0
    while True:
        yield t
        t += rng.expovariate(rate)
