"""Faults end to end on the real sandboxed systemd with the simulator: every one ends on the known-good unit
serving, or on exit 12, and the ledger, the installed unit and the exit code say which.

- the controller SIGKILLed after each phase's action (``DEPLOYCTL_CRASH_AFTER``, the worst moment: the
  side effect done, its outcome not recorded) → the next command (status, promote, rollback or restart,
  rotating; each at least twice) recovers, says what it recovered, and the installed unit is the live
  release's, serving;
- the ledger locked past its busy timeout mid-promote → the known-good unit is back, exit 12 naming it;
- the known-good cannot come back (its port is held) → exit 12, ROLLBACK_FAILED in the ledger, and the
  next verbs exit 12 too until the operator has brought it back;
- a candidate whose speed swings between trials (``SGLANG_SIM_SWING``) → exit 11 after the judge spent
  its trial budget, the baseline kept;

Each test builds its own deployment (own unit, port, inventory and state directory): no test depends on
another's. Tiny sweeps on a time-scaled simulator keep the file well under three minutes on two cores.
"""

from __future__ import annotations

import itertools
import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from support.clirun import free_port
from support.promote_world import REPO, Cli, healthy

from deployctl.errors import ExitCode
from deployctl.judge.stalls import MAX_STALL_EXTRA
from deployctl.sandbox import Sandbox
from deployctl.units.stamp import unit_hash

pytestmark = [pytest.mark.system, pytest.mark.serial, pytest.mark.timeout(120)]

FAST_SIM = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "20", "SGLANG_SIM_NOISE": "0.005"}
# The kill tests need a verdict to reach KEEP, whatever the shared machine's noise: an inconclusive
# verdict keeps the candidate too.
QUICK = {
    "bench": {"concurrency": [2], "input_tokens": 32, "output_tokens": 32, "requests_per_level": 6,
              "warmup_requests": 1},
    "judge": {"min_trials": 2, "max_trials": 2, "baseline_trials": 2, "limit_pct": 50,
              "inconclusive": "keep_candidate"},
    "gates": {"startup_timeout_s": 8},
    "verify_concurrency": [2],
}
_units = itertools.count(1)


class World:
    def __init__(self, cli: Cli, dep: dict[str, Any]) -> None:
        self.cli, self.dep = cli, dep
        self.unit, self.port = dep["unit"], dep["port"]

    def _one(self, sql: str, *params: Any) -> sqlite3.Row | None:
        db = self.cli.state_dir / "ledger.sqlite3"
        if not db.exists():
            return None
        con = sqlite3.connect(db, timeout=5)
        con.row_factory = sqlite3.Row
        try:
            return con.execute(sql, params).fetchone()
        except sqlite3.OperationalError:  # the promote has created the file, not its tables yet
            return None
        finally:
            con.close()

    def live_release(self) -> sqlite3.Row:
        return self._one("SELECT * FROM releases WHERE live=1")

    def release(self, release_id: int) -> sqlite3.Row:
        return self._one("SELECT * FROM releases WHERE id=?", release_id)

    def bench(self, release_id: int, role: str) -> dict[str, Any]:
        """The last benchmark of ``role`` the ledger holds for the release, as stored."""
        row = self._one("SELECT result_json FROM benchmarks WHERE release_id=? AND role=? ORDER BY id DESC LIMIT 1",
                        release_id, role)
        assert row is not None, f"no {role} benchmark for release {release_id}"
        return json.loads(row["result_json"])

    def last_promote(self) -> sqlite3.Row | None:
        return self._one("SELECT * FROM releases WHERE kind='promote' ORDER BY id DESC LIMIT 1")

    def promote_until(self, profile: str, phase: str) -> tuple[subprocess.Popen[str], sqlite3.Row]:
        """A promote started in the background, once the ledger says it is in ``phase``."""
        proc = self.cli.start("promote", profile, "-d", "glm5-sim", "--skip-preflight")
        deadline = time.monotonic() + 60
        while (row := self.last_promote()) is None or row["phase"] != phase:
            assert time.monotonic() < deadline and proc.poll() is None, f"the promote never reached {phase}"
            time.sleep(0.02)
        return proc, row

    def installed(self) -> str:
        assert not (self.cli.box.runtime_unit_dir / self.unit).exists(), "a trial was left behind"
        return (self.cli.box.unit_dir / self.unit).read_text()

    def profile(self) -> str:
        return next(line.split("=", 1)[1] for line in self.installed().splitlines()
                    if line.startswith("X-Deployctl-Profile="))


@pytest.fixture
def make_world(sandbox: Sandbox, tmp_path: Path) -> Iterator[Any]:
    made: list[World] = []

    def make(policy: dict[str, Any] = QUICK, profiles: dict[str, Any] | None = None) -> World:
        data = yaml.safe_load((REPO / "inventory" / "demo.yaml").read_text())
        dep = data["deployments"]["glm5-sim"]
        data["deployments"] = {"glm5-sim": dep}
        dep["port"] = free_port()
        dep["unit"] = f"sglang-faults-{next(_units)}.service"
        dep["profiles"]["baseline"].setdefault("env", {}).update(FAST_SIM)
        dep["profiles"]["hangs"]["env"] = {"SGLANG_SIM_FAULT": "hang:load"}
        dep["profiles"].update(profiles or {})
        data["policy"] = policy
        (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(data))
        world = World(Cli(sandbox, tmp_path / "inventory.yaml", tmp_path / "state"), dep)
        made.append(world)
        started = world.cli("restart", "glm5-sim", "--profile", "baseline")
        assert started.returncode == 0, started.stdout + started.stderr
        return world

    yield make
    for world in made:
        sandbox.run(["systemctl", "stop", world.unit])


# --- the controller killed in each phase; the next command recovers -----------------------------------

# (phase, the profile that reaches it, the next verb). Every verb follows at least twice.
KILLS = [
    ("INSTALL", "neutral", "status"),
    ("RESTART", "neutral", "promote"),
    ("STARTUP", "neutral", "rollback"),
    ("BENCH", "neutral", "restart"),
    ("JUDGE", "neutral", "status"),
    ("KEEP", "neutral", "rollback"),
    ("ROLLBACK", "bad-flag", "promote"),
    ("VERIFY", "bad-flag", "restart"),
]


@pytest.mark.parametrize("phase,profile,verb", KILLS, ids=[f"{p}-then-{v}" for p, _, v in KILLS])
def test_a_controller_killed_in_each_phase_is_recovered_by_the_next_command(make_world, phase, profile, verb):
    world = make_world()
    cli = world.cli
    env = {**cli.env(), "DEPLOYCTL_CRASH_AFTER": phase}
    killed = cli.box.run([sys.executable, "-m", "deployctl", "promote", profile, "-d", "glm5-sim", "--skip-preflight"],
                         env=env, timeout=90)
    assert killed.returncode in (-9, 137), killed.stdout + killed.stderr
    dead = world.last_promote()
    assert dead is not None and dead["finished_at"] is None and dead["phase"] == phase

    next_args = {"status": ("status", "glm5-sim"),
                 # a promote of what runs after recovery changes nothing more: its recovery is what is tested
                 "promote": ("promote", "baseline", "-d", "glm5-sim"),
                 "rollback": ("rollback", "-d", "glm5-sim"),
                 "restart": ("restart", "glm5-sim")}[verb]
    done = cli(*next_args)
    said = done.stdout + done.stderr
    assert done.returncode == ExitCode.OK, said
    assert f"recovered release {dead['id']}" in said and f"stopped during {phase}" in said, said
    kept = phase == "KEEP"
    assert ("finished keeping neutral" in said) if kept else ("rolled back to the known-good unit" in said), said

    recovered = world.release(dead["id"])
    assert recovered["finished_at"] is not None
    # The result it had reached stands (a rejected candidate was on its way back); else it was cut short.
    assert recovered["result"] == ("kept" if kept else "rejected" if profile == "bad-flag" else "aborted")
    live = world.live_release()
    assert unit_hash(world.installed()) == live["unit_hash"], "the installed unit is not the live release's"
    # A rollback after a kept candidate puts back what it replaced; every other verb leaves what recovery left.
    expected = "neutral" if kept and verb != "rollback" else "baseline"
    assert world.profile() == expected
    assert healthy(world.port)
    assert json.loads(cli("status", "glm5-sim", "--json").stdout)["recovered"] == []


# --- the ledger fails mid-promote --------------------------------------------------------------------


def test_a_ledger_locked_mid_promote_ends_on_the_known_good_with_exit_12(make_world):
    world = make_world()
    cli = world.cli
    proc, row = world.promote_until("neutral", "RESTART")
    holder = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=10, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock past the controller's timeout
    try:
        out = err = cli.output(proc)  # stdout and stderr together, in order
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == ExitCode.ROLLBACK_FAILED, out + err
    assert "the ledger" in err and "locked" in err and "rolled back to the known-good unit" in err, err
    assert "hint:" in err
    assert world.profile() == "baseline" and healthy(world.port)
    # The release could not be closed then; the next command closes it.
    assert world.release(row["id"])["finished_at"] is None
    done = cli("status", "glm5-sim")
    assert done.returncode == ExitCode.OK and f"recovered release {row['id']}" in done.stdout + done.stderr
    assert world.release(row["id"])["result"] == "aborted"
    assert world.profile() == "baseline" and healthy(world.port)


def test_a_damaged_ledger_does_not_stop_status_from_showing_what_runs(make_world):
    world = make_world()
    cli = world.cli
    recorded = cli("promote", "baseline", "-d", "glm5-sim")  # unchanged: records the live release, nothing more
    assert recorded.returncode == 0 and world.live_release() is not None, recorded.stdout + recorded.stderr
    for path in cli.state_dir.glob("ledger.sqlite3*"):
        path.write_bytes(b"this is not an SQLite database" * 200)
    done = cli("status", "glm5-sim")
    assert done.returncode == ExitCode.ENVIRONMENT, done.stdout + done.stderr
    assert "active/running" in done.stdout and "live release: unknown" in done.stdout
    assert "move" in done.stderr and "ledger" in done.stderr


# --- exit 12 and exit 11, produced for real -----------------------------------------------------------


def test_a_known_good_that_cannot_come_back_is_exit_12_and_stays_12(make_world):
    world = make_world()
    cli = world.cli
    proc, row = world.promote_until("hangs", "RESTART")
    # The candidate hangs before it listens; something else takes the port meanwhile.
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    deadline = time.monotonic() + 20
    while True:
        try:
            squatter.bind(("127.0.0.1", world.port))
            break
        except OSError:  # the baseline is still stopping
            assert time.monotonic() < deadline
            time.sleep(0.05)
    squatter.listen()
    try:
        out = world.cli.output(proc)  # stdout and stderr together, in order
        assert proc.returncode == ExitCode.ROLLBACK_FAILED, out
        assert "ROLLBACK FAILED" in out, out
        release = world.release(row["id"])
        assert release["result"] == "rollback_failed" and release["finished_at"] is not None
        assert world.profile() == "baseline", "the known-good unit must be the installed one"
    finally:
        squatter.close()
    assert not healthy(world.port)
    # The known-good is down: no promote starts on this host, and it says what to do.
    refused = cli("promote", "neutral", "-d", "glm5-sim", "--skip-preflight")
    assert refused.returncode == ExitCode.ROLLBACK_FAILED, refused.stdout + refused.stderr
    assert "ROLLBACK FAILED" in refused.stderr and "deployctl restart" in refused.stderr
    assert world.profile() == "baseline" and world.last_promote()["id"] == row["id"]
    back = cli("restart", "glm5-sim")
    assert back.returncode == 0, back.stdout + back.stderr
    assert healthy(world.port)


# Inconclusive by construction, not by the host's noise: the candidate's trials of 8 requests run at full,
# half and quarter speed (SGLANG_SIM_SWING counts its requests; no warm-up shifts the count), the baseline's
# are steady. After two trials (1, 0.5: −29 %, 1.9 standard errors) FAIL needs 5.4 standard errors; after
# the third the budget allows (1, 0.5, 0.25: −50 %, 1.7 se) it needs 4.2, and PASS (ruling out −19 %, twice
# the 10 % limit) needs the candidate about twice as fast as the baseline — each far beyond what the shared
# machine does to a trial. (Three distinct speeds, not two: of 1, 0.25, 1 the odd trial would be set aside
# as an outlier.)
UNSTEADY = {
    **QUICK,
    "bench": {"concurrency": [2], "input_tokens": 32, "output_tokens": 32, "requests_per_level": 8,
              "warmup_requests": 0},
    "judge": {"min_trials": 2, "max_trials": 3, "baseline_trials": 3, "limit_pct": 10},
}


def test_a_candidate_whose_speed_swings_is_inconclusive_exit_11_and_the_baseline_stays(make_world):
    world = make_world(UNSTEADY, {"unsteady": {
        "description": "its speed swings between batches of requests", "extends": "baseline",
        "env": {"SGLANG_SIM_SWING": "8:1,0.5,0.25"}}})
    live_before = world.live_release()
    out = world.cli.json("promote", "unsteady", "-d", "glm5-sim", "--skip-preflight", expect=ExitCode.INCONCLUSIVE)
    assert out["result"] == "inconclusive" and out["verdict"] == "INCONCLUSIVE", out

    # a final INCONCLUSIVE is decided over server starts too (deployctl.judge.starts; one critical level: three
    # starts a side): still inconclusive
    assert out["starts"]["outcome"] == "INCONCLUSIVE", out
    release = world.release(out["release"])
    assert release["result"] == "inconclusive" and release["verdict"] == "INCONCLUSIVE (over three baseline starts)"
    assert release["finished_at"] is not None and release["live"] == 0
    reasons = " ".join(json.loads(release["reasons_json"]))
    assert "max_trials 3 reached" in reasons and "the policy keeps the baseline" in reasons, reasons
    # The judge asked for the third trial before it gave up: all are in the ledger, swung apart (one more when the
    # stall rule took a trial far below the best for a suspect and asked again: judge.stalls).
    candidate = world.bench(out["release"], "candidate")
    [level] = candidate["levels"]
    speeds = [t["output_tok_s"] for t in level["trials"]]
    assert 3 <= len(speeds) <= 3 + MAX_STALL_EXTRA and min(speeds) < 0.6 * max(speeds), speeds

    live = world.live_release()
    assert live["id"] == (live_before["id"] if live_before else release["previous_id"])
    assert unit_hash(world.installed()) == live["unit_hash"], "the installed unit is not the live release's"
    assert world.profile() == "baseline" and healthy(world.port)
