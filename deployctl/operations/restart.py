"""Restart a unit and decide whether it came up: the act shared by ``deployctl restart`` and promote.

``restart_and_wait`` clears a start limit left by earlier failures, runs the restart job, and then waits
for readiness on the invocation the job started (journal + state changes + health probe). Every expected
failure — the job failing, the process crashing, a startup timeout — is a ``RestartReport`` with a typed
outcome; only a problem talking to systemd itself (no bus, access denied, unknown unit) raises.

``Endpoint`` says where systemd is: the host's own (the defaults), or a sandbox seen from outside
(``Sandbox.endpoint()``), or whatever ``DEPLOYCTL_*`` environment variables say.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

from deployctl.adapters.aio import bounded
from deployctl.adapters.journal import Journal
from deployctl.adapters.lock import DEFAULT_LOCK_DIR, DeploymentLock
from deployctl.adapters.systemd import JobResult, Systemd
from deployctl.adapters.unitfiles import (
    DEFAULT_BACKUP_DIR,
    DEFAULT_RUNTIME_DIR,
    DEFAULT_UNIT_DIR,
    UnitFiles,
)
from deployctl.errors import UnitNotFound
from deployctl.operations.ready_wait import Clock, Probe, wait_ready
from deployctl.startup.journal_line import JournalLine
from deployctl.startup.readiness import READY_LINE, Crashed, ReadyOutcome
from deployctl.units.state import UnitState

DEFAULT_STARTUP_TIMEOUT_S = 1800.0
_LAST_LINES = 20


@dataclass(frozen=True)
class Endpoint:
    """Where one host's systemd, unit directories and journal are."""

    bus_address: str | None = None  # None: $DBUS_SYSTEM_BUS_ADDRESS, else the standard socket
    unit_dir: Path = DEFAULT_UNIT_DIR
    runtime_dir: Path = DEFAULT_RUNTIME_DIR
    backup_dir: Path | None = DEFAULT_BACKUP_DIR
    journal_command: tuple[str, ...] = ("journalctl",)
    lock_dir: Path = DEFAULT_LOCK_DIR  # per unit, whatever the ledger's --state-dir

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Endpoint":
        """Defaults overridden by DEPLOYCTL_UNIT_DIR, DEPLOYCTL_RUNTIME_UNIT_DIR, DEPLOYCTL_BACKUP_DIR,
        DEPLOYCTL_JOURNALCTL (a command line, e.g. ``journalctl --root /proc/1234/root``), DEPLOYCTL_LOCK_DIR."""
        env = dict(os.environ if env is None else env)
        return cls(
            bus_address=env.get("DBUS_SYSTEM_BUS_ADDRESS") or None,
            unit_dir=Path(env.get("DEPLOYCTL_UNIT_DIR") or DEFAULT_UNIT_DIR),
            runtime_dir=Path(env.get("DEPLOYCTL_RUNTIME_UNIT_DIR") or DEFAULT_RUNTIME_DIR),
            backup_dir=Path(env.get("DEPLOYCTL_BACKUP_DIR") or DEFAULT_BACKUP_DIR),
            journal_command=tuple(shlex.split(env.get("DEPLOYCTL_JOURNALCTL") or "journalctl")),
            lock_dir=Path(env.get("DEPLOYCTL_LOCK_DIR") or DEFAULT_LOCK_DIR),
        )

    def unit_files(self) -> UnitFiles:
        return UnitFiles(self.unit_dir, self.runtime_dir, self.backup_dir)

    def lock(self, unit: str, deployment: str | None = None) -> DeploymentLock:
        return DeploymentLock(self.lock_dir, unit, deployment)

    def journal(self) -> Journal:
        return Journal(self.journal_command)

    async def connect(self) -> Systemd:
        return await Systemd.connect(self.bus_address)


@dataclass(frozen=True)
class RestartReport:
    unit: str
    job: JobResult
    outcome: ReadyOutcome
    invocation_id: str
    log: tuple[JournalLine, ...] = field(repr=False)  # the invocation's lines seen while waiting
    start_limit_reset: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome.ok


def http_health_probe(url: str, *, timeout_s: float = 2.0) -> Probe:
    """A probe answering whether ``GET url`` returns 200; any connection problem is "not yet"."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"the health probe speaks plain HTTP only, got {url!r}")
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    request = f"GET {target} HTTP/1.0\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()

    async def probe() -> bool:
        try:
            reader, writer = await bounded(asyncio.open_connection(host, port), timeout_s)
        except (OSError, asyncio.TimeoutError):
            return False
        try:
            writer.write(request)
            await writer.drain()
            status = await bounded(reader.readline(), timeout_s)
            fields = status.split()
            return len(fields) >= 2 and fields[1] == b"200"
        except (OSError, asyncio.TimeoutError):
            return False
        finally:
            writer.close()

    return probe


async def _restart_clearing_start_limit(systemd: Systemd, unit: str) -> tuple[JobResult, bool]:
    before = await systemd.unit_state(unit)
    if before.load_state == "not-found":
        raise UnitNotFound(f"{unit} is not installed", hint="install its unit file, then daemon-reload")
    reset = False
    if before.result == "start-limit-hit":
        await systemd.reset_failed(unit)
        reset = True
    job = await systemd.restart(unit)
    if not job.ok and not reset and (await systemd.unit_state(unit)).result == "start-limit-hit":
        # Rollback loops hit the limit (6 starts in 10 s); clearing it once is what an operator would do.
        await systemd.reset_failed(unit)
        reset = True
        job = await systemd.restart(unit)
    return job, reset


async def restart_and_wait(
    systemd: Systemd,
    journal: Journal,
    unit: str,
    *,
    timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S,
    probe: Probe | None = None,
    clock: Clock | None = None,
    ready_line: str = READY_LINE,
    on_line: Callable[[JournalLine], None] | None = None,
    probe_interval_s: float = 0.05,
) -> RestartReport:
    """Restart ``unit`` (already installed and reloaded) and wait until it is ready, crashed or timed out."""
    job, reset = await _restart_clearing_start_limit(systemd, unit)
    state = await systemd.unit_state(unit)
    if not job.ok:
        log = tuple(await journal.read(state.invocation_id)) if state.invocation_id else ()
        outcome: ReadyOutcome = _job_failed(job, state, log)
        return RestartReport(unit, job, outcome, state.invocation_id, log, reset)

    if not state.invocation_id:  # cannot happen for a started Type=exec service; say so rather than guess
        outcome = Crashed(reason=f"systemd reports no invocation of {unit} after its {job.verb} job",
                          elapsed_s=0.0, last_lines=(), state=state)
        return RestartReport(unit, job, outcome, "", (), reset)
    seen: list[JournalLine] = []

    def record(line: JournalLine) -> None:
        seen.append(line)
        if on_line is not None:
            on_line(line)

    follower = journal.follow(state.invocation_id)
    states = systemd.watch(unit)
    try:
        outcome = await wait_ready(lines=follower, states=states, timeout_s=timeout_s, probe=probe,
                                   clock=clock, baseline=state, ready_line=ready_line, on_line=record,
                                   probe_interval_s=probe_interval_s)
    finally:
        await follower.aclose()
        await states.aclose()
    return RestartReport(unit, job, outcome, state.invocation_id, tuple(seen), reset)


async def read_startup(journal: Journal, invocation_id: str, ready_line: str = READY_LINE) -> list[JournalLine]:
    """The invocation's startup log: from its first line to the ready line (or to its end, if it never
    got there), never the serving log after it, however long the server has been up."""
    return await journal.read(invocation_id,
                              stop_after=lambda line: not line.from_manager and ready_line in line.text)


def _job_failed(job: JobResult, state: UnitState, log: tuple[JournalLine, ...]) -> Crashed:
    lines = tuple(line.display for line in log if line.display)[-_LAST_LINES:]
    reason = (f"the {job.verb} job ended '{job.result}': main process {state.exit_description} "
              f"(unit {state.active_state}/{state.sub_state}, result {state.result or 'none'})")
    return Crashed(reason=reason, elapsed_s=0.0, last_lines=lines, state=state, job_result=job.result)
