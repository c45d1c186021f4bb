"""Did the server come up? The decision after a restart job, as a typed outcome, never an exception.

Ready  = the line "The server is fired up and ready to roll!" or ``/health`` answering 200, whichever first,
         while the unit stays up (a finished start job alone proves nothing: see docs/systemd.md).
Crashed = the unit left the active state, or systemd restarted it behind our back (``Restart=on-failure``
         shows as a new InvocationID / a higher NRestarts / ``auto-restart``): how the process ended and the
         last lines of its log.
TimedOut = neither within the startup timeout: the last line it wrote says where it was stuck.

``ReadinessTracker`` is the pure decision (events in, outcome out, time passed in); ``wait_ready`` feeds it
from the journal, the unit's state changes and the injected health probe, on an injected clock, so every
path is tested on data and a timeout without sleeping.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Literal, Union

from deployctl.startup.journal_line import JournalLine
from deployctl.units.state import UnitState

log = logging.getLogger("deployctl.startup.readiness")

READY_LINE = "The server is fired up and ready to roll!"
# PID 1 lines that close a crashed invocation: once seen, the log of the crash is complete.
_CRASH_CLOSED = ("Failed with result", "Scheduled restart job", "Deactivated successfully")


@dataclass(frozen=True)
class Ready:
    via: Literal["log", "health"]
    elapsed_s: float
    line: JournalLine | None = None
    kind: Literal["ready"] = "ready"
    ok: bool = True


@dataclass(frozen=True)
class Crashed:
    reason: str  # e.g. "exited with status 1 (unit failed/failed, result exit-code)"
    elapsed_s: float
    last_lines: tuple[str, ...]
    state: UnitState | None = None
    job_result: str | None = None  # set when the start job itself did not end "done"
    kind: Literal["crashed"] = "crashed"
    ok: bool = False


@dataclass(frozen=True)
class TimedOut:
    elapsed_s: float
    last_line: str | None  # where it was stuck, e.g. "Capture cuda graph begin. …"
    last_lines: tuple[str, ...]
    kind: Literal["timeout"] = "timeout"
    ok: bool = False


ReadyOutcome = Union[Ready, Crashed, TimedOut]


def crash_reason(baseline: UnitState, state: UnitState) -> str | None:
    """Why ``state`` means the invocation that ``baseline`` saw running is gone; None while it is up."""
    where = f"unit {state.active_state}/{state.sub_state}, result {state.result or 'none'}"
    if state.invocation_id and baseline.invocation_id and state.invocation_id != baseline.invocation_id:
        return f"{state.exit_description} and systemd restarted it ({where}, NRestarts {state.n_restarts})"
    if state.n_restarts > baseline.n_restarts:
        return f"{state.exit_description} and systemd restarted it ({where}, NRestarts {state.n_restarts})"
    if state.active_state in ("failed", "inactive", "deactivating") or state.sub_state == "auto-restart":
        return f"{state.exit_description} ({where})"
    return None


class ReadinessTracker:
    """The decision as a state machine: feed events with the time they were seen; a non-None return is final."""

    def __init__(
        self,
        *,
        started_at: float,
        timeout_s: float,
        baseline: UnitState | None = None,
        ready_line: str = READY_LINE,
        keep_lines: int = 20,
        crash_grace_s: float = 0.5,
    ) -> None:
        self.started_at = started_at
        self.timeout_s = timeout_s
        self.baseline = baseline
        self.ready_line = ready_line
        self.crash_grace_s = crash_grace_s
        self._lines: deque[str] = deque(maxlen=keep_lines)
        self._last_own: str | None = None
        self._crash: tuple[str, UnitState, float] | None = None
        self.outcome: ReadyOutcome | None = None

    def _done(self, outcome: ReadyOutcome) -> ReadyOutcome:
        self.outcome = outcome
        return outcome

    def _finish_crash(self, now: float) -> ReadyOutcome:
        assert self._crash is not None
        reason, state, seen = self._crash
        return self._done(Crashed(reason=reason, elapsed_s=seen - self.started_at,
                                  last_lines=tuple(self._lines), state=state))

    def on_line(self, line: JournalLine, now: float) -> ReadyOutcome | None:
        if self.outcome is not None:
            return self.outcome
        shown = line.display
        if shown:
            self._lines.append(shown)
            if not line.from_manager:
                self._last_own = shown
        if self._crash is not None:
            if line.from_manager and any(mark in line.text for mark in _CRASH_CLOSED):
                return self._finish_crash(now)
            return None
        if not line.from_manager and self.ready_line in line.text:
            return self._done(Ready(via="log", elapsed_s=now - self.started_at, line=line))
        return None

    def on_state(self, state: UnitState, now: float) -> ReadyOutcome | None:
        if self.outcome is not None or self._crash is not None:
            return self.outcome
        if self.baseline is None:
            self.baseline = state
        reason = crash_reason(self.baseline, state)
        if reason is not None:
            # Keep reading for a moment: the journal lags the D-Bus signal, and the last lines matter most.
            self._crash = (reason, state, now)
        return None

    def on_health(self, ok: bool, now: float) -> ReadyOutcome | None:
        if self.outcome is not None:
            return self.outcome
        if ok and self._crash is None:
            return self._done(Ready(via="health", elapsed_s=now - self.started_at))
        return None

    def on_tick(self, now: float) -> ReadyOutcome | None:
        if self.outcome is not None:
            return self.outcome
        if self._crash is not None:
            if now - self._crash[2] >= self.crash_grace_s:
                return self._finish_crash(now)
            return None
        if now - self.started_at >= self.timeout_s:
            return self._done(TimedOut(elapsed_s=now - self.started_at, last_line=self._last_own,
                                       last_lines=tuple(self._lines)))
        return None


