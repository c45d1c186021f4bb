"""One trial of one concurrency level: the load a sweep puts on the server, request by request.

Closed loop by default: C workers, each sending its next request as soon as its previous one ends, so
there is never client-side queueing in TTFT, and TTFT starts when the request's bytes are written
(connection set-up in a burst of C=1024 is not the server's time). Open loop (``request_rate``): Poisson
arrivals, at most C in flight; time spent waiting for a free slot is ``queue_s``, never TTFT. The
client checks itself while it runs (CPU, event-loop lag) so a saturated client invalidates the trial.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Callable

from deployctl.adapters.http_load import LoadClient, LoadError
from deployctl.bench.metrics import ClientCheck, StreamRecorder, percentiles
from deployctl.bench.records import RequestRecord
from deployctl.bench.plan import COMPLETIONS_PATH, LevelPlan, LoadRequest

_LAG_PROBE_S = 0.05


@dataclass(frozen=True)
class TrialRun:
    records: tuple[RequestRecord, ...]
    started_at: float  # epoch s
    wall_s: float
    client: ClientCheck
    interrupted: bool


async def run_trial(
    client: LoadClient,
    level: LevelPlan,
    *,
    stop: asyncio.Event | None = None,
    on_done: Callable[[RequestRecord], None] | None = None,
    keep_emit_ts: bool = False,
) -> TrialRun:
    """One trial of one level: closed loop, or Poisson arrivals when the plan has a request rate."""
    stop = stop or asyncio.Event()
    records: list[RequestRecord] = []
    itl_cache: dict[float, float] = {}
    limit = level.requests if level.duration_s is None else None
    clock = time.perf_counter
    t0 = clock()
    deadline = t0 + level.duration_s if level.duration_s is not None else None
    indices = itertools.count()

    def more() -> bool:
        return not stop.is_set() and (deadline is None or clock() < deadline)

    async def send(request: LoadRequest, queue_s: float = 0.0) -> None:
        recorder = StreamRecorder(clock(), request.prompt_tokens, request.max_tokens, keep_emit_ts=keep_emit_ts)
        error = None
        try:
            await client.stream(COMPLETIONS_PATH, request.body, recorder)
        except LoadError as exc:
            error = exc.kind
        record = recorder.finish(clock(), error, queue_s=queue_s, itl_cache=itl_cache)
        records.append(record)
        if on_done:
            on_done(record)

    async def worker() -> None:
        for i in indices:
            if (limit is not None and i >= limit) or not more():
                return
            await send(level.request(i))

    async def open_loop() -> None:
        slots = asyncio.Semaphore(level.concurrency)
        tasks: set[asyncio.Task] = set()

        async def one(request: LoadRequest, due: float) -> None:
            async with slots:
                await send(request, queue_s=clock() - due)

        try:
            for i, offset in zip(indices, level.arrivals()):
                if (limit is not None and i >= limit) or not more():
                    break
                await asyncio.sleep(max(0.0, t0 + offset - clock()))
                task = asyncio.ensure_future(one(level.request(i), t0 + offset))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    lags: list[float] = []
    probe = asyncio.ensure_future(_probe_lag(lags))
    started_at, cpu0 = time.time(), time.process_time()
    if level.request_rate is None:
        body = asyncio.gather(*(worker() for _ in range(level.concurrency)))
    else:
        body = asyncio.ensure_future(open_loop())
    cancelled = await until_done_or_stopped(body, stop)
    wall = clock() - t0
    interrupted = cancelled or (stop.is_set() and (limit is None or len(records) < limit))
    cpu = time.process_time() - cpu0
    probe.cancel()
    check = ClientCheck(cpu_pct=100 * cpu / wall if wall > 0 else None, loop_lag_p99_s=percentiles(lags).p99)
    return TrialRun(tuple(records), started_at, wall, check, interrupted)


async def until_done_or_stopped(body: asyncio.Future, stop: asyncio.Event) -> bool:
    """Wait for ``body``, or cancel it when ``stop`` is set first; True when it was cancelled."""
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({body, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if body.done():
        body.result()
        return False
    body.cancel()
    await asyncio.gather(body, return_exceptions=True)
    return True


async def _probe_lag(lags: list[float]) -> None:
    # How late the event loop wakes a sleeper: the client's own congestion, in seconds.
    clock = time.perf_counter
    while True:
        due = clock() + _LAG_PROBE_S
        await asyncio.sleep(_LAG_PROBE_S)
        lags.append(max(0.0, clock() - due))
