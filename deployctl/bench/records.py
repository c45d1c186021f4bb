"""What the load client keeps of one request: its sample and the client-side times that the trial's metrics
(bench.metrics) and the stall finder (bench.stalls) read. A module of its own so that neither imports the other."""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from deployctl.bench.result import RequestSample


@dataclass(frozen=True)
class RequestRecord:
    sample: RequestSample
    t_sent: float
    t_first: float | None
    t_end: float
    reads: int
    multi_event_reads: int
    max_tokens: int
    # (arrival times, server emission times) per content chunk, only when asked for (keep_emit_ts):
    # the client-overhead benchmark compares them against a server that stamps each chunk.
    chunk_times: tuple[array, array] | None = None
