"""Per-request recording and per-trial metrics, with the rules that make a trial invalid — pure.

The transport hands each read's SSE payloads, stamped with one ``perf_counter`` time, to a
:class:`StreamRecorder`; the recorder keeps only timestamps (``array('d')``, 8 bytes per chunk) and the
server's usage numbers. :func:`summarize_trial` turns a trial's records into a
:class:`~deployctl.bench.result.TrialResult` (definitions in that module's docstring) and decides validity.

A chunk is not a token: under speculative decoding (MTP/EAGLE) one SSE chunk carries several tokens,
so output tokens come from the server's ``usage.completion_tokens`` (``stream_options.include_usage``);
only when the server sends no usage are chunks counted, and the sample says so
(``token_count_source="chunks"``).
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from itertools import chain
from typing import Iterable, Sequence

from deployctl.bench.result import (
    LevelTelemetry,
    Percentiles,
    RequestSample,
    TrialResult,
)
from deployctl.bench.records import RequestRecord
from deployctl.bench.stalls import find_stall

DONE = b"[DONE]"
RETRACT_MARKER = "KV cache pool is full. Retract requests."
# The client is "the limit" when its process used this much of a core during the trial, or when the
# event loop woke this late (p99): tokens then coalesce into reads and ITL/TTFT stop meaning anything.
CLIENT_CPU_LIMIT_PCT = 90.0
LOOP_LAG_LIMIT_S = 0.050


class StreamRecorder:
    """Everything one streaming request needs remembered, fed read by read (sans-IO)."""

    __slots__ = (
        "t_sent", "prompt_tokens", "max_tokens", "times", "emit_ts", "usage_completion",
        "usage_prompt", "error", "done", "reads", "multi_event_reads",
    )

    def __init__(self, t_sent: float, prompt_tokens: int, max_tokens: int, *, keep_emit_ts: bool = False) -> None:
        self.t_sent = t_sent
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.times = array("d")  # arrival time of each content chunk
        self.emit_ts: array | None = array("d") if keep_emit_ts else None
        self.usage_completion: int | None = None
        self.usage_prompt: int | None = None
        self.error: str | None = None
        self.done = False
        self.reads = 0
        self.multi_event_reads = 0

    def sent(self, t: float) -> None:
        """The request left at ``t``: TTFT and e2e count from here, not from before connection set-up."""
        self.t_sent = t

    def feed(self, t: float, payloads: Sequence[bytes]) -> None:
        """One read's complete SSE ``data`` payloads, all received at ``t``."""
        self.reads += 1
        if len(payloads) > 1:
            self.multi_event_reads += 1
        for payload in payloads:
            if payload == DONE:
                self.done = True
                continue
            try:
                # str, not bytes: json.loads(bytes) sniffs the encoding in Python, a few µs a chunk
                obj = json.loads(payload.decode())
            except ValueError:
                self.error = self.error or "bad_chunk"
                continue
            if "error" in obj or obj.get("object") == "error":
                self.error = self.error or "server_error"
                continue
            choices = obj.get("choices")
            if choices and choices[0].get("text"):
                self.times.append(t)
                if self.emit_ts is not None:
                    self.emit_ts.append(obj.get("sim_emit_ts") or 0.0)
            usage = obj.get("usage")
            if usage:
                self.usage_completion = usage.get("completion_tokens")
                self.usage_prompt = usage.get("prompt_tokens")

    def finish(
        self, t_end: float, error: str | None = None, *, queue_s: float = 0.0, itl_cache: dict[float, float] | None = None
    ) -> "RequestRecord":
        """Close the request at ``t_end``; ``error`` is the transport's failure class, if any;
        ``queue_s`` the time it waited on the client's own concurrency cap before ``t_sent``."""
        error = error or self.error
        if error is None and not self.done:
            error = "incomplete_stream"
        if error is None and not self.times:
            error = "no_output"
        times = self.times
        if self.usage_completion is not None:
            tokens, source = self.usage_completion, "usage"
        else:
            tokens, source = len(times), "chunks"
        cache = {} if itl_cache is None else itl_cache
        itl = tuple(_interned(round(b - a, 6), cache) for a, b in zip(times, times[1:]))
        sample = RequestSample(
            ok=error is None,
            error=error,
            prompt_tokens=self.usage_prompt if self.usage_prompt is not None else self.prompt_tokens,
            output_tokens=tokens,
            ttft_s=times[0] - self.t_sent if times else None,
            e2e_s=t_end - self.t_sent,
            itl_s=itl,
            token_count_source=source,
            queue_s=queue_s,
        )
        return RequestRecord(
            sample, self.t_sent, times[0] if times else None, t_end,
            self.reads, self.multi_event_reads, self.max_tokens,
            (times, self.emit_ts) if self.emit_ts is not None else None,
        )


def _interned(value: float, cache: dict[float, float]) -> float:
    # Rounded gaps repeat a lot; sharing one float object per value keeps a sample's ITL tuple at
    # ~8 bytes per token instead of 32 (C=1024 × 2048 requests × 1000 tokens is 2M gaps per level).
    return cache.setdefault(value, value)


@dataclass(frozen=True)
class ClientCheck:
    """How busy the load client itself was during a trial."""

    cpu_pct: float | None = None  # process CPU time / wall, in % of one core
    loop_lag_p99_s: float | None = None


@dataclass(frozen=True)
class TrialContext:
    """What the runner knew about a trial beyond its request records."""

    concurrency: int
    trial: int
    started_at: float
    wall_s: float
    planned_requests: int
    max_failure_rate: float
    open_loop: bool = False
    server_capacity: int | None = None  # effective max_running_requests, from /server_info
    retractions: int | None = None  # None: no server log was available to look at
    client: ClientCheck = ClientCheck()
    interrupted: bool = False
    telemetry: LevelTelemetry | None = None


def percentiles(values: Iterable[float]) -> Percentiles:
    # numpy here, not at the top: the rest of this module is what `deployctl bench`'s parser and the other
    # verbs import, at start-up (benchmarks/cli_startup.py).
    import numpy as np

    arr = np.fromiter(values, dtype=float)
    if arr.size == 0:
        return Percentiles()
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return Percentiles(p50=float(p50), p90=float(p90), p99=float(p99), mean=float(arr.mean()))


def peak_overlap(intervals: Iterable[tuple[float, float]]) -> int:
    """The largest number of ``[start, end)`` intervals open at one instant."""
    edges = sorted(chain.from_iterable(((s, 1), (e, -1)) for s, e in intervals), key=lambda x: (x[0], x[1]))
    peak = running = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def count_retractions(lines: Iterable[str]) -> int:
    return sum(1 for line in lines if RETRACT_MARKER in line)


def summarize_trial(records: Sequence[RequestRecord], ctx: TrialContext) -> TrialResult:
    samples = tuple(r.sample for r in records)
    ok = [s for s in samples if s.ok]
    failures: dict[str, int] = {}
    for s in samples:
        if not s.ok:
            failures[s.error or "unknown"] = failures.get(s.error or "unknown", 0) + 1
    out_tokens = sum(s.output_tokens for s in ok)
    in_tokens = sum(s.prompt_tokens for s in ok)
    wall = ctx.wall_s
    decode = [(s.output_tokens - 1, s.e2e_s - s.ttft_s) for s in ok if s.ttft_s is not None and s.output_tokens > 1]
    streaming = peak_overlap((r.t_first, r.t_end) for r in records if r.sample.ok and r.t_first is not None)
    reads = sum(r.reads for r in records)
    details = {
        "client_cpu_pct": ctx.client.cpu_pct,
        "loop_lag_p99_s": ctx.client.loop_lag_p99_s,
        "multi_event_read_share": (sum(r.multi_event_reads for r in records) / reads) if reads else None,
        "token_count_source": _token_source(ok),
        "short_outputs": sum(1 for r in records if r.sample.ok and r.sample.output_tokens != r.max_tokens),
        "peak_streaming": streaming,
        "server_capacity": ctx.server_capacity,
        "retractions": ctx.retractions,
    }
    return TrialResult(
        concurrency=ctx.concurrency,
        trial=ctx.trial,
        started_at=ctx.started_at,
        wall_s=wall,
        requests_ok=len(ok),
        requests_failed=len(samples) - len(ok),
        output_tokens=out_tokens,
        input_tokens=in_tokens,
        output_tok_s=out_tokens / wall if wall > 0 else 0.0,
        input_tok_s=in_tokens / wall if wall > 0 else 0.0,
        per_request_tok_s=percentiles(n / d for n, d in decode if d > 0),
        ttft_s=percentiles(s.ttft_s for s in ok if s.ttft_s is not None),
        itl_s=percentiles(chain.from_iterable(s.itl_s for s in ok)),
        tpot_s=percentiles(d / n for n, d in decode),
        e2e_s=percentiles(s.e2e_s for s in ok),
        failures=failures,
        invalid_reason=invalid_reason(ctx, total=len(samples), failed=len(samples) - len(ok),
                                      failures=failures, peak_streaming=streaming),
        samples=samples,
        telemetry=ctx.telemetry,
        notes=trial_notes(ctx),
        client=details,
        stall=find_stall(records),
    )


def invalid_reason(
    ctx: TrialContext, *, total: int, failed: int, failures: dict[str, int], peak_streaming: int
) -> str | None:
    """Why this trial must not be judged (several reasons joined by "; "), or None if it may be."""
    reasons = []
    c = ctx.concurrency
    if ctx.interrupted:
        reasons.append(f"interrupted: stopped after {total} of {ctx.planned_requests} requests")
    if total == 0:
        reasons.append("no requests completed")
    elif failed / total > ctx.max_failure_rate:
        kinds = ", ".join(f"{k}×{n}" for k, n in sorted(failures.items()))
        reasons.append(
            f"failures: {failed} of {total} requests failed ({100 * failed / total:.1f}% > "
            f"{100 * ctx.max_failure_rate:.1f}% allowed): {kinds}"
        )
    # The client's job is to keep C requests streaming, or as many as the server runs at once when that is
    # fewer (the rest queue on the server, which is part of what C measures: see ``trial_notes``).
    target = c if ctx.server_capacity is None else min(c, ctx.server_capacity)
    if ctx.planned_requests < c and not ctx.interrupted:
        reasons.append(f"concurrency {c} never reached: the level sends only {ctx.planned_requests} requests")
    elif not ctx.open_loop and not ctx.interrupted and total and peak_streaming < target:
        goal = "" if target == c else f" (the server runs at most {target} at once, so {target} were due)"
        reasons.append(
            f"concurrency {c} never reached on the server: at most {peak_streaming} requests were "
            f"streaming at once{goal}"
        )
    if ctx.retractions:
        reasons.append(f"server retracted requests: {ctx.retractions} '{RETRACT_MARKER}' log lines")
    cpu, lag = ctx.client.cpu_pct, ctx.client.loop_lag_p99_s
    if cpu is not None and cpu >= CLIENT_CPU_LIMIT_PCT:
        reasons.append(f"client was the limit: the load client used {cpu:.0f}% of a CPU core")
    if lag is not None and lag > LOOP_LAG_LIMIT_S:
        reasons.append(f"client was the limit: its event loop lagged {1000 * lag:.0f} ms (p99)")
    return "; ".join(reasons) or None


def trial_notes(ctx: TrialContext) -> tuple[str, ...]:
    """What an operator should know about a valid trial: C above the server's request capacity."""
    cap, c = ctx.server_capacity, ctx.concurrency
    if cap is None or cap >= c:
        return ()
    return (f"above the server's capacity: it runs at most {cap} requests at once (effective "
            f"max_running_requests), so {c - cap} of the {c} wait in its queue (their wait counts in TTFT)",)


def _token_source(ok: Sequence[RequestSample]) -> str | None:
    sources = {s.token_count_source for s in ok}
    return sources.pop() if len(sources) == 1 else ("mixed" if sources else None)
