"""restart_and_wait against a real systemd: ready, exec failure, crash, timeout, start limit, logs."""

from __future__ import annotations

from typing import Callable

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.operations.restart import Endpoint, restart_and_wait
from deployctl.startup.readiness import READY_LINE, Crashed, Ready, TimedOut

pytestmark = [pytest.mark.system, pytest.mark.timeout(60)]

PRINTS_THEN_READY = f"""
import time
print("Load weight begin.")
print("Capture cuda graph begin.")
time.sleep(0.3)
print("{READY_LINE}")
time.sleep(600)
"""


async def install(systemd: Systemd, files: UnitFiles, name: str, text: str) -> None:
    files.install(name, text)
    await systemd.reload()


async def test_ready_after_lines(systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint,
                                 python_unit: Callable[..., str]) -> None:
    name = "st-ready.service"
    await install(systemd, unit_files, name, python_unit(PRINTS_THEN_READY))
    seen: list[str] = []
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20,
                                    on_line=lambda line: seen.append(line.text))
    assert report.job.result == "done"
    assert isinstance(report.outcome, Ready) and report.outcome.via == "log"
    own = [line.text for line in report.log if not line.from_manager]
    assert own == ["Load weight begin.", "Capture cuda graph begin.", READY_LINE]
    assert seen == [line.text for line in report.log]
    state = await systemd.unit_state(name)
    assert state.running and state.main_pid > 0 and state.invocation_id == report.invocation_id
    await systemd.stop(name)


async def test_missing_binary_fails_the_job(systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint,
                                           unit_text: Callable[..., str]) -> None:
    name = "st-missing.service"
    await install(systemd, unit_files, name, unit_text("/nonexistent/bin/sglang-server --port 1"))
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    assert report.job.result == "failed"
    outcome = report.outcome
    assert isinstance(outcome, Crashed) and outcome.job_result == "failed"
    assert outcome.state is not None and outcome.state.exec_main_status == 203
    assert "could not execute" in outcome.reason
    assert any("/nonexistent/bin/sglang-server" in line for line in outcome.last_lines)


async def test_exit_after_two_seconds_is_a_crash_with_its_status(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-crash.service"
    code = "import sys, time\nprint('Load weight begin.')\ntime.sleep(2)\nprint('RuntimeError: boom')\nsys.exit(3)\n"
    await install(systemd, unit_files, name, python_unit(code))
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    outcome = report.outcome
    assert report.job.result == "done"
    assert isinstance(outcome, Crashed) and outcome.job_result is None
    assert outcome.reason.startswith("exited with status 3")
    assert outcome.elapsed_s == pytest.approx(2.0, abs=1.0)
    assert "RuntimeError: boom" in outcome.last_lines


async def test_restart_on_failure_crash_is_seen(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-autorestart.service"
    code = "import os, time\nprint('starting')\ntime.sleep(0.5)\nos.kill(os.getpid(), 9)\n"
    unit = python_unit(code, extra_service="Restart=on-failure\nRestartSec=100ms\n",
                       extra_unit="StartLimitIntervalSec=0\n")
    await install(systemd, unit_files, name, unit)
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    assert isinstance(report.outcome, Crashed)
    assert "killed by signal 9 (SIGKILL)" in report.outcome.reason
    await systemd.stop(name)


async def test_never_ready_times_out_with_its_last_line(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-stuck.service"
    code = "import time\nprint('Load weight end.')\nprint('Capture cuda graph begin. avail mem=20.1 GB')\ntime.sleep(600)\n"
    await install(systemd, unit_files, name, python_unit(code))
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=2)
    outcome = report.outcome
    assert isinstance(outcome, TimedOut)
    assert outcome.last_line == "Capture cuda graph begin. avail mem=20.1 GB"
    assert outcome.elapsed_s == pytest.approx(2.0, abs=0.5)
    await systemd.stop(name)


async def test_start_limit_hit_is_recovered(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-limit.service"
    unit = python_unit(PRINTS_THEN_READY, extra_unit="StartLimitIntervalSec=60\nStartLimitBurst=2\n")
    await install(systemd, unit_files, name, unit)
    results = [(await systemd.restart(name)).result for _ in range(3)]
    assert results == ["done", "done", "failed"]
    assert (await systemd.unit_state(name)).result == "start-limit-hit"
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    assert report.start_limit_reset
    assert isinstance(report.outcome, Ready)
    await systemd.stop(name)


async def test_a_20kb_line_arrives_whole(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-long.service"
    # Control characters make journald store MESSAGE as bytes (a list of ints in JSON): the hard case.
    code = (
        "import time\n"
        "print('server_args=ServerArgs(' + 'model_path=\"x\", ' * 1300 + ')\\x1b[0m\\rdone')\n"
        f"print('{READY_LINE}')\n"
        "time.sleep(600)\n"
    )
    await install(systemd, unit_files, name, python_unit(code))
    report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    assert isinstance(report.outcome, Ready)
    long = [line.text for line in report.log if line.text.startswith("server_args=")]
    expected = "server_args=ServerArgs(" + 'model_path="x", ' * 1300 + ")\x1b[0m\rdone"
    assert long == [expected] and len(expected) > 20_000
    await systemd.stop(name)


async def test_two_invocations_logs_are_not_mixed(
    systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint, python_unit: Callable[..., str]
) -> None:
    name = "st-twice.service"
    code = (
        "import os, time\n"
        "inv = os.environ['INVOCATION_ID']\n"
        "for i in range(20):\n    print(f'{inv} line {i}')\n"
        f"print(f'{{inv}} {READY_LINE}')\n"
        "time.sleep(600)\n"
    )
    await install(systemd, unit_files, name, python_unit(code))
    first = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    second = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20)
    assert first.invocation_id != second.invocation_id
    for report in (first, second):
        assert isinstance(report.outcome, Ready)
        own = [line.text for line in report.log if not line.from_manager]
        assert len(own) == 21 and all(text.startswith(report.invocation_id) for text in own)
    journal = endpoint.journal()
    again = await journal.read(first.invocation_id)
    assert all(line.text.startswith(first.invocation_id) for line in again if not line.from_manager)
    assert any(line.from_manager and "Stopping" in line.text for line in again)
    await systemd.stop(name)
