"""The start-up phases and how long each took, from the log's own timestamps (pure)."""

from __future__ import annotations

from datetime import datetime
from typing import Mapping

from deployctl.startup.report import PHASES, Phase

Stamp = tuple[str, "int | None"]


def reached_phases(starts: Mapping[str, Stamp], first: Stamp | None, last: Stamp | None, *,
                   from_arguments: bool) -> tuple[tuple[Phase, ...], float | None]:
    """Each phase reached, lasting until the next one begins (the last one, unfinished, until the last
    line). Without the dump, the first line is not the start of argument parsing (a tail-only paste),
    so ``arguments`` is left out."""
    reached = [(name, starts[name]) for name in PHASES
               if name in starts and (from_arguments or name != "arguments")]
    if not reached:
        return (), None
    out = []
    for index, (name, stamp) in enumerate(reached):
        if name == "ready":
            out.append(Phase(name, fmt_stamp(stamp), None))
            continue
        if index + 1 < len(reached):
            end, complete = reached[index + 1][1], True
        else:
            end, complete = last, False
        seconds = _seconds(stamp, end) if end is not None else None
        out.append(Phase(name, fmt_stamp(stamp), seconds, complete))
    # Time to ready counts from the start: unknown for a paste that does not begin there.
    total = _seconds(first, starts["ready"]) if from_arguments and "ready" in starts and first is not None else None
    return tuple(out), total


def _epoch(ts: str, ms: int | None) -> float:
    if len(ts) == 8:  # 0.3.x: time of day only
        return int(ts[0:2]) * 3600 + int(ts[3:5]) * 60 + int(ts[6:8]) + (ms or 0) / 1000.0
    moment = datetime(int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]), int(ts[17:19]))
    return moment.timestamp() + (ms or 0) / 1000.0


def _seconds(start: Stamp, end: Stamp) -> float:
    span = _epoch(*end) - _epoch(*start)
    if span < 0 and len(start[0]) == 8:
        span += 86400.0  # a time-only log that ran past midnight
    return round(span, 3)


def fmt_stamp(stamp: Stamp | None) -> str | None:
    if stamp is None:
        return None
    ts, ms = stamp
    return f"{ts}.{ms:03d}" if ms is not None else ts
