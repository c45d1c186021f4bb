"""Feed the readiness decision from the outside world: the journal, the unit's state changes and /health.

``deployctl.startup.readiness.ReadinessTracker`` decides; this loop only delivers events to it on a clock,
so the decision is tested on data and this wiring on an injected clock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import AsyncIterator, Awaitable, Callable, Protocol

from deployctl.adapters.aio import cancel_all
from deployctl.startup.journal_line import JournalLine
from deployctl.startup.readiness import READY_LINE, ReadinessTracker, ReadyOutcome
from deployctl.units.state import UnitState

log = logging.getLogger("deployctl.readiness")


Probe = Callable[[], Awaitable[bool]]


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def wait_ready(
    *,
    lines: AsyncIterator[JournalLine],
    states: AsyncIterator[UnitState],
    timeout_s: float,
    probe: Probe | None = None,
    clock: Clock | None = None,
    baseline: UnitState | None = None,
    probe_interval_s: float = 0.05,
    tick_s: float = 0.05,
    ready_line: str = READY_LINE,
    on_line: Callable[[JournalLine], None] | None = None,
) -> ReadyOutcome:
    """Consume the three sources until the tracker decides. Sources that end simply stop contributing.

    The probe runs every 50 ms by default: journald announces new entries to followers only through a
    250 ms timer (with 250 ms accuracy) on systemd 252, so the log path alone takes 250–500 ms, while a
    refused connection or a 503 costs next to nothing (docs/systemd.md, benchmarks/readiness_latency.py).
    """
    clock = clock or SystemClock()
    tracker = ReadinessTracker(started_at=clock.now(), timeout_s=timeout_s, baseline=baseline,
                               ready_line=ready_line)
    events: asyncio.Queue[tuple[str, object]] = asyncio.Queue()

    async def pump(kind: str, source: AsyncIterator[object]) -> None:
        # A source that ends or fails only stops contributing: the others (and the timeout) still decide.
        try:
            async for item in source:
                events.put_nowait((kind, item))
        except Exception as exc:  # noqa: BLE001 - reported, then the wait goes on without this source
            log.warning("readiness: the %s source failed: %s", kind, exc)
        else:
            log.info("readiness: the %s source ended", kind)

    async def ticker() -> None:
        while True:
            await clock.sleep(tick_s)
            events.put_nowait(("tick", None))

    async def prober(check: Probe) -> None:
        while True:
            events.put_nowait(("health", await check()))
            await clock.sleep(probe_interval_s)

    tasks = [
        asyncio.create_task(pump("line", lines)),
        asyncio.create_task(pump("state", states)),
        asyncio.create_task(ticker()),
    ]
    if probe is not None:
        tasks.append(asyncio.create_task(prober(probe)))
    try:
        if baseline is not None:
            tracker.on_state(baseline, clock.now())  # already dead when the job finished?
        while True:
            kind, item = await events.get()
            now = clock.now()
            if kind == "line":
                assert isinstance(item, JournalLine)
                if on_line is not None:
                    on_line(item)
                outcome = tracker.on_line(item, now)
            elif kind == "state":
                assert isinstance(item, UnitState)
                outcome = tracker.on_state(item, now)
            elif kind == "health":
                outcome = tracker.on_health(bool(item), now)
            else:
                outcome = tracker.on_tick(now)
            if outcome is not None:
                return outcome
    finally:
        await cancel_all(tasks)
