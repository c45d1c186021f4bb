"""`deployctl canary` with `on_degraded: rollback`, and the dead-man's switch its promotes arm: the real
sandboxed systemd, the simulator, the CLI run inside the sandbox.

The slowdowns are runtime drop-ins (as in test_canary_e2e), so they reach whatever unit text is
installed. To slow one release and not the one before it, the drop-in sets one half of the simulator's
synthetic pair (SGLANG_SIM_SYNTHETIC_PAIR_A: throughput × 0.5 only with PAIR_B) and only the "paired"
profile sets the other half; SGLANG_SIM_THROUGHPUT_FACTOR=0.8 slows every release alike.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox
from deployctl.units.stamp import unit_hash
from support.promote_world import SLOW_PROFILE, TWO_WAVES_POLICY, Cli, one_deployment, slow_down, wait_for
from support.promote_world import healthy as _healthy
from support.promtool import promtool
from support.webhook_receiver import Hook

pytestmark = [pytest.mark.system, pytest.mark.timeout(420)]

DEP = "glm5-sim"
UNIT = f"sglang-{DEP}.service"


def _inventory(root: Path, **canary: Any) -> Path:
    paired = {"extends": "baseline", "env": {"SGLANG_SIM_SYNTHETIC_PAIR_B": "1"}}
    # two waves a level: every judgement here is of a 2 x step (the pair), far beyond the noise
    data = one_deployment(DEP, {"paired": paired, "slow": SLOW_PROFILE},
                          {"bench": TWO_WAVES_POLICY["bench"], "canary": {"levels": [8], **canary}})
    path = root / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _ledger(cli: Cli, sql: str, *params: Any) -> list[tuple]:
    con = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=5)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _live(cli: Cli) -> tuple[int, str, str]:
    (row,) = _ledger(cli, "SELECT id, unit_hash, kind FROM releases WHERE deployment=? AND live=1", DEP)
    return row


def _installed(cli: Cli) -> str:
    assert not (cli.box.runtime_unit_dir / UNIT).exists()  # no trial left in /run
    return (cli.box.unit_dir / UNIT).read_text()


def _main_pid(cli: Cli) -> str:
    return cli.box.run(["systemctl", "show", "-P", "MainPID", UNIT]).stdout.strip()


@pytest.fixture
def world(sandbox: Sandbox, tmp_path: Path) -> Iterator[tuple[Cli, int, Hook]]:
    hook = Hook()
    (tmp_path / "hook.secret").write_text("s3cret\n")
    inventory = _inventory(tmp_path, on_degraded="rollback",
                           webhook={"url": hook.url, "secret_file": str(tmp_path / "hook.secret")})
    cli = Cli(sandbox, inventory, tmp_path / "state")
    yield cli, yaml.safe_load(inventory.read_text())["deployments"][DEP]["port"], hook
    hook.server.shutdown()
    dropin = sandbox.runtime_unit_dir / f"{UNIT}.d"
    if dropin.exists():
        for f in dropin.iterdir():
            f.unlink()
        dropin.rmdir()
    sandbox.run(["systemctl", "daemon-reload"])
    sandbox.run(["systemctl", "stop", UNIT])


def canary(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("canary", DEP, *args, "--textfile-dir", str(cli.state_dir.parent / "textfile"), timeout=300)


def _live_over(cli: Cli, live: str, earlier: str) -> tuple[int, int]:
    """A live release of profile ``live`` that replaced one of profile ``earlier``, with its first watch
    taken (its reference from then on); no judge on the way. Their release ids."""
    for args in (("restart", DEP, "--profile", live), ("canary", DEP), ("restart", DEP, "--profile", earlier)):
        done = cli(*args, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr  # the canary: adopts it, watches it
    (first,) = [r[0] for r in _ledger(cli, "SELECT id FROM releases WHERE profile=? AND kind='adopted'", live)]
    back = cli("rollback", DEP, "--to", str(first))  # adopts `earlier`, then puts `live` back over it
    assert back.returncode == 0, back.stdout + back.stderr
    live_id, _, kind = _live(cli)
    ((previous,),) = _ledger(cli, "SELECT previous_id FROM releases WHERE id=?", live_id)
    assert kind == "rollback"
    quiet = canary(cli)
    assert quiet.returncode == ExitCode.OK, quiet.stdout + quiet.stderr
    return live_id, previous


def test_a_degraded_release_is_rolled_back_to_the_one_before_it_when_that_measures_better_now(world):
    cli, port, hook = world
    live_id, baseline_id = _live_over(cli, "paired", "baseline")
    ((baseline_hash, baseline_text),) = _ledger(cli, "SELECT unit_hash, unit_text FROM releases WHERE id=?",
                                                baseline_id)
    slow_down(cli.box, UNIT, port, "SGLANG_SIM_SYNTHETIC_PAIR_A=1")  # × 0.5 for paired only
    done = canary(cli)
    said = done.stdout + done.stderr
    assert done.returncode == ExitCode.CANARY_ROLLED_BACK, said
    assert f"rolled back to release {baseline_id} (baseline): it measures better now" in said
    new_id, new_hash, kind = _live(cli)
    assert kind == "canary-rollback" and new_hash == baseline_hash and new_id not in (live_id, baseline_id)
    assert unit_hash(_installed(cli)) == baseline_hash and _installed(cli) == baseline_text
    ((previous, result, verdict),) = _ledger(cli, "SELECT previous_id, result, verdict FROM releases WHERE id=?", new_id)
    assert (previous, result, verdict) == (live_id, "kept", "PASS")
    metrics = (cli.state_dir.parent / "textfile" / f"deployctl_canary_{DEP}.prom").read_text()
    assert f'deployctl_canary_outcome{{deployment="{DEP}",outcome="rolled_back"}} 1.0' in metrics
    assert f'deployctl_canary_rollbacks_total{{deployment="{DEP}"}} 1.0' in metrics
    assert f'deployctl_canary_live_release_id{{deployment="{DEP}"}} {float(new_id)}' in metrics
    checked = promtool("check", "metrics", stdin=metrics)  # the file as the canary wrote it
    assert checked.returncode == 0, checked.stdout + checked.stderr
    call = hook.received[-1]["body"]
    assert call["verdict"] == "rolled_back" and call["exit_code"] == ExitCode.CANARY_ROLLED_BACK
    # the live release after the run, not the degraded one it replaced
    assert call["release"] == new_id and call["watched_release"] == live_id
    assert call["rollback"] == {"degraded_release": live_id, "earlier_release": baseline_id, "trial_release": new_id,
                                "result": "kept"}
    assert "rolled back to release" in call["text"]
    fields = wait_for("the run's journal entry", lambda: _journal(cli, DEPLOYCTL_VERDICT="rolled_back",
                                                                   DEPLOYCTL_ROLLBACK_RELEASE=str(new_id)), 10)
    assert fields[-1]["DEPLOYCTL_ROLLBACK_TO"] == str(baseline_id) and fields[-1]["DEPLOYCTL_EXIT_CODE"] == "22"
    assert _healthy(port)


def test_when_the_release_before_is_not_better_nothing_changes_and_it_is_tried_once(world):
    cli, port, hook = world
    live_id, paired_id = _live_over(cli, "baseline", "paired")
    live_hash, text = _live(cli)[1], _installed(cli)
    # Now every release is 0.8 × as fast, and the one before (paired) 0.5 × that again: worse, not better.
    slow_down(cli.box, UNIT, port, "SGLANG_SIM_SYNTHETIC_PAIR_A=1", "SGLANG_SIM_THROUGHPUT_FACTOR=0.8")
    done = canary(cli)
    said = done.stdout + done.stderr
    assert done.returncode == ExitCode.CANARY_DEGRADED, said
    assert f"degraded, no better release: release {paired_id} (paired) was rejected" in said
    assert f"the degraded release {live_id} is back and stays live" in said
    assert _live(cli)[:2] == (live_id, live_hash) and _installed(cli) == text
    tried = _ledger(cli, "SELECT result FROM releases WHERE kind='canary-rollback' AND previous_id=?", live_id)
    assert tried == [("rejected",)]
    call = hook.received[-1]["body"]
    assert call["verdict"] == "degraded" and call["rollback"]["result"] == "rejected"
    pid = _main_pid(cli)
    twice = canary(cli)  # the same unit on the same SGLang is not tried again: no restart, alert only
    assert twice.returncode == ExitCode.CANARY_DEGRADED, twice.stdout + twice.stderr
    assert "already judged against release" in twice.stderr and _main_pid(cli) == pid
    assert len(_ledger(cli, "SELECT id FROM releases WHERE kind='canary-rollback' AND previous_id=?", live_id)) == 1


def _journal(cli: Cli, **match: str) -> list[dict[str, Any]]:
    """The canary's journal entries of this deployment with the fields ``match``."""
    done = subprocess.run([*cli.box.journal_command, "-o", "json", "SYSLOG_IDENTIFIER=deployctl",
                           f"DEPLOYCTL_DEPLOYMENT={DEP}", *(f"{k}={v}" for k, v in match.items())],
                          capture_output=True, text=True, timeout=30)
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_a_killed_canary_promote_is_rolled_back_by_the_dead_mans_switch(sandbox: Sandbox, tmp_path: Path):
    # the switch checks every 3 s whether the controller lives (the default 30 s would only slow the test)
    bound = 3
    inventory = _inventory(tmp_path, profile="slow")
    data = yaml.safe_load(inventory.read_text())
    data["policy"]["dead_man_check_s"] = bound
    inventory.write_text(yaml.safe_dump(data))
    cli = Cli(sandbox, inventory, tmp_path / "state")
    done = cli("restart", DEP, "--profile", "baseline")
    assert done.returncode == 0, done.stdout + done.stderr
    runner = cli.start("canary", DEP)
    try:
        def promote_in_bench() -> Any:
            if not (cli.state_dir / "ledger.sqlite3").exists():
                return None
            try:
                return _ledger(cli, "SELECT id FROM releases WHERE kind='promote' AND phase='BENCH'")
            except sqlite3.OperationalError:  # no ledger yet, or its file but not yet its tables
                return None
        ((release,),) = wait_for("the canary's promote reaches BENCH", promote_in_bench, 120)
        timer = f"deployctl-deadman-{DEP}.timer"
        assert sandbox.run(["systemctl", "is-active", timer]).stdout.strip() == "active"
        # nsenter forks: the deployctl inside is its child
        (child,) = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split()
        os.kill(int(child), signal.SIGKILL)
        runner.wait(timeout=30)
        killed = time.monotonic()
        # Nobody runs a command from here on: the timer does.
        wait_for("the dead-man's switch restores the known-good unit", lambda: _ledger(
            cli, "SELECT result FROM releases WHERE id=? AND finished_at IS NOT NULL", release), bound + 90)
    finally:
        cli.stop_started([DEP])
    assert time.monotonic() - killed < bound + 90
    ((result,),) = _ledger(cli, "SELECT result FROM releases WHERE id=?", release)
    notes = " ".join(r[0] for r in _ledger(cli, "SELECT detail_json FROM events WHERE release_id=?", release))
    assert result != "kept" and "recovered by `deployctl recover`" in notes, (result, notes)
    assert "X-Deployctl-Profile=baseline" in _installed(cli)
    assert sandbox.run(["systemctl", "is-active", UNIT]).stdout.strip() == "active"
    sandbox.run(["systemctl", "stop", UNIT])
