"""Journal reads on a real systemd touch only their window, however long the unit's history: a benchmark
trial reads its seconds, a startup report stops at the ready line."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.operations.restart import Endpoint, read_startup
from deployctl.startup.readiness import READY_LINE

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

HISTORY = 20_000  # lines before and after the window: a server up for a while

# Startup, ready, a long serving history, then (on SIGUSR1) a short burst: the "trial window".
SERVER = f"""
import signal, sys, time
print("Load weight begin.")
print("{READY_LINE}")
for i in range({HISTORY}):
    print(f"serving {{i}}")
sys.stdout.flush()
def burst(*_):
    for i in range(5):
        print(f"window {{i}}", flush=True)
signal.signal(signal.SIGUSR1, burst)
print("history written", flush=True)
while True:
    time.sleep(60)
"""


async def _wait_for_line(endpoint: Endpoint, invocation: str, text: str) -> None:
    deadline = time.monotonic() + 60
    while not any(line.text == text for line in await endpoint.journal().read(invocation, last=10)):
        assert time.monotonic() < deadline, f"never saw {text!r}"
        await asyncio.sleep(0.2)


async def test_reads_touch_only_their_window(sandbox, systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint,
                                             python_unit: Callable[..., str]) -> None:
    name = "st-window.service"
    unit_files.install(name, python_unit(SERVER, extra_service="LogRateLimitIntervalSec=0\n"))
    await systemd.reload()
    assert (await systemd.restart(name, timeout=30)).ok
    invocation = (await systemd.unit_state(name)).invocation_id
    journal = endpoint.journal()
    try:
        await _wait_for_line(endpoint, invocation, "history written")
        start = time.time()
        await asyncio.sleep(0.3)
        done = await asyncio.to_thread(sandbox.run, ["systemctl", "kill", "-s", "SIGUSR1", name], timeout=30)
        assert done.returncode == 0, done.stderr
        await _wait_for_line(endpoint, invocation, "window 4")
        end = time.time()

        # A benchmark trial's read: journalctl seeks to the window and sends only its lines.
        trial = await journal.read(invocation, since=start, until=end)
        assert [line.text for line in trial if not line.from_manager] == [f"window {i}" for i in range(5)]

        # The startup report's read ends at the ready line, not after 20 000 serving lines.
        startup = await read_startup(journal, invocation)
        own = [line.text for line in startup if not line.from_manager]
        assert own == ["Load weight begin.", READY_LINE]

        everything = await journal.read(invocation)
        assert len(everything) > HISTORY  # the history is really there
    finally:
        await systemd.stop(name, timeout=30)
