"""systemd over D-Bus: reload, restart/start/stop with the job's result, unit state, state-change watch.

The only importer of dbus-fast (with systemd_bus.py, the connection itself: bounded calls, reconnect
and retry, systemd followed across ``daemon-reexec``). Pitfalls handled here (measured, docs/systemd.md):
- every ``JobRemoved`` is recorded by job path from the moment the connection exists, so a job that
  finishes before the ``RestartUnit`` reply is processed is not lost; a job wait also checks every
  ``_JOB_POLL_S`` (and after a reconnect) that the job still exists, should its signal be lost;
- a watch subscribes to its unit's own ``PropertiesChanged`` and re-reads the state after a reconnect;
- D-Bus errors become deployctl's exceptions at this boundary, with what to do next.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Sequence

from dbus_fast import Message, MessageType, Variant
from dbus_fast.errors import DBusError

from deployctl.adapters.aio import bounded
from deployctl.adapters.systemd_bus import (
    MANAGER,
    MANAGER_PATH,
    PROPERTIES,
    SYSTEMD,
    SystemdBus,
    properties_rule,
)
from deployctl.errors import (
    AccessDenied,
    BadUnitSetting,
    JobFailed,
    SystemdError,
    UnitExists,
    UnitNotFound,
)
from deployctl.adapters.transient import Property
from deployctl.units.state import UnitState

log = logging.getLogger("deployctl.systemd")

UNIT = "org.freedesktop.systemd1.Unit"
SERVICE = "org.freedesktop.systemd1.Service"

JOB_RESULTS = ("done", "failed", "timeout", "canceled", "dependency", "skipped")
# How often a job wait checks that the job still exists, should its JobRemoved signal be lost.
_JOB_POLL_S = 2.0
_REMEMBERED_JOBS = 4096

ACCESS_HINT = (
    "run deployctl as root, or grant the operator group the polkit actions "
    "org.freedesktop.systemd1.manage-units and org.freedesktop.systemd1.reload-daemon "
    "(example rule: systemd/50-deployctl.rules)"
)


@dataclass(frozen=True)
class JobResult:
    """The result systemd reported in ``JobRemoved`` for one job."""

    unit: str
    verb: str
    job: str
    result: str

    @property
    def ok(self) -> bool:
        return self.result == "done"

    def check(self) -> "JobResult":
        """Raise ``JobFailed`` unless the job finished ``done``."""
        if not self.ok:
            raise JobFailed(
                f"systemd's {self.verb} job for {self.unit} ended '{self.result}'",
                result=self.result,
                hint=f"see `systemctl status {self.unit}` and `journalctl -u {self.unit} -n 50`",
            )
        return self


def _map_error(exc: DBusError, unit: str | None) -> Exception:
    name = exc.type
    what = unit or "the systemd manager"
    if name in ("org.freedesktop.systemd1.NoSuchUnit", "org.freedesktop.systemd1.LoadFailed"):
        return UnitNotFound(
            f"{what}: {exc.text}",
            hint="install the unit file first (deployctl restart installs it), then daemon-reload",
        )
    if name == "org.freedesktop.systemd1.BadUnitSetting":
        return BadUnitSetting(
            f"{what} has a bad unit file setting: {exc.text}",
            hint=f"run `systemd-analyze verify {unit}` on the rendered unit" if unit else None,
        )
    if name in (
        "org.freedesktop.DBus.Error.AccessDenied",
        "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
    ):
        return AccessDenied(f"systemd refused the request for {what}: {exc.text}", hint=ACCESS_HINT)
    if name == "org.freedesktop.systemd1.UnitExists":
        return UnitExists(f"{what} exists already: {exc.text}")
    if name == "org.freedesktop.systemd1.UnitMasked":
        return SystemdError(f"{what} is masked: {exc.text}", hint=f"systemctl unmask {unit}")
    return SystemdError(f"systemd error for {what}: {name}: {exc.text}")


def _v(props: dict[str, Any], key: str, default: Any) -> Any:
    variant = props.get(key)
    return default if variant is None else variant.value


class Systemd:
    """An asyncio connection to systemd's manager on the system bus that survives losing it."""

    def __init__(self, bus_address: str | None) -> None:
        self.bus = SystemdBus(bus_address, self._on_signal, self._on_reconnect)
        # Every JobRemoved result by job path: ours may arrive before the RestartUnit reply is processed.
        self._jobs: OrderedDict[str, str] = OrderedDict()
        self._job_waiters: dict[str, list[asyncio.Future[str]]] = {}
        self._watchers: dict[str, list[asyncio.Queue[None]]] = {}
        self._paths: dict[str, str] = {}
        self._recheck = asyncio.Event()  # set on a reconnect: signals may have been missed

    @classmethod
    async def connect(cls, bus_address: str | None = None) -> "Systemd":
        """Connect to ``bus_address``, else ``$DBUS_SYSTEM_BUS_ADDRESS``, else the standard system bus."""
        self = cls(bus_address or os.environ.get("DBUS_SYSTEM_BUS_ADDRESS"))
        await self.bus.open()
        return self

    async def close(self) -> None:
        bus = self.bus.close()
        if bus is None:
            return
        try:
            await bounded(bus.wait_for_disconnect(), 2)
        except Exception:  # noqa: BLE001 - closing: a connection already gone (or slow to go) is fine
            log.debug("systemd bus: disconnect did not complete cleanly")

    async def __aenter__(self) -> "Systemd":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- signals -------------------------------------------------------------------------------

    def _on_signal(self, msg: Message) -> None:
        if msg.member == "JobRemoved" and msg.interface == MANAGER:
            _id, job, _unit, result = msg.body
            # Kept even when someone waits: two callers can be handed the same (merged) job.
            self._jobs[job] = result
            while len(self._jobs) > _REMEMBERED_JOBS:
                self._jobs.popitem(last=False)
            for waiter in self._job_waiters.pop(job, ()):
                if not waiter.done():
                    waiter.set_result(result)
        elif msg.member == "PropertiesChanged" and msg.interface == PROPERTIES:
            for queue in self._watchers.get(msg.path, ()):
                queue.put_nowait(None)

    def _on_reconnect(self) -> None:
        # Whatever changed while no signal could arrive: job waits look again, watches re-read the state.
        self._recheck.set()
        self._recheck = asyncio.Event()
        for queues in self._watchers.values():
            for queue in queues:
                queue.put_nowait(None)

    # --- calls ---------------------------------------------------------------------------------

    async def _call(self, dest: str, path: str, iface: str, member: str, signature: str = "",
                    body: list[Any] | None = None, unit: str | None = None) -> list[Any]:
        reply = await self.bus.call(dest, path, iface, member, signature, body)
        if reply.message_type is MessageType.ERROR:
            text = reply.body[0] if reply.body and isinstance(reply.body[0], str) else ""
            raise _map_error(DBusError(reply.error_name or "org.freedesktop.DBus.Error.Failed", text), unit)
        return reply.body

    async def _manager(self, member: str, signature: str = "", body: list[Any] | None = None,
                       unit: str | None = None) -> list[Any]:
        return await self._call(SYSTEMD, MANAGER_PATH, MANAGER, member, signature, body, unit)

    async def reload(self) -> None:
        """``systemctl daemon-reload``: re-read every unit file (120–160 ms on systemd 252)."""
        await self._manager("Reload")

    async def _job(self, verb: str, method: str, unit: str, timeout: float | None) -> JobResult:
        (job,) = await self._manager(method, "ss", [unit, "replace"], unit=unit)
        outcome = self._jobs.get(job)
        if outcome is None:
            waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._job_waiters.setdefault(job, []).append(waiter)
            try:
                outcome = await self._await_job(waiter, verb, job, unit, timeout)
            finally:
                waiting = self._job_waiters.get(job, [])
                if waiter in waiting:
                    waiting.remove(waiter)
                if not waiting:
                    self._job_waiters.pop(job, None)
        result = JobResult(unit=unit, verb=verb, job=job, result=outcome)
        log.info("%s %s: job %s", verb, unit, result.result)
        return result

    async def _await_job(self, waiter: "asyncio.Future[str]", verb: str, job: str, unit: str,
                         timeout: float | None) -> str:
        """The job's JobRemoved result; if the signal never comes although the job is gone, the unit's state.

        A bus may drop a signal (a full queue); without this check the controller would wait forever
        on a job systemd finished long ago.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            recheck = asyncio.ensure_future(self._recheck.wait())
            try:
                await asyncio.wait({waiter, recheck}, timeout=_JOB_POLL_S, return_when=asyncio.FIRST_COMPLETED)
            finally:
                recheck.cancel()
            if waiter.done():
                return waiter.result()
            if job in self._jobs:
                return self._jobs[job]
            if not await self._job_exists(job):
                state = await self.unit_state(unit)
                wanted = ("inactive", "failed") if verb == "stop" else ("active", "activating", "reloading")
                result = "done" if state.active_state in wanted else "failed"
                log.warning("%s %s: no JobRemoved for %s; the job is gone and the unit is %s: taking %s",
                            verb, unit, job, state.active_state, result)
                return result
            if deadline is not None and loop.time() > deadline:
                raise SystemdError(
                    f"systemd's {verb} job for {unit} did not finish within {timeout:g} s",
                    hint=f"see `systemctl list-jobs` and `systemctl status {unit}`",
                )

    async def _job_exists(self, job: str) -> bool:
        reply = await self.bus.call(SYSTEMD, job, PROPERTIES, "Get", "ss", ["org.freedesktop.systemd1.Job", "State"])
        return reply.message_type is not MessageType.ERROR

    async def restart(self, unit: str, *, timeout: float | None = None) -> JobResult:
        """Restart (mode ``replace``) and wait for this job's result; a non-``done`` result is returned, not raised."""
        return await self._job("restart", "RestartUnit", unit, timeout)

    async def start(self, unit: str, *, timeout: float | None = None) -> JobResult:
        return await self._job("start", "StartUnit", unit, timeout)

    async def stop(self, unit: str, *, timeout: float | None = None) -> JobResult:
        return await self._job("stop", "StopUnit", unit, timeout)

    async def reset_failed(self, unit: str) -> None:
        """Clear the failed state and the start-limit counter (``Result=start-limit-hit``).

        A unit that is not loaded has nothing to clear (systemd answers NoSuchUnit): not an error."""
        try:
            await self._manager("ResetFailedUnit", "s", [unit], unit=unit)
        except UnitNotFound:
            log.debug("reset-failed %s: not loaded, nothing to clear", unit)

    async def unit_path(self, unit: str) -> str:
        path = self._paths.get(unit)
        if path is None:
            # LoadUnit, unlike GetUnit, also answers for a unit that is not loaded right now.
            (path,) = await self._manager("LoadUnit", "s", [unit], unit=unit)
            self._paths[unit] = path
        return path

    async def unit_state(self, unit: str) -> UnitState:
        path = await self.unit_path(unit)
        (u,) = await self._call(SYSTEMD, path, PROPERTIES, "GetAll", "s", [UNIT], unit=unit)
        s: dict[str, Any] = {}
        if unit.endswith(".service") and _v(u, "LoadState", "") == "loaded":
            (s,) = await self._call(SYSTEMD, path, PROPERTIES, "GetAll", "s", [SERVICE], unit=unit)
        invocation = _v(u, "InvocationID", b"")
        return UnitState(
            name=unit,
            load_state=_v(u, "LoadState", ""),
            active_state=_v(u, "ActiveState", ""),
            sub_state=_v(u, "SubState", ""),
            result=_v(s, "Result", ""),
            main_pid=_v(s, "MainPID", 0),
            exec_main_code=_v(s, "ExecMainCode", 0),
            exec_main_status=_v(s, "ExecMainStatus", 0),
            n_restarts=_v(s, "NRestarts", 0),
            invocation_id=bytes(invocation).hex(),
            active_enter_us=_v(u, "ActiveEnterTimestamp", 0),
            need_daemon_reload=_v(u, "NeedDaemonReload", False),
            fragment_path=_v(u, "FragmentPath", ""),
        )

    async def watch(self, unit: str) -> AsyncGenerator[UnitState, None]:
        """Yield the unit's state now and after every change systemd announces, until the caller stops."""
        path = await self.unit_path(unit)
        queue: asyncio.Queue[None] = asyncio.Queue()
        rule = properties_rule(path)
        await self.bus.add_rule(rule)
        self._watchers.setdefault(path, []).append(queue)
        try:
            yield await self.unit_state(unit)
            while True:
                await queue.get()
                while not queue.empty():  # coalesce a burst of changes into one snapshot
                    queue.get_nowait()
                yield await self.unit_state(unit)
        finally:
            self._watchers[path].remove(queue)
            if not self._watchers[path]:
                del self._watchers[path]
            self.bus.remove_rule(rule)

    async def enable_unit_files(self, files: list[str]) -> None:
        """``systemctl enable FILES`` (the [Install] section's symlinks, persistent), then a daemon-reload."""
        await self._manager("EnableUnitFiles", "asbb", [files, False, True])
        await self.reload()

    async def disable_unit_files(self, files: list[str]) -> None:
        """``systemctl disable FILES`` (their [Install] symlinks removed), then a daemon-reload."""
        await self._manager("DisableUnitFiles", "asb", [files, False])
        await self.reload()

    # --- transient units (deployctl.adapters.transient builds their properties) --------------------

    async def start_transient(self, name: str, properties: list[Property],
                              aux: Sequence[tuple[str, list[Property]]] = (), *,
                              timeout: float | None = None) -> JobResult:
        """``StartTransientUnit`` (mode ``fail``, as systemd-run) and wait for the start job's result.

        ``aux`` carries the service a timer starts (systemd-run --on-active sends it there)."""
        def wrap(props: list[Property]) -> list[tuple[str, Variant]]:
            return [(key, Variant(signature, value)) for key, signature, value in props]

        (job,) = await self._manager("StartTransientUnit", "ssa(sv)a(sa(sv))",
                                     [name, "fail", wrap(properties), [(n, wrap(p)) for n, p in aux]], unit=name)
        outcome = self._jobs.get(job)
        if outcome is None:
            waiter: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self._job_waiters.setdefault(job, []).append(waiter)
            outcome = await self._await_job(waiter, "start", job, name, timeout)
        return JobResult(unit=name, verb="start", job=job, result=outcome)

    async def kill(self, unit: str, signal: int, *, whom: str = "main") -> None:
        """``systemctl kill --kill-whom=WHOM --signal=SIGNAL UNIT``."""
        await self._manager("KillUnit", "ssi", [unit, whom, signal], unit=unit)

    async def stop_if_loaded(self, unit: str) -> bool:
        """Stop ``unit`` if systemd has it loaded and running; False when there was nothing to stop."""
        state = await self.unit_state(unit)
        if state.load_state != "loaded" or state.active_state in ("inactive", "failed"):
            return False
        (await self.stop(unit)).check()
        return True
