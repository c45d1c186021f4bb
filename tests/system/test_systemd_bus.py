"""The bus connection on a real systemd: it survives being dropped mid-wait (a rollback-like sequence
completes) and follows systemd to its new bus name across ``daemon-reexec``."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Callable

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.operations.restart import Endpoint, restart_and_wait
from deployctl.sandbox import Sandbox
from deployctl.startup.readiness import READY_LINE, Ready

pytestmark = [pytest.mark.system, pytest.mark.timeout(90)]

SLOW_START = "ExecStartPre=/bin/sleep 1.5\n"
SLEEPER = "/bin/sh -c 'echo up; exec sleep 600'"


def drop(systemd: Systemd) -> None:
    """Kill the connection under the adapter's feet, as a dbus-daemon restart or a network blip would."""
    connection = systemd.bus.connection
    assert connection is not None and connection.connected
    sock = socket.socket(fileno=connection._sock.fileno())
    try:
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()


async def test_a_job_wait_survives_the_connection_dropping(
        systemd: Systemd, unit_files: UnitFiles, unit_text: Callable[..., str]) -> None:
    name = "st-drop-job.service"
    unit_files.install(name, unit_text(SLEEPER, extra_service=SLOW_START))
    await systemd.reload()
    job = asyncio.create_task(systemd.restart(name, timeout=30))
    await asyncio.sleep(0.5)  # the job is running (its ExecStartPre sleeps 1.5 s)
    assert not job.done()
    drop(systemd)
    result = await job
    assert result.ok and systemd.bus.reconnects >= 1
    assert (await systemd.unit_state(name)).active_state == "active"
    await systemd.stop(name, timeout=30)


async def test_a_rollback_like_sequence_completes_through_two_drops(
        systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]) -> None:
    """discard trial → reload → restart → wait ready, with the connection dropped before the reload and
    again during the readiness wait: it ends Ready on the known-good unit, not in an error."""
    name = "st-drop-rollback.service"
    known_good = python_unit(f"import time\ntime.sleep(1.5)\nprint('{READY_LINE}')\ntime.sleep(600)\n")
    unit_files.install(name, known_good)
    unit_files.install_trial(name, python_unit("import sys\nsys.exit(3)\n"), adopt=True)
    await systemd.reload()
    assert unit_files.discard_trial(name)
    drop(systemd)
    await systemd.reload()  # the call finds the connection gone: reconnected and retried
    wait = asyncio.create_task(restart_and_wait(systemd, endpoint.journal(), name, timeout_s=30))
    await asyncio.sleep(0.8)
    assert not wait.done()
    drop(systemd)
    report = await wait
    assert isinstance(report.outcome, Ready), report.outcome
    assert systemd.bus.reconnects >= 2
    state = await systemd.unit_state(name)
    assert state.running and state.fragment_path == f"/etc/systemd/system/{name}"
    await systemd.stop(name, timeout=30)


async def _owner(sandbox: Sandbox) -> str:
    done = await asyncio.to_thread(sandbox.run, ["busctl", "--system", "call", "org.freedesktop.DBus",
                                                 "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                                                 "s", "org.freedesktop.systemd1"], timeout=10)
    return done.stdout.split()[-1].strip('"') if done.returncode == 0 else ""


async def test_systemd_is_followed_across_daemon_reexec(
        sandbox: Sandbox, systemd: Systemd, unit_files: UnitFiles, unit_text: Callable[..., str],
        caplog: pytest.LogCaptureFixture) -> None:
    name = "st-reexec.service"
    unit_files.install(name, unit_text(SLEEPER))
    await systemd.reload()
    before = systemd.bus.systemd_name
    assert before == await _owner(sandbox)
    done = await asyncio.to_thread(sandbox.run, ["systemctl", "daemon-reexec"], timeout=60)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 20
    while systemd.bus.systemd_name in (before, "") or not await _owner(sandbox):
        assert time.monotonic() < deadline, "the adapter never saw systemd's new bus name"
        await asyncio.sleep(0.05)
    assert systemd.bus.systemd_name == await _owner(sandbox) != before

    # Signals from the new name are taken: a watch sees a restart someone else makes, and our own job's
    # JobRemoved arrives (no fallback to polling the job).
    watch = systemd.watch(name)
    first = await watch.__anext__()
    restarted = await asyncio.to_thread(sandbox.run, ["systemctl", "restart", name], timeout=30)
    assert restarted.returncode == 0, restarted.stderr
    seen = first
    while not (seen.running and seen.invocation_id != first.invocation_id):
        seen = await asyncio.wait_for(watch.__anext__(), 10)
    await watch.aclose()
    with caplog.at_level(logging.WARNING, logger="deployctl.systemd"):
        assert (await systemd.restart(name, timeout=30)).ok
    assert "no JobRemoved" not in caplog.text
    await systemd.stop(name, timeout=30)
