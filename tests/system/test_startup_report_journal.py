"""`deployctl startup-report --deployment D` reads the unit's current invocation from a real journal.

A toy unit writes a fixture log byte for byte (\\r meters included) to stdout and stays up; the report
read back through journald must equal the report of the file itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.clirun import free_port, run_deployctl

from deployctl.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(150)]

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"
FIXTURE = next(LOGS.glob("02-*.log"))

SCRIPT = f"""
import sys, time
sys.stdout.buffer.write(open({str(FIXTURE)!r}, "rb").read())
sys.stdout.flush()
time.sleep(600)
"""

TEMPLATE = """\
[Unit]
Description={{{{ description }}}}
X-Deployctl-Deployment={{{{ deployment }}}}
X-Deployctl-Profile={{{{ profile }}}}
X-Deployctl-Hash={{{{ content_hash }}}}

[Service]
Type=exec
ExecStart={python} -u {script}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    script = tmp_path / "replay.py"
    script.write_text(SCRIPT)
    (tmp_path / "replay.service.j2").write_text(TEMPLATE.format(python=sys.executable, script=script))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"""\
hosts:
  box:
    address: localhost
    python: {sys.executable}
    gpus: {{model: NVIDIA RTX PRO 6000, count: 4, compute_capability: sm120, power_limit_w: 600, memory_gb: 96}}
models:
  qwen:
    path: /models/qwen
deployments:
  replay:
    host: box
    unit: startup-replay.service
    port: {free_port()}
    model: qwen
    template: {tmp_path / "replay.service.j2"}
    policy:
      gates: {{startup_timeout_s: 20}}
    profiles:
      only: {{}}
""")
    return inv


deployctl = run_deployctl


def test_report_from_the_journal_equals_the_report_of_the_file(sandbox: Sandbox, inventory: Path) -> None:
    started = deployctl(sandbox, inventory, "restart", "replay", "--profile", "only")
    assert started.returncode == 0, started.stderr
    try:
        read = deployctl(sandbox, inventory, "startup-report", "--deployment", "replay", "--json")
        assert read.returncode == 0, read.stderr
        from_journal = json.loads(read.stdout)
        from_file = json.loads(subprocess.run(
            [sys.executable, "-m", "deployctl", "startup-report", str(FIXTURE), "--json"],
            capture_output=True, text=True, check=True).stdout)
        assert from_journal["ready"] is True
        assert (from_journal["max_running_requests"], from_journal["configured_max_running_requests"]) == (26, 48)
        assert from_journal["cuda_graph"]["batch_sizes"] == from_file["cuda_graph"]["batch_sizes"]  # \r kept (-a)
        for key in ("moe_config_warnings", "piecewise_cuda_graph", "phases", "sglang_version", "ranks", "notices"):
            assert from_journal[key] == from_file[key], key
        human = deployctl(sandbox, inventory, "startup-report", "-d", "replay")
        assert human.stdout.startswith("READY in 3m51s · sglang 0.5.10")
    finally:
        subprocess.run(sandbox.nsenter(["systemctl", "stop", "startup-replay.service"]), check=False)
