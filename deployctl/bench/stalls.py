"""A stall seen in one trial's request timings — pure.

Serving benchmarks on real GPUs are sometimes bimodal: a step in a dozen stalls for a fixed ~0.9 s before
the tail of the batch is admitted and reads −36 % against a clean population with a CV of about 1 %
(docs/judge.md, "Stalls"). That is a hiccup of the host, not the server's behaviour, and the trial's mean
cannot tell it from a slowdown; its requests can:

- a **common gap**: once streaming began, no stream delivered a token for a long while although requests
  were in flight (the whole server paused);
- a **late tail**: the requests' TTFTs split into two groups far apart, the later group admitted that much
  later (a slower server makes every token slower, its TTFTs do not split; the head's inter-token latency
  is no guide either: it decodes in a smaller batch while the tail is held).

``find_stall`` returns what it saw, in the operator's words; whether the trial is set aside is the judge's
call against the level's other trials (``deployctl.judge.stalls``): a signature every trial shows is the
server's behaviour (C above the capacity queues its tail every time), never set aside.
"""

from __future__ import annotations

from statistics import median
from typing import Sequence

from deployctl.bench.records import RequestRecord

# A gap must be this long, and this many times the typical inter-token latency, to count: a prefill step
# of a large admitted batch pauses decoding for a fraction of a second on its own.
MIN_STALL_S = 0.25
STALL_ITL_MULTIPLE = 10.0
# The late group must be at least this share of the requests: a single slow TTFT is a tail, not a batch's.
MIN_TAIL_SHARE = 0.05


def find_stall(records: Sequence[RequestRecord]) -> str | None:
    """What stalled this trial (``stalled 0.9 s before admitting the batch's tail``), None if nothing did."""
    ok = [r for r in records if r.sample.ok and r.t_first is not None]
    if len(ok) < 2:
        return None
    itl = median([g for r in ok for g in r.sample.itl_s] or [0.0])
    floor = max(MIN_STALL_S, STALL_ITL_MULTIPLE * itl)
    late = _late_tail(ok, floor)
    if late is not None:
        return f"stalled {late:.1f} s before admitting the batch's tail"
    gap = _common_gap(ok)
    if gap >= floor:
        return f"stalled {gap:.1f} s: no stream delivered a token while requests were in flight"
    return None


def _late_tail(ok: Sequence[RequestRecord], floor: float) -> float | None:
    """The delay of a group of requests admitted late, at least ``floor`` after the others' first tokens."""
    ttfts = sorted(r.sample.ttft_s or 0.0 for r in ok)
    jumps = [(b - a, k + 1) for k, (a, b) in enumerate(zip(ttfts, ttfts[1:]))]
    jump, cut = max(jumps)
    least = max(1, int(MIN_TAIL_SHARE * len(ok)))
    if jump < floor or cut < least or len(ok) - cut < least:
        return None
    return jump


def _common_gap(ok: Sequence[RequestRecord]) -> float:
    """The longest time after the first token during which requests were in flight and none delivered a token."""
    # numpy here, not at the top, as in ``metrics.percentiles``: a trial at C=1024 has millions of tokens.
    import numpy as np

    arrivals = np.sort(np.concatenate([np.cumsum(np.array((r.t_first, *r.sample.itl_s))) for r in ok]))
    gaps = np.diff(arrivals)
    spans = sorted((r.t_first, r.t_end) for r in ok)
    for k in np.argsort(gaps)[::-1]:
        if _covered(spans, float(arrivals[k]), float(arrivals[k + 1])):
            return float(gaps[k])
        if gaps[k] < MIN_STALL_S:
            break
    return 0.0


def _covered(spans: Sequence[tuple[float, float]], a: float, b: float) -> bool:
    """Whether streams were open over all of ``[a, b]``: a request still waiting for its first token is its TTFT,
    and a gap between two requests is idle; neither is a stall."""
    reach = a
    for start, end in spans:
        if start > reach:
            break
        reach = max(reach, end)
        if reach >= b:
            return True
    return False
