"""`deployctl restart` and `deployctl status` as an operator runs them, against the sandboxed systemd.

The CLI runs outside the sandbox and reaches it through the DEPLOYCTL_* variables (``Sandbox.env()``).
A custom template runs a tiny script instead of SGLang, so these tests do not depend on the simulator.
"""

from __future__ import annotations

from deployctl.errors import ExitCode

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.clirun import free_port, run_deployctl

from deployctl.adapters.ledger import Ledger
from deployctl.sandbox import Sandbox
from deployctl.startup.readiness import READY_LINE

pytestmark = [pytest.mark.system, pytest.mark.timeout(150)]

SCRIPT = f"""
import os, sys, time
print("Load weight begin.")
if os.environ["TOY_MODE"] == "crash":
    print("RuntimeError: toy failure")
    sys.exit(2)
print("{READY_LINE}")
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
{{% for assignment in environment %}}
Environment={{{{ assignment }}}}
{{% endfor %}}
ExecStart={python} -u {script}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    script = tmp_path / "toy_server.py"
    script.write_text(SCRIPT)
    (tmp_path / "toy.service.j2").write_text(TEMPLATE.format(python=sys.executable, script=script))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"""\
hosts:
  box:
    address: localhost
    python: {sys.executable}
    gpus: {{model: NVIDIA RTX PRO 6000, count: 1, compute_capability: sm120, power_limit_w: 600, memory_gb: 96}}
models:
  tiny:
    path: /models/tiny
deployments:
  toy:
    host: box
    unit: toy-verbs.service
    port: {free_port()}
    model: tiny
    template: {tmp_path / "toy.service.j2"}
    policy:
      gates: {{startup_timeout_s: 20}}
    profiles:
      good:
        env: {{TOY_MODE: ready}}
      bad:
        env: {{TOY_MODE: crash}}
""")
    return inv


deployctl = run_deployctl


def test_restart_then_status_then_a_crashing_profile(sandbox: Sandbox, inventory: Path) -> None:
    done = deployctl(sandbox, inventory, "restart", "toy", "--profile", "good")
    assert done.returncode == 0, done.stderr
    assert "toy-verbs.service is ready after" in done.stdout and "(via log)" in done.stdout

    shown = deployctl(sandbox, inventory, "status", "toy", "--json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert (status["active_state"], status["sub_state"]) == ("active", "running")
    assert status["profile"] == "good" and status["unit_intact"] is True and status["managed"]
    assert status["main_pid"] > 0 and status["uptime_s"] >= 0 and status["trial"] is None
    assert READY_LINE in status["last_lines"]
    human = deployctl(sandbox, inventory, "status", "toy")
    assert "active/running, up" in human.stdout and "profile:   good  hash" in human.stdout

    again = deployctl(sandbox, inventory, "restart", "toy")  # no --profile: the installed one
    assert again.returncode == 0 and "unchanged (good)" in again.stdout

    failed = deployctl(sandbox, inventory, "restart", "toy", "--profile", "bad", "--json")
    assert failed.returncode == ExitCode.FAILED
    result = json.loads(failed.stdout)
    assert result["outcome"] == "crashed" and result["reason"].startswith("exited with status 2")
    assert "RuntimeError: toy failure" in result["last_lines"]
    assert "is not ready (crashed)" in failed.stderr
    assert result["exit_code"] == ExitCode.FAILED and "is not ready (crashed)" in result["error"]  # --json says it too
    previous = sandbox.state_dir / "units" / "toy-verbs.service.previous"
    assert "X-Deployctl-Profile=good" in previous.read_text()

    shown = json.loads(deployctl(sandbox, inventory, "status", "toy", "--json").stdout)
    assert shown["active_state"] == "failed" and shown["profile"] == "bad"


def test_status_of_a_deployment_not_installed_yet(sandbox: Sandbox, inventory: Path) -> None:
    inventory.write_text(inventory.read_text().replace("toy-verbs.service", "toy-absent.service"))
    missing = deployctl(sandbox, inventory, "status", "toy")  # no state directory: said, and not created
    assert missing.returncode == ExitCode.BAD_INPUT and "does not exist" in missing.stderr
    assert not (inventory.parent / "state").exists()
    (inventory.parent / "state").mkdir()  # deployctl is installed here, it just never promoted anything
    shown = deployctl(sandbox, inventory, "status", "toy")
    assert shown.returncode == 0, shown.stderr
    assert "unit file: not installed" in shown.stdout and "inactive/dead" in shown.stdout


def test_status_imports_no_numpy_scipy_or_aiohttp(sandbox: Sandbox, inventory: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`deployctl status` with a ledger and nothing to recover judges nothing: it loads no statistics and no
    load client (benchmarks/cli_startup.py; tests/cli/test_cli_imports.py covers the verbs without systemd)."""
    with Ledger.open(inventory.parent / "state") as ledger:
        ledger.begin_release(deployment="toy", kind="promote", unit_name="toy-verbs.service", unit_text="[Service]\n",
                             unit_hash="0" * 64, who="root", profile="good", finished=True, live=True, result="kept")
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # every import, on stderr
    shown = deployctl(sandbox, inventory, "status", "toy")
    assert shown.returncode == 0, shown.stderr
    assert "live release 1: good" in shown.stdout, shown.stdout
    imported = {line.rsplit("|", 1)[1].strip() for line in shown.stderr.splitlines() if line.startswith("import time:")}
    # The report is there (an empty one would pass anything): the verb's own module is loaded by importlib, which
    # -X importtime does not list, so one it imports stands for it.
    assert "deployctl.console.release_verbs" in imported
    assert not imported & {"numpy", "scipy", "aiohttp"}, sorted(imported & {"numpy", "scipy", "aiohttp"})


def test_a_hand_written_unit_is_only_replaced_with_adopt(sandbox: Sandbox, inventory: Path) -> None:
    inv = inventory.read_text().replace("toy-verbs.service", "toy-adopt.service")
    inventory.write_text(inv)
    (sandbox.unit_dir / "toy-adopt.service").write_text("[Service]\nExecStart=/bin/sleep 600\n")
    refused = deployctl(sandbox, inventory, "restart", "toy", "--profile", "good")
    assert refused.returncode == 2 and "not managed by deployctl" in refused.stderr and "--adopt" in refused.stderr
    adopted = deployctl(sandbox, inventory, "restart", "toy", "--profile", "good", "--adopt")
    assert adopted.returncode == 0, adopted.stderr
    shown = json.loads(deployctl(sandbox, inventory, "status", "toy", "--json").stdout)
    assert shown["profile"] == "good" and shown["sub_state"] == "running"
    subprocess.run(sandbox.nsenter(["systemctl", "stop", "toy-adopt.service"]), check=True)
