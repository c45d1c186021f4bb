"""Reusing a stored baseline, end to end: the real sandboxed systemd, the simulator, the CLI in the sandbox.

Each test starts from its own ledger and the baseline profile installed, and stores a baseline the cheap
way: `promote bad-flag --skip-preflight` measures the live release, then the candidate fails at startup
and is rolled back. What the next promote does with that stored baseline is the test.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from support.promote_world import Cli, healthy, make_inventory

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox
from deployctl.decisions.state import PHASE_WIDTH

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]

DEPLOYMENT = "glm5-sim"
CRITICAL_LEVELS = [2, 8]  # promote_world's sweep; every level is critical by default


@pytest.fixture(scope="module")
def inventory(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("reuse-e2e")
    data = make_inventory(root / "inventory.yaml")
    yield root / "inventory.yaml", data
    sandbox.run(["systemctl", "stop", data["deployments"][DEPLOYMENT]["unit"]])


@pytest.fixture
def world(sandbox: Sandbox, inventory: tuple[Path, dict[str, Any]], tmp_path: Path) -> tuple[Cli, dict[str, Any]]:
    """A fresh ledger, the baseline profile live, and a stored baseline of it (release ``stored``)."""
    path, data = inventory
    cli = Cli(sandbox, path, tmp_path / "state")
    done = cli("restart", DEPLOYMENT, "--profile", "baseline")
    assert done.returncode == 0, done.stdout + done.stderr
    seeded = cli.json("promote", "bad-flag", "-d", DEPLOYMENT, "--skip-preflight", expect=ExitCode.REJECTED)
    assert seeded["exit_code"] == ExitCode.REJECTED and seeded["benchmark"]["reuse"] is None, seeded
    assert seeded["benchmark"]["baseline_s"] > 0
    return cli, {**data, "stored": seeded["release"]}


def _wait_healthy(port: int, within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while not healthy(port):
        assert time.monotonic() < deadline, f"the server on port {port} did not come up"
        time.sleep(0.2)


def _baselines(cli: Cli, release: int) -> list[tuple[int | None, str | None]]:
    """The release's baseline rows in the ledger: (reused_from, fingerprint JSON)."""
    con = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=5)
    try:
        return con.execute("SELECT reused_from, fingerprint_json FROM benchmarks WHERE release_id=? AND"
                           " role='baseline'", (release,)).fetchall()
    finally:
        con.close()


def test_unchanged_host_reuses_the_baseline_after_one_confirmation_trial_per_level_and_keeps_a_neutral_candidate(world):
    cli, data = world
    out = cli.json("promote", "neutral", "-d", DEPLOYMENT, "--skip-preflight")
    assert out["exit_code"] == ExitCode.OK and out["result"] == "kept", out
    bench = out["benchmark"]
    assert bench["reuse"]["reused_from"] == data["stored"], bench
    assert bench["reuse"]["confirmation_trials"] == len(CRITICAL_LEVELS)
    assert bench["baseline_s"] == 0 and bench["confirmation_s"] > 0 and bench["reuse"]["saved_s"] > 0
    assert bench["trials"]["baseline"] == 0 and bench["trials"]["confirmation"] == len(CRITICAL_LEVELS)
    assert bench["trials"]["fixed_design"] == 2 * 5 * len(CRITICAL_LEVELS)  # promote_world's max_trials 5
    [(reused_from, fingerprint)] = _baselines(cli, out["release"])
    [(_, stored)] = _baselines(cli, data["stored"])
    assert reused_from == data["stored"] and json.loads(fingerprint) == json.loads(stored)
    # what was measured: the version the server states, the simulator's GPUs (labelled so), the unit, the sweep
    stored = json.loads(stored)
    assert stored["sglang_version"] == "0.5.10" and stored["host"] == "sim-sm120-x8"
    assert stored["gpu_model"] == "8× NVIDIA RTX PRO 6000 Blackwell Server Edition (simulated)"
    assert (stored["gpu_driver"], stored["power_limit_w"], stored["clocks_policy"]) == ("simulated", 600.0, "simulated")
    shown = cli("show", str(out["release"]))
    assert "CONFIRM".ljust(PHASE_WIDTH) + " intent  ConfirmBaseline" in shown.stdout, shown.stdout
    assert f"baseline: reused the measurement of release {data['stored']}" in shown.stdout


def test_a_changed_unit_forces_a_fresh_baseline(world):
    cli, _ = world
    done = cli("restart", DEPLOYMENT, "--profile", "neutral")
    assert done.returncode == 0, done.stdout + done.stderr
    out = cli.json("promote", "bad-flag", "-d", DEPLOYMENT, "--skip-preflight", expect=ExitCode.REJECTED)
    assert out["exit_code"] == ExitCode.REJECTED and out["benchmark"]["reuse"] is None, out
    assert out["benchmark"]["confirmation_s"] == 0 and out["benchmark"]["baseline_s"] > 0
    assert out["benchmark"]["fresh_because"] == ["no stored baseline of this unit and sweep on this host"]
    assert [r[0] for r in _baselines(cli, out["release"])] == [None]


def test_a_changed_sglang_version_forces_a_fresh_baseline(world, sandbox: Sandbox):
    """The unit file unchanged, the server another SGLang (as after `pip install -U sglang` in its venv):
    a drop-in sets the simulator's version, and /server_info states it."""
    cli, data = world
    unit = data["deployments"][DEPLOYMENT]["unit"]
    dropin = sandbox.unit_dir / f"{unit}.d" / "version.conf"
    dropin.parent.mkdir(exist_ok=True)
    dropin.write_text("[Service]\nEnvironment=SGLANG_SIM_VERSION=0.5.9\n")
    try:
        for argv in (["systemctl", "daemon-reload"], ["systemctl", "restart", unit]):
            assert sandbox.run(argv).returncode == 0
        _wait_healthy(data["deployments"][DEPLOYMENT]["port"])
        out = cli.json("promote", "bad-flag", "-d", DEPLOYMENT, "--skip-preflight", expect=ExitCode.REJECTED)
    finally:
        dropin.unlink()
        sandbox.run(["systemctl", "daemon-reload"])
        sandbox.run(["systemctl", "restart", unit])
        _wait_healthy(data["deployments"][DEPLOYMENT]["port"])
    assert out["benchmark"]["reuse"] is None and out["benchmark"]["baseline_s"] > 0, out
    assert "the SGLang version changed: 0.5.10 → 0.5.9" in out["benchmark"]["fresh_because"], out["benchmark"]
