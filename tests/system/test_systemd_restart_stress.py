"""Restart the same unit many times through the whole restart_and_wait path (job, journal follower, state
watch, health probe): every one must end. The rare `deployctl restart` hang was a reader task whose
cancellation asyncio.wait_for swallowed (tests/unit/test_aio.py); if any hang ever comes back, this dumps
every thread's stack (faulthandler) and every asyncio task's stack, then fails."""

from __future__ import annotations

import asyncio
import faulthandler
import io
import socket
import sys
from typing import Callable

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.operations.restart import Endpoint, http_health_probe, restart_and_wait
from deployctl.startup.readiness import READY_LINE, Ready

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

RESTARTS = 25
ONE_RESTART_LIMIT_S = 30.0

# Ready on every path at once (log line, /health, state), so the readiness wait ends while each of its
# readers is mid-call: the teardown race the hang came from.
SERVER = f"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
print("Load weight begin.")
print("{READY_LINE}")
srv.serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _task_stacks() -> str:
    out = io.StringIO()
    for task in asyncio.all_tasks():
        task.print_stack(file=out)
    return out.getvalue()


async def test_many_restarts_each_end(systemd: Systemd, unit_files: UnitFiles, endpoint: Endpoint,
                                      python_unit: Callable[..., str]) -> None:
    name = "st-stress.service"
    port = _free_port()
    unit = python_unit(SERVER, extra_unit="StartLimitIntervalSec=0\n").replace(".py\n", f".py {port}\n", 1)
    unit_files.install(name, unit)
    await systemd.reload()
    probe = http_health_probe(f"http://127.0.0.1:{port}/health")
    invocations = set()
    faulthandler.dump_traceback_later(ONE_RESTART_LIMIT_S, repeat=True, file=sys.stderr)
    try:
        for i in range(RESTARTS):
            try:
                report = await asyncio.wait_for(
                    restart_and_wait(systemd, endpoint.journal(), name, timeout_s=20, probe=probe,
                                     probe_interval_s=0.01),
                    ONE_RESTART_LIMIT_S)
            except asyncio.TimeoutError:
                pytest.fail(f"restart {i + 1} of {RESTARTS} hung; asyncio tasks:\n{_task_stacks()}")
            assert isinstance(report.outcome, Ready), report.outcome
            invocations.add(report.invocation_id)
    finally:
        faulthandler.cancel_dump_traceback_later()
        await systemd.stop(name)
    assert len(invocations) == RESTARTS
