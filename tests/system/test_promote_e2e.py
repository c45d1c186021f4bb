"""`deployctl promote` end to end: the real sandboxed systemd, the simulator, the CLI run inside the sandbox.

The inventory is inventory/demo.yaml with free ports, a time-scaled simulator (SGLANG_SIM_SPEED /
SGLANG_SIM_TIME_SCALE) and a tiny sweep, so the whole file stays well under five minutes on two cores.
The sandbox and the two deployments are shared by the module (booting them is the slow part), but every
test starts from its own empty ledger with both deployments serving their baseline: any test runs alone,
in any order.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from support.promote_world import Cli, make_inventory
from support.promote_world import healthy as _healthy

from deployctl.adapters.ledger import Ledger
from deployctl.decisions.cost import spent
from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def site(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("promote-e2e")
    data = make_inventory(root / "inventory.yaml")
    yield sandbox, root / "inventory.yaml", data
    for dep in data["deployments"].values():
        sandbox.run(["systemctl", "stop", dep["unit"]])


@pytest.fixture
def world(site: tuple[Sandbox, Path, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[Cli, dict[str, Any]]]:
    """A fresh ledger, and both deployments' baseline installed and healthy (restarted only where it is not)."""
    box, inventory, data = site
    cli = Cli(box, inventory, tmp_path / "state")
    for name, dep in data["deployments"].items():
        installed = box.unit_dir / dep["unit"]
        if not installed.exists() or _installed_profile(box, dep["unit"]) != "baseline" or not _healthy(dep["port"]):
            done = cli("restart", name, "--profile", "baseline")
            assert done.returncode == 0, done.stdout + done.stderr
    yield cli, data
    cli.stop_started(list(data["deployments"]))


def _installed_profile(box: Sandbox, unit: str) -> str:
    text = (box.unit_dir / unit).read_text()
    assert not (box.runtime_unit_dir / unit).exists(), "a trial was left behind"
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("X-Deployctl-Profile="))


def _ledger_phase(cli: Cli) -> tuple[int, str | None, bool] | None:
    import sqlite3

    db = cli.state_dir / "ledger.sqlite3"
    if not db.exists():
        return None
    con = sqlite3.connect(db, timeout=5)
    try:
        return con.execute("SELECT id, phase, finished_at IS NOT NULL FROM releases WHERE kind='promote'"
                           " ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:
        return None  # the promote has created the file but not yet its tables
    finally:
        con.close()


def _promotes(cli: Cli) -> list[tuple[str, str]]:
    """(profile, result) of this test's promotes, newest first."""
    return [(r["profile"], r["result"]) for r in cli.json("history") if r["kind"] == "promote"]


def test_dry_run_shows_the_diff_what_would_restart_and_the_policy(world):
    cli, data = world
    done = cli("promote", "candidate", "-d", "qwen35-sim", "--dry-run")
    assert done.returncode == 0, done.stderr
    for expected in ("+ --enable-flashinfer-allreduce-fusion", "would restart: sglang-qwen35-sim.service",
                     "limit −10 %; an unchanged candidate failed ≤ 1 %", "max_running_requests may drop ≤ 10 %",
                     "dead-man's switch: if the controller dies, the rollback starts within 30 s",
                     "cost: expected ", "the estimate rests on no history on this host: defaults"):
        assert expected in done.stdout, expected
    plan = cli.json("promote", "candidate", "-d", "qwen35-sim", "--dry-run")
    assert plan["would_restart"] == ["sglang-qwen35-sim.service"] and plan["policy"]["judge"]["limit_pct"] == 10
    assert plan["cost"]["worst"]["gpu_hours"] > plan["cost"]["expected"]["gpu_hours"] > 0
    assert not (cli.box.runtime_unit_dir / data["deployments"]["qwen35-sim"]["unit"]).exists()


def test_qwen35_fusion_candidate_fails_the_startup_gate_and_rolls_back(world):
    cli, data = world
    done = cli("promote", "candidate", "-d", "qwen35-sim")
    assert done.returncode == ExitCode.REJECTED, done.stdout + done.stderr
    assert "max_running_requests 48 → 26" in done.stdout
    assert "startup gate FAIL: effective max_running_requests fell from 48 to 26" in done.stdout
    assert "REJECTED: rolled back" in done.stdout
    dep = data["deployments"]["qwen35-sim"]
    assert _installed_profile(cli.box, dep["unit"]) == "baseline"
    assert _healthy(dep["port"])
    assert _promotes(cli) == [("candidate", "rejected")]


def test_the_plan_comes_before_the_work_in_one_pipe_and_trials_say_of_how_many(world):
    # cron's way: stdout and stderr into one pipe; the plan and the pre-flight warnings came only after VERIFY
    cli, _ = world
    out = cli.output(cli.start("promote", "candidate", "-d", "qwen35-sim"))
    warning = "pre-flight warning: --enable-flashinfer-allreduce-fusion"
    assert out.count("promote candidate → qwen35-sim") == 1 and out.count(warning) == 1, out
    assert out.index("promote candidate → qwen35-sim") < out.index("PREFLIGHT") < out.index(warning) \
        < out.index("BASELINE") < out.index("ROLLBACK") < out.index("REJECTED: rolled back"), out
    assert re.search(r"C=2 trial 1 of 3: [0-9.]+ tok/s", out), out  # baseline_trials: 3 (support/promote_world.py)


def test_glm5_forced_fusion_fails_the_benchmark_and_rolls_back(world):
    cli, data = world
    out = cli.json("promote", "candidate-forced-fusion", "-d", "glm5-sim", expect=ExitCode.REJECTED)
    assert out["verdict"] == "FAIL", out
    # the forced fusion costs 87 % at every concurrency (sim world.yaml), not only at its worst one
    assert len(out["levels"]) == 2 and all(-93 <= level["change_pct"] <= -80 for level in out["levels"]), out["levels"]
    assert any("rolled back" in d for d in out["done"])
    assert not out["drift"]
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "baseline"
    assert _promotes(cli) == [("candidate-forced-fusion", "rejected")]
    # Priced from that promote (its baseline now stored, to be reused; the candidate's trials, at 0.13 × the
    # speed, priced at their own duration), the next one's expected GPU time is within ±25 % of what it then
    # spends (its trials and server starts, as the ledger holds them).
    cost = cli.json("promote", "candidate-forced-fusion", "-d", "glm5-sim", "--dry-run")["cost"]
    assert cost["basis"] == ("from 1 promote(s) on this host; a stored baseline reused after a confirmation trial a"
                             " critical level"), cost
    done = cli("promote", "candidate-forced-fusion", "-d", "glm5-sim", "--json")
    assert done.returncode == ExitCode.REJECTED, done.stdout + done.stderr
    again = json.loads(done.stdout)
    # Not a terminal: one plain line a step, each with the time spent and what is left of the estimate.
    steps = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert steps and all("ETA " in line or "past the expected" in line for line in steps), done.stderr
    with Ledger.open(cli.state_dir) as ledger:
        used = spent(ledger.spent(again["release"]), cost["gpus"])
    assert abs(cost["expected"]["gpu_hours"] - used) <= 0.25 * used, (cost, used)


def test_neutral_candidate_passes_and_is_kept(world):
    cli, data = world
    done = cli("promote", "neutral", "-d", "glm5-sim", "--fresh-baseline")
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    assert "KEPT: the candidate is live" in done.stdout
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "neutral"
    releases = cli.json("history")
    assert _promotes(cli) == [("neutral", "kept")]
    live = [r for r in releases if r["live"] and r["deployment"] == "glm5-sim"]
    assert live[0]["profile"] == "neutral"
    # one unit hash: the stamp in the file, `status` and `history` name the installed unit alike
    status = cli.json("status", "glm5-sim")
    assert status["unit_intact"] and status["unit_hash"] == live[0]["unit_hash"]
    assert "differs from it" not in status["live_release_line"]
    shown = cli("show", str(live[0]["id"]))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    header = next(line for line in shown.stdout.splitlines() if "baseline tok/s" in line)
    assert [c.strip() for c in header.split("|")] == ["C", "baseline tok/s", "candidate tok/s", "change", "verdict"]
    # every promote benchmark samples the simulator's GPU telemetry, shown per level
    assert any(line.startswith("  C=8: baseline GPU power ") and "(simulated)" in line
               and "; candidate GPU power" in line for line in shown.stdout.splitlines()), shown.stdout


def test_neutral_candidate_on_a_host_that_slowed_down_is_inconclusive_not_rejected(world):
    """A-B-A: the baseline is measured on the fast server; a runtime drop-in (written now, picked up at the
    candidate's restart, the unit file and release unchanged) slows every later start by a fifth, so the
    neutral candidate measures −20 % and so does the restored baseline. The drift, not the candidate, may
    explain it: exit 11 with the drift's reason, never 10."""
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    dropin = cli.box.runtime_unit_dir / f"{dep['unit']}.d"
    dropin.mkdir(parents=True, exist_ok=True)
    (dropin / "slow.conf").write_text("[Service]\nEnvironment=SGLANG_SIM_THROUGHPUT_FACTOR=0.8\n")
    try:
        out = cli.json("promote", "neutral", "-d", "glm5-sim", "--fresh-baseline", expect=ExitCode.INCONCLUSIVE)
    finally:
        (dropin / "slow.conf").unlink()
        cli.box.run(["systemctl", "daemon-reload"])
        cli.box.run(["systemctl", "restart", dep["unit"]])
    assert out["result"] == "inconclusive" and out["drift"], out
    reasons = "\n".join(out["reasons"])
    assert "environment drift" in reasons and "A-B-A:" in reasons and "inconclusive, not rejected" in reasons, reasons
    assert _installed_profile(cli.box, dep["unit"]) == "baseline"
    assert _promotes(cli) == [("neutral", "inconclusive")]


def test_unknown_flag_fails_at_startup_and_rolls_back_with_the_servers_reason(world):
    cli, data = world
    done = cli("promote", "bad-flag", "-d", "glm5-sim", "--skip-preflight")
    assert done.returncode == ExitCode.REJECTED, done.stdout + done.stderr
    assert "unrecognized arguments: --enable-warp-drive" in done.stdout
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "baseline"
    assert _promotes(cli) == [("bad-flag", "rejected")]


def test_preflight_refuses_an_unknown_flag_before_touching_anything(world):
    cli, data = world
    done = cli("promote", "bad-flag", "-d", "glm5-sim")
    assert done.returncode == ExitCode.PREFLIGHT_REFUSED, done.stdout + done.stderr
    assert "--enable-warp-drive" in done.stdout and "REFUSED: nothing was changed" in done.stdout
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "baseline"


def test_startup_hang_times_out_and_rolls_back(world):
    cli, data = world
    done = cli("promote", "hangs", "-d", "glm5-sim")
    assert done.returncode == ExitCode.REJECTED, done.stdout + done.stderr
    assert "(timeout)" in done.stdout and "not ready after" in done.stdout
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "baseline"
    assert _healthy(data["deployments"]["glm5-sim"]["port"])


def test_controller_killed_during_bench_is_recovered_by_the_next_command(world):
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    proc = cli.start("promote", "candidate", "-d", "glm5-sim")
    deadline = time.monotonic() + 60
    while (row := _ledger_phase(cli)) is None or row[1] != "BENCH" or row[2]:
        assert time.monotonic() < deadline and proc.poll() is None, "the promote never reached BENCH"
        time.sleep(0.02)
    holder = json.loads(_lock(cli, dep["unit"]).read_text())
    cli.box.run(["kill", "-9", str(holder["pid"])])
    proc.wait(timeout=10)
    assert (cli.box.runtime_unit_dir / dep["unit"]).exists(), "the trial should still be installed"
    # The operator's next look is `deployctl status`: it finishes the dead controller's work first.
    done = cli("status", "glm5-sim")
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert f"recovered release {row[0]}" in said and "stopped during BENCH" in said and "rolled back" in said
    assert "live release" in done.stdout and ": baseline (" in done.stdout and "trial:" not in done.stdout
    assert _installed_profile(cli.box, dep["unit"]) == "baseline"
    assert _healthy(dep["port"])
    assert cli.json("show", str(row[0]))["result"] == "aborted"
    assert cli.json("status", "glm5-sim")["recovered"] == []


def _lock(cli: Cli, unit: str) -> Path:
    """The unit's lock: one per unit under the sandbox's own /run, whatever the state directory."""
    return cli.box.root / "run/deployctl/locks" / f"{unit}.lock"


def test_second_promote_is_busy_at_once(world):
    cli, data = world
    lock = _lock(cli, data["deployments"]["qwen35-sim"]["unit"])
    first = cli.start("promote", "candidate", "-d", "qwen35-sim")
    deadline = time.monotonic() + 30
    while not lock.exists() or not lock.read_text():
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    second = cli("promote", "candidate", "-d", "qwen35-sim")
    assert second.returncode == ExitCode.BUSY, second.stdout + second.stderr
    assert "busy" in second.stderr and "deployctl abort -d qwen35-sim" in second.stderr
    # "at once": it answered while the first still held the lock (it did not wait for it); an order,
    # not a stopwatch, so a loaded machine cannot fail it
    assert first.poll() is None, "the second promote waited for the first to finish"
    assert first.wait(timeout=120) == ExitCode.REJECTED


def _abort_in_restart(cli: Cli, proc: Any, within_s: float) -> tuple[int, str]:
    """Wait for ``proc``'s promote to reach RESTART, ``deployctl abort`` it, wait for exit 130: (release, output)."""
    deadline = time.monotonic() + within_s
    while (row := _ledger_phase(cli)) is None or row[1] != "RESTART" or row[2]:
        assert time.monotonic() < deadline and proc.poll() is None, "the promote never reached RESTART"
        time.sleep(0.02)
    done = cli("abort", "-d", "glm5-sim")
    assert done.returncode == 0, done.stdout + done.stderr
    assert proc.wait(timeout=60) == ExitCode.INTERRUPTED
    return row[0], done.stdout


def _rolled_back_by_abort(cli: Cli, release: int, dep: dict[str, Any]) -> None:
    shown = cli.json("show", str(release))
    assert shown["result"] == "aborted" and any("with `deployctl abort`" in r for r in shown["reasons"])
    assert _installed_profile(cli.box, dep["unit"]) == "baseline"
    assert _healthy(dep["port"])


def test_abort_stops_a_running_promote_and_rolls_back(world):
    cli, data = world
    # The profile whose server never gets ready: the promote waits in RESTART (up to the 8 s startup
    # timeout) whatever the machine's load, so the abort always lands mid-promote. A benchmark phase is no
    # such window: the sequential judge may decide a neutral candidate in two trials.
    release, said = _abort_in_restart(cli, cli.start("promote", "hangs", "-d", "glm5-sim"), 60)
    assert "aborted" in said
    _rolled_back_by_abort(cli, release, data["deployments"]["glm5-sim"])


def test_abort_stops_a_canarys_promote_and_rolls_back(world):
    cli, data = world
    # The canary's pending candidate is the profile that never gets ready (as above), after its watch.
    # Templates are found next to the inventory: a sibling file.
    inventory = yaml.safe_load(cli.inventory.read_text())
    inventory["deployments"]["glm5-sim"]["policy"] = {"canary": {"profile": "hangs"}}
    canary_inventory = cli.inventory.with_name("inventory-canary-abort.yaml")
    canary_inventory.write_text(yaml.safe_dump(inventory))
    ccli = Cli(cli.box, canary_inventory, cli.state_dir)
    try:
        proc = ccli.start("canary", "glm5-sim", "--textfile-dir", str(cli.state_dir.parent / "textfile"))
        release, _ = _abort_in_restart(cli, proc, 90)
    finally:
        ccli.stop_started(["glm5-sim"])
    _rolled_back_by_abort(cli, release, data["deployments"]["glm5-sim"])


def test_rollback_goes_back_to_what_the_live_release_replaced_and_to_a_chosen_release(world):
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    # Its own history, without a benchmark: a refused promote records the installed baseline (adopted), then
    # `neutral` is installed by hand; the rollback to the baseline adopts that in turn and replaces it.
    assert cli("promote", "bad-flag", "-d", "glm5-sim").returncode == ExitCode.PREFLIGHT_REFUSED
    adopted = next(r for r in cli.json("history", "-d", "glm5-sim") if r["kind"] == "adopted")
    assert adopted["profile"] == "baseline"
    assert cli("restart", "glm5-sim", "--profile", "neutral").returncode == 0
    to_baseline = cli.json("rollback", "-d", "glm5-sim", "--to", str(adopted["id"]))
    assert to_baseline["result"] == "kept"
    assert _installed_profile(cli.box, dep["unit"]) == "baseline" and _healthy(dep["port"])
    back = cli.json("rollback", "-d", "glm5-sim")
    assert back["result"] == "kept"
    assert _installed_profile(cli.box, dep["unit"]) == "neutral" and _healthy(dep["port"])
    live = [r for r in cli.json("history", "-d", "glm5-sim") if r["live"]]
    assert live[0]["kind"] == "rollback" and live[0]["profile"] == "neutral"
    # By unit hash, as a fleet rollout undoes a host: back to the baseline's unit, then again is a no-op that
    # says so (exit 0, no release recorded, nothing restarted), never a step further back.
    by_hash = cli.json("rollback", "-d", "glm5-sim", "--to-unit-hash", adopted["unit_hash"][:12])
    assert by_hash["result"] == "kept" and _installed_profile(cli.box, dep["unit"]) == "baseline"
    releases = cli.json("history", "-d", "glm5-sim")
    again = cli("rollback", "-d", "glm5-sim", "--to-unit-hash", adopted["unit_hash"])
    assert again.returncode == 0 and "is what runs already" in again.stdout and "nothing to do" in again.stdout
    assert cli.json("history", "-d", "glm5-sim") == releases and _installed_profile(cli.box, dep["unit"]) == "baseline"
    unknown = cli("rollback", "-d", "glm5-sim", "--to-unit-hash", "0" * 64)
    assert unknown.returncode == ExitCode.BAD_INPUT and "no release of glm5-sim has a unit with hash" in unknown.stderr
