"""The final word on escaping: a real systemd (sandboxed PID 1) runs a rendered unit full of hostile
values, and the process receives exactly the argv and environment deployctl meant to pass.

Marked ``system`` (needs root; boots its own sandbox, about a second).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import yaml
from support.hostile import HOSTILE

from deployctl.inventory.model import parse_inventory, resolve_profile
from deployctl.sandbox import Sandbox
from deployctl.units.render import exec_argv, render_unit, unit_environment

pytestmark = pytest.mark.system

RECORDER = """#!{python}
import json, os, sys
with open({out!r}, "w") as f:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, f)
"""


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox.boot() as box:
        yield box


def test_systemd_passes_hostile_values_verbatim(sandbox: Sandbox, tmp_path: Path) -> None:
    out = tmp_path / "received.json"
    fake_python = tmp_path / "python"  # /tmp is shared with the sandbox
    fake_python.write_text(RECORDER.format(python=sys.executable, out=str(out)))
    fake_python.chmod(0o755)
    values = [v for v in HOSTILE if v != ";"]
    data = {
        "hosts": {"h": {"gpus": {"model": "M", "count": 1, "compute_capability": "sm120"},
                        "python": str(fake_python), "cuda_home": "/usr/local/cuda-12.8"}},
        "models": {"m": {"path": "org/model", "served_name": values[0]}},
        "deployments": {"d": {"host": "h", "unit": "deployctl-escape-test.service", "port": 8000, "model": "m",
                              "profiles": {"baseline": {
                                  "flags": {**{f"x-{i}": v for i, v in enumerate(values)}, "many": values,
                                            "switch": True},
                                  "env": {f"V{i}": v for i, v in enumerate(values)}}}}},
    }
    inv = parse_inventory(yaml.safe_dump(data, allow_unicode=True))
    unit = render_unit(inv, "d", "baseline")
    (sandbox.unit_dir / unit.name).write_text(unit.text)
    assert sandbox.run(["systemctl", "daemon-reload"]).returncode == 0
    started = sandbox.run(["systemctl", "start", unit.name])
    assert started.returncode == 0, started.stderr

    deadline = time.monotonic() + 30
    while not (out.exists() and out.stat().st_size):
        assert time.monotonic() < deadline, sandbox.run(["journalctl", "-u", unit.name, "--no-pager"]).stdout
        time.sleep(0.05)
    time.sleep(0.1)  # let json.dump finish
    received = json.loads(out.read_text())

    resolved = resolve_profile(inv, "d", "baseline")
    assert received["argv"] == exec_argv(inv, inv.deployment("d"), resolved)[1:]
    expected_env = unit_environment(inv.host_of("d"), resolved)
    assert {k: received["env"].get(k) for k in expected_env} == expected_env


def test_quick_restarts_never_hit_the_start_limit(sandbox: Sandbox, tmp_path: Path) -> None:
    # By default systemd refuses the 6th start of a running service within 10 s (start-limit-hit,
    # measured here without StartLimitIntervalSec=0); promote + rollback + verify restart that often.
    server = tmp_path / "server"
    server.write_text("#!/bin/sh\nexec sleep 60\n")
    server.chmod(0o755)
    data = {
        "hosts": {"h": {"gpus": {"model": "M", "count": 1, "compute_capability": "sm120"}, "python": str(server)}},
        "models": {"m": {"path": "org/model"}},
        "deployments": {"d": {"host": "h", "unit": "deployctl-startlimit-test.service", "port": 8000, "model": "m",
                              "profiles": {"baseline": {}}}},
    }
    unit = render_unit(parse_inventory(yaml.safe_dump(data)), "d", "baseline")
    (sandbox.unit_dir / unit.name).write_text(unit.text)
    assert sandbox.run(["systemctl", "daemon-reload"]).returncode == 0
    try:
        for attempt in range(8):
            restarted = sandbox.run(["systemctl", "restart", unit.name])
            assert restarted.returncode == 0, f"restart {attempt + 1}: {restarted.stderr}"
    finally:
        sandbox.run(["systemctl", "stop", unit.name])


def test_stop_ends_the_servers_child_processes_too(sandbox: Sandbox, tmp_path: Path) -> None:
    # SGLang's scheduler/detokenizer are child processes; KillMode=control-group must end them on stop,
    # even one that left the main process's session (as a process-group kill would miss).
    pids = tmp_path / "pids"
    server = tmp_path / "server"
    server.write_text(f"#!/bin/sh\nsetsid sleep 300 &\necho $! > {pids}\nexec sleep 300\n")
    server.chmod(0o755)
    data = {
        "hosts": {"h": {"gpus": {"model": "M", "count": 1, "compute_capability": "sm120"}, "python": str(server)}},
        "models": {"m": {"path": "org/model"}},
        "deployments": {"d": {"host": "h", "unit": "deployctl-killmode-test.service", "port": 8000, "model": "m",
                              "profiles": {"baseline": {}}}},
    }
    unit = render_unit(parse_inventory(yaml.safe_dump(data)), "d", "baseline")
    (sandbox.unit_dir / unit.name).write_text(unit.text)
    assert sandbox.run(["systemctl", "daemon-reload"]).returncode == 0
    assert sandbox.run(["systemctl", "start", unit.name]).returncode == 0
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text().strip()):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = pids.read_text().strip()
    assert sandbox.run(["kill", "-0", child]).returncode == 0  # alive while the unit runs
    assert sandbox.run(["systemctl", "stop", unit.name]).returncode == 0
    assert sandbox.run(["kill", "-0", child]).returncode != 0
