"""A FAIL a slow server start could explain, decided over server starts (the candidate's second start, the
rollback's verification), end to end on the real sandboxed systemd and the simulator (deployctl.judge.starts).

One deployment (the demo's GLM-5 on the fast simulator, the small policy of support/promote_world) with a
1.5 % limit: a 4.5 % slower server start is then a stage-1 FAIL or INCONCLUSIVE, never one that survives the
2 % restart guard. Every test starts from its own ledger with the baseline installed and healthy.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from support.promote_world import (
    POLICY, TWO_WAVES_POLICY, Cli, healthy, installed_profile, one_deployment, one_deployment_site, one_deployment_world,
    wait_for,
)

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

DEP = "glm5-sim"
PROFILES = {"regressed": {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "0.75"}}}
# A 1.5 % limit: a start 4.5 % slower is well beyond it, and three times it beyond twice it (stage 1 does not
# pass it). A false-fail rate of 1 in 10 000: this host shares two cores with other work, and one trial under
# a load spike reads 15 % slow (measured: C=8 on the candidate's second start, 4122 against 4990 tok/s);
# only a robust FAIL or one over the starts rejects, never such a spike. Three trials at most keep stage 1
# short (its INCONCLUSIVE is decided over the starts too).
# Trials long enough to ride out a scheduling hiccup of the shared cores (a trial of two waves, a few
# tenths of a second, once read −13.7 % at C=2 under load and made the slow start a robust FAIL); the
# regression's promote, whose verdict no hiccup changes, runs the short ones (quick.yaml).
BENCH = {**POLICY["bench"], "requests_per_level": 24}
JUDGE = {"min_trials": 2, "max_trials": 3, "baseline_trials": 3, "limit_pct": 1.5, "false_fail": 0.0001}


@pytest.fixture(scope="module")
def site(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("over-starts")
    # The dead-man's check (every 30 s by default) must not recover the promote a test kills before the test's
    # own next command does (a loaded host takes that long to reach the candidate's second start).
    data = one_deployment(DEP, PROFILES, {"bench": BENCH, "judge": JUDGE, "dead_man_check_s": 600})
    quick = {**data, "policy": {**data["policy"], "bench": TWO_WAVES_POLICY["bench"]}}
    (root / "quick.yaml").write_text(yaml.safe_dump(quick))
    # One critical level (C=8; C=2 advisory): a verdict decided over starts measures three starts a side.
    one = {**quick, "policy": {**quick["policy"], "judge": {**JUDGE, "levels": {2: {"role": "advisory"}}}}}
    (root / "one-level.yaml").write_text(yaml.safe_dump(one))
    yield from one_deployment_site(sandbox, root, data, DEP)


@pytest.fixture
def world(site: tuple[Sandbox, Path, dict[str, Any]], tmp_path: Path) -> Iterator[tuple[Cli, dict[str, Any]]]:
    yield from one_deployment_world(site, tmp_path / "state", DEP)


def _phase(cli: Cli) -> str | None:
    db = cli.state_dir / "ledger.sqlite3"
    if not db.exists():
        return None
    con = sqlite3.connect(db, timeout=5)
    try:
        row = con.execute("SELECT phase FROM releases WHERE kind='promote' ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.OperationalError:
        return None  # the promote has created the file but not yet its tables
    finally:
        con.close()
    return row[0] if row else None


def _trials(shown: dict[str, Any], role: str = "verify") -> dict[int, int]:
    """Trials a level of the release's (latest) sweep of ``role``, as ``show --json`` has it."""
    found = [b for b in shown["benchmarks"] if b["role"] == role]
    assert found, shown["benchmarks"]
    return {lv["concurrency"]: len(lv["trials"]) for lv in found[-1]["result"]["levels"]}


def _promote_on_a_slow_start(cli: Cli, dep: dict[str, Any], env: dict[str, str] | None = None) -> str:
    """``promote neutral`` while a runtime drop-in slows the next server start by 4.5 % — the candidate's, the
    unit file and release unchanged — removed once the candidate runs, so the restored baseline starts at
    full speed again: a restart offset, not the candidate. What the promote printed."""
    dropin = cli.box.runtime_unit_dir / f"{dep['unit']}.d"
    dropin.mkdir(parents=True, exist_ok=True)
    (dropin / "slow.conf").write_text("[Service]\nEnvironment=SGLANG_SIM_THROUGHPUT_FACTOR=0.955\n")
    try:
        proc = cli.start("promote", "neutral", "-d", DEP, "--skip-output-gate", "--json", env=env)
        wait_for("the candidate's server start", lambda: _phase(cli) in ("BENCH", "JUDGE", "ROLLBACK", "VERIFY", "DONE"),
                 60)
    finally:
        (dropin / "slow.conf").unlink()
    return cli.output(proc)


def _decided_over_starts(cli: Cli, dep: dict[str, Any]) -> dict[str, Any]:
    """The release as ``show --json`` has it, once it is checked to be inconclusive over two starts."""
    out = cli.json("show", "-d", DEP)
    assert out["result"] == "inconclusive" and out["verdict"] == "INCONCLUSIVE (over two baseline starts)", out
    reasons = out["reasons"]
    assert any(r.startswith("INCONCLUSIVE over server starts: ") for r in reasons), reasons
    # the restart σ it allowed for: the 2 % guard, or more where the baseline's own two starts differed more
    assert any(re.match(r"restart σ \d+\.\d % a start: (guard|learned from 1 restart pair)", r) for r in reasons), reasons
    assert any(r.startswith(("inconclusive, not rejected: a slower server start could explain the FAIL",
                             "still inconclusive over two baseline starts")) for r in reasons), reasons
    assert not any(r.startswith("rejected") or "A-B-A" in r for r in reasons), reasons  # one story
    # the stage-1 verdict, and the verdict over starts that decided it, stored with the release
    assert out["decided"]["outcome"] in ("FAIL", "INCONCLUSIVE") and out["decided"]["starts"]["outcome"] == "INCONCLUSIVE"
    assert out["decided"]["starts"]["restart"]["sigma"] >= 0.02
    # every critical level, the same plan on the candidate's second start and on the restored baseline's new
    # start (``verification_plan``: its trials depend on the first starts' sweeps)
    plan = _trials(out, "candidate-restart")
    assert set(plan) == {2, 8} and all(n >= 1 for n in plan.values()) and _trials(out) == plan, out["benchmarks"]
    assert installed_profile(cli.box, dep["unit"]) == "baseline" and healthy(dep["port"])
    return out


def test_a_neutral_candidate_on_a_slow_server_start_is_inconclusive_over_two_starts_not_rejected(world):
    cli, dep = world
    text = _promote_on_a_slow_start(cli, dep)
    assert cli.started[-1].returncode == ExitCode.INCONCLUSIVE, text
    out = _decided_over_starts(cli, dep)
    assert out["reasons"][-1].startswith(("inconclusive, not rejected", "still inconclusive")), out["reasons"]
    shown = cli("show", str(out["id"]))
    assert "decided over server starts (INCONCLUSIVE): INCONCLUSIVE over server starts: " in shown.stdout, shown.stdout


def test_a_controller_killed_in_the_candidates_second_start_is_recovered_over_server_starts(world):
    """SIGKILLed once the candidate's second start is measured, before its outcome is recorded (the candidate
    runs): the next command rolls back, measures the plan on the baseline's new start and decides."""
    cli, dep = world
    text = _promote_on_a_slow_start(cli, dep, {"DEPLOYCTL_CRASH_AFTER": "SECOND_START"})
    assert cli.started[-1].returncode in (-9, 137), text
    done = cli("status", DEP)
    assert done.returncode == ExitCode.OK and "stopped during SECOND_START" in done.stdout + done.stderr, done.stdout
    _decided_over_starts(cli, dep)


def test_a_clear_regression_is_rejected_with_no_extra_verification_trials(world):
    cli, dep = world
    cli = Cli(cli.box, cli.inventory.with_name("quick.yaml"), cli.state_dir)
    out = cli.json("promote", "regressed", "-d", DEP, "--skip-output-gate", expect=ExitCode.REJECTED)
    assert out["result"] == "rejected" and out["verdict"] == "FAIL" and out["starts"] is None, out
    shown = cli.json("show", str(out["release"]))
    assert _trials(shown) == {2: 1}  # verify_concurrency, one trial, as before
    assert "candidate-restart" not in [b["role"] for b in shown["benchmarks"]]  # no second candidate start
    assert installed_profile(cli.box, dep["unit"]) == "baseline"


def test_a_pass_on_one_start_a_side_is_not_kept_where_a_restart_offset_could_hide_twice_the_limit(world):
    """``promote neutral`` at the 1.5 % limit on a brand-new host: twice the limit (−3 %) lies within what the 2 %
    restart guard leaves open on one start a side, so no stage-1 PASS stands (``starts.pass_robust``): the
    candidate is restarted, rolled back and decided over the starts, never kept (before: kept, exit 0). The
    short trials (quick.yaml): a hiccup of the shared cores cannot make it kept either."""
    cli, dep = world
    cli = Cli(cli.box, cli.inventory.with_name("quick.yaml"), cli.state_dir)
    out = cli.json("promote", "neutral", "-d", DEP, "--skip-output-gate", expect=ExitCode.INCONCLUSIVE)
    assert out["result"] == "inconclusive" and out["verdict"] == "INCONCLUSIVE", out
    _decided_over_starts(cli, dep)  # the baseline installed and healthy, C2 and B2 on every critical level
    # stage 1 on the steady simulator passes it; a hiccup of the shared cores may leave it unclear instead
    assert out["reasons"][0].startswith(("INCONCLUSIVE: PASS on one server start a side, but a restart offset of up "
                                         "to 2.0 % a start (guard: ", "INCONCLUSIVE: C=")), out["reasons"]


def test_a_one_level_verdict_over_starts_measures_three_starts_a_side(world):
    """``promote neutral`` at the 1.5 % limit with one critical level (one-level.yaml): no stage-1 PASS stands
    there either, and with one level there is nothing to average a start's offset over, so the candidate is
    restarted in place twice (C2, C3), rolled back, and the restored baseline measured on its new start and
    once more after a restart in place (B2, B3) — each its own ledger row — before the verdict over starts."""
    cli, dep = world
    cli = Cli(cli.box, cli.inventory.with_name("one-level.yaml"), cli.state_dir)
    done = cli("promote", "neutral", "-d", DEP, "--skip-output-gate", "--json")
    out = json.loads(done.stdout)
    shown = cli.json("show", str(out["release"]))
    # exit 10 or 11 as the evidence over the starts says (a neutral candidate: almost always 11)
    starts = shown["decided"]["starts"]["outcome"]
    assert (done.returncode, out["result"]) == ((ExitCode.REJECTED, "rejected") if starts == "FAIL"
                                                else (ExitCode.INCONCLUSIVE, "inconclusive")), (starts, out)
    roles = [b["role"] for b in shown["benchmarks"]]
    assert roles.count("candidate-restart") == 2 and roles.count("verify") == 2, roles
    later = [(b["role"], b["bench_key"]) for b in shown["benchmarks"] if b["role"] in ("candidate-restart", "verify")]
    assert len(set(later)) == 4, later  # no start's row stands for another's
    assert all(_trials({"benchmarks": [b]}, b["role"]).keys() == {8} for b in shown["benchmarks"]
               if b["role"] in ("candidate-restart", "verify"))
    assert shown["verdict"].endswith("(over three baseline starts)"), shown["verdict"]
    assert any("against the baseline on 3 server starts, the candidate on 3" in r for r in shown["reasons"]), shown["reasons"]
    assert installed_profile(cli.box, dep["unit"]) == "baseline" and healthy(dep["port"])
