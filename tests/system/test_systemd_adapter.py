"""The D-Bus adapter and the unit-file layout against a real systemd 252+."""

from __future__ import annotations

import asyncio
import functools
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest
from nobody import as_nobody

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.errors import AccessDenied, BadUnitSetting, UnitNotFound
from deployctl.operations.restart import Endpoint
from deployctl.sandbox import Sandbox

UnitText = Callable[..., str]

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

SLEEPER = "/bin/sh -c 'echo {marker}; exec sleep 600'"


async def own_lines(endpoint: Endpoint, invocation_id: str) -> list[str]:
    return [line.text for line in await endpoint.journal().read(invocation_id) if not line.from_manager]


async def test_trial_overrides_known_good_until_discarded_and_keep_persists_it(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, unit_text: UnitText) -> None:
    name = "st-trial.service"
    unit_files.install(name, unit_text(SLEEPER.format(marker="known-good")))
    await systemd.reload()
    assert (await systemd.restart(name)).ok
    state = await systemd.unit_state(name)
    assert state.fragment_path == f"/etc/systemd/system/{name}"
    assert await own_lines(endpoint, state.invocation_id) == ["known-good"]

    unit_files.install_trial(name, unit_text(SLEEPER.format(marker="candidate")))
    # NeedDaemonReload does not notice a new file in a higher-priority directory: always reload.
    await systemd.reload()
    assert (await systemd.restart(name)).ok
    state = await systemd.unit_state(name)
    # /run/systemd/system.control comes before /etc/systemd/system in systemd's search path.
    assert state.fragment_path == f"/run/systemd/system.control/{name}"
    assert await own_lines(endpoint, state.invocation_id) == ["candidate"]

    unit_files.discard_trial(name)
    await systemd.reload()
    assert (await systemd.restart(name)).ok
    state = await systemd.unit_state(name)
    assert state.fragment_path == f"/etc/systemd/system/{name}"
    assert await own_lines(endpoint, state.invocation_id) == ["known-good"]

    unit_files.install_trial(name, unit_text(SLEEPER.format(marker="kept")))
    unit_files.keep(name)
    assert unit_files.previous(name) == unit_text(SLEEPER.format(marker="known-good"))
    await systemd.reload()
    assert (await systemd.restart(name)).ok
    state = await systemd.unit_state(name)
    assert state.fragment_path == f"/etc/systemd/system/{name}" and not state.need_daemon_reload
    assert await own_lines(endpoint, state.invocation_id) == ["kept"]
    unit_files.install(name, unit_text(SLEEPER.format(marker="edited")))
    assert (await systemd.unit_state(name)).need_daemon_reload  # an edited fragment is noticed
    await systemd.reload()
    await systemd.stop(name)


async def test_unknown_unit_and_bad_unit_file_map_to_deployctl_errors(
    systemd: Systemd, unit_files: UnitFiles, unit_text: UnitText) -> None:
    with pytest.raises(UnitNotFound) as missing:
        await systemd.restart("st-no-such-unit.service")
    assert missing.value.hint
    name = "st-bad.service"
    unit_files.install(name, "[Unit]\nX-Deployctl-Deployment=systest\n[Service]\nType=exec\n")  # no ExecStart=
    await systemd.reload()
    with pytest.raises(BadUnitSetting) as bad:
        await systemd.restart(name)
    assert name in bad.value.message and "systemd-analyze verify" in (bad.value.hint or "")
    state = await systemd.unit_state(name)
    assert state.load_state == "bad-setting"


async def test_reset_failed_on_a_unit_that_is_not_loaded_is_a_no_op(systemd: Systemd) -> None:
    await systemd.reset_failed("st-never-installed.service")


def test_booting_a_sandbox_leaves_the_host_tmp_alone() -> None:
    # systemd-tmpfiles would clean the shared /tmp at boot; the sandbox masks it.
    marker = Path(tempfile.mkdtemp(prefix="deployctl-tmp-survives-")) / "marker"
    marker.write_text("still here")
    old = time.time() - 90 * 86400
    os.utime(marker, (old, old))  # old enough for any age-based cleaning
    try:
        with Sandbox.boot() as second:
            assert second.run(["systemctl", "is-system-running"]).stdout.strip() in ("running", "degraded")
        assert marker.read_text() == "still here"
    finally:
        marker.unlink(missing_ok=True)
        marker.parent.rmdir()


async def test_every_job_result_arrives_for_instant_jobs(systemd: Systemd, unit_files: UnitFiles) -> None:
    # A oneshot with no work finishes before the RestartUnit reply is even read: the race the adapter avoids.
    name = "st-instant.service"
    unit_files.install(name, "[Unit]\nX-Deployctl-Deployment=systest\nStartLimitIntervalSec=0\n"
                             "[Service]\nType=oneshot\nExecStart=/bin/true\n")
    await systemd.reload()
    results = await asyncio.wait_for(asyncio.gather(*(systemd.restart(name) for _ in range(30))), 30)
    # Concurrent restarts of one unit are merged into fewer jobs; every caller still gets its job's result.
    assert {r.result for r in results} <= {"done", "canceled"}
    for _ in range(30):
        assert (await asyncio.wait_for(systemd.restart(name), 5)).result == "done"


async def test_watch_reports_state_changes(systemd: Systemd, unit_files: UnitFiles, unit_text: UnitText) -> None:
    name = "st-watch.service"
    unit_files.install(name, unit_text("/bin/sh -c 'sleep 0.5; exit 4'"))
    await systemd.reload()
    watch = systemd.watch(name)
    try:
        first = await watch.__anext__()
        assert first.name == name
        assert (await systemd.restart(name)).ok

        async def until_failed() -> str:
            async for state in watch:
                if state.active_state == "failed":
                    return state.exit_description
            return ""

        assert await asyncio.wait_for(until_failed(), 10) == "exited with status 4"
    finally:
        await watch.aclose()


async def _restart_denied(unit: str, systemd: Systemd) -> dict[str, str]:
    result = {"state": (await systemd.unit_state(unit)).active_state}  # reading is allowed
    try:
        await systemd.restart(unit)
        result["error"] = "none"
    except AccessDenied as exc:
        result.update(error="AccessDenied", message=exc.message, hint=exc.hint or "")
    return result


async def test_non_root_caller_gets_the_access_denied_hint(
    sandbox: Sandbox, systemd: Systemd, unit_files: UnitFiles, unit_text: UnitText) -> None:
    name = "st-denied.service"
    unit_files.install(name, unit_text(SLEEPER.format(marker="x")))
    await systemd.reload()
    result = await asyncio.to_thread(as_nobody, sandbox, functools.partial(_restart_denied, name))
    assert result.get("error") == "AccessDenied", result
    assert result["state"] == "inactive"
    assert "root" in result["hint"] and "polkit" in result["hint"]


async def test_a_lost_job_removed_signal_does_not_hang_the_wait(
    systemd: Systemd, unit_files: UnitFiles, unit_text: UnitText) -> None:
    name = "st-lost-signal.service"
    unit_files.install(name, unit_text(SLEEPER.format(marker="lost")))
    await systemd.reload()
    deliver = systemd._on_signal

    def drop_job_removed(msg: object) -> None:
        if getattr(msg, "member", None) != "JobRemoved":
            deliver(msg)

    # A bus that drops our JobRemoved (a full queue): the wait must notice the job is gone.
    systemd.bus._on_signal = drop_job_removed
    started = time.monotonic()
    job = await systemd.restart(name, timeout=30)
    assert job.ok and time.monotonic() - started < 10
    assert (await systemd.unit_state(name)).active_state == "active"
    await systemd.stop(name, timeout=30)
