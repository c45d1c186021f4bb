"""Readiness latency: from the ready line being written to the controller knowing the server is ready.

Boots a sandboxed systemd (root needed) and installs a unit that behaves like SGLang at the end of its
startup: it answers /health 503, prints a few lines, waits, writes "<its own time.time()> The server is
fired up and ready to roll!" and only then answers /health 200. deployctl's restart_and_wait waits on it;
the moment the decision is made is taken on the same wall clock (the ready line reaching the tracker, or
the probe's first 200). Two series:
  log only:      no health probe: journald -> journalctl -f -> JSON -> tracker
  log + health:  what restart_and_wait does by default (probe every 50 ms), whichever comes first
Prints the median of several runs (target: < 100 ms).

    sudo .venv/bin/python benchmarks/readiness_latency.py [--runs 15] [--delay 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from deployctl.operations.restart import http_health_probe, restart_and_wait
from deployctl.sandbox import Sandbox
from deployctl.startup.journal_line import JournalLine
from deployctl.startup.readiness import READY_LINE, Ready

SERVER = """
import http.server, sys, threading, time
ready = False
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if ready else 503)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Health)
threading.Thread(target=server.serve_forever, daemon=True).start()
for i in range(50):
    print(f"loading shard {{i}}/50")
time.sleep({delay})
print(f"{{time.time():.6f}} {ready_line}", flush=True)
ready = True
time.sleep(600)
"""

UNIT = """[Unit]
X-Deployctl-Deployment=bench
[Service]
Type=exec
Environment=PYTHONUNBUFFERED=1
ExecStart={python} -u {script} {port}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def one_series(sandbox: Sandbox, name: str, port: int, runs: int, with_probe: bool) -> list[float]:
    endpoint = sandbox.endpoint()
    systemd = await endpoint.connect()
    latencies = []
    try:
        await systemd.reload()
        for _ in range(runs):
            written: list[float] = []
            decided: list[float] = []
            health = http_health_probe(f"http://127.0.0.1:{port}/health")

            async def probe() -> bool:
                ok = await health()
                if ok:
                    decided.append(time.time())
                return ok

            def on_line(line: JournalLine) -> None:
                if READY_LINE in line.text and not line.from_manager:
                    written.append(float(line.text.split()[0]))
                    decided.append(time.time())

            report = await restart_and_wait(systemd, endpoint.journal(), name, timeout_s=30, on_line=on_line,
                                            probe=probe if with_probe else None)
            if not isinstance(report.outcome, Ready):
                raise SystemExit(f"the bench unit did not become ready: {report.outcome}")
            if not written:  # decided by health before the line arrived: read the line's own timestamp
                lines = await endpoint.journal().read(report.invocation_id)
                written = [float(x.text.split()[0]) for x in lines if READY_LINE in x.text and not x.from_manager]
            latencies.append(min(decided) - written[0])
        await systemd.stop(name)
    finally:
        await systemd.close()
    return latencies


async def both_series(sandbox: Sandbox, name: str, port: int, runs: int) -> tuple[list[float], list[float]]:
    return (await one_series(sandbox, name, port, runs, with_probe=False),
            await one_series(sandbox, name, port, runs, with_probe=True))


def summary(label: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return (f"  {label:13s} median {statistics.median(ms):6.1f} ms   min {ms[0]:6.1f}   max {ms[-1]:6.1f}"
            f"   ({len(ms)} restarts)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds between the first lines and the ready line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deployctl-bench-") as tmp, Sandbox.boot() as sandbox:
        script = Path(tmp) / "ready_server.py"
        script.write_text(SERVER.format(delay=args.delay, ready_line=READY_LINE))
        port = free_port()
        name = "readiness-bench.service"
        sandbox.endpoint().unit_files().install(name, UNIT.format(python=sys.executable, script=script, port=port))
        log_only, combined = asyncio.run(both_series(sandbox, name, port, args.runs))
    print("readiness latency: ready line written -> controller knows it is ready")
    print(summary("log only", log_only))
    print(summary("log + health", combined))
    met = statistics.median(combined) < 0.1
    print(f"target (default path, median < 100 ms): {'met' if met else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
