"""A FAIL a slow server start could explain, decided over two baseline starts, end to end on the real
sandboxed systemd and the simulator (deployctl.judge.starts, the runner's verification).

One deployment (the demo's GLM-5 on the fast simulator, the small policy of support/promote_world) with a
2 % limit: a 4.5 % slower server start is then a stage-1 FAIL at the small default restart σ (or, on a loaded
host, an INCONCLUSIVE), but not one that survives the 2 % restart guard. Every test starts from its own ledger with the baseline installed and healthy.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any, Iterator

import pytest
from support.promote_world import (
    TWO_WAVES_POLICY, Cli, healthy, installed_profile, one_deployment, one_deployment_site, one_deployment_world,
    wait_for,
)

from deployctl.errors import ExitCode
from deployctl.judge.starts import VERIFICATION_TRIALS
from deployctl.live.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

DEP = "glm5-sim"
PROFILES = {"regressed": {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "0.75"}}}
# A 2 % limit and a strict false-fail rate: a start 4.5 % slower is beyond the limit yet well inside what a
# 2 % restart offset a start explains over two baseline starts (≈ 7 % at this rate), on a quiet host or a
# loaded one; three trials at most keep the stage-1 INCONCLUSIVE a loaded host may give short.
JUDGE = {"min_trials": 2, "max_trials": 3, "baseline_trials": 3, "limit_pct": 2, "false_fail": 0.001}


@pytest.fixture(scope="module")
def site(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, Path, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("over-starts")
    data = one_deployment(DEP, PROFILES, {"bench": TWO_WAVES_POLICY["bench"], "judge": JUDGE})
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


def _verify_trials(shown: dict[str, Any]) -> dict[int, int]:
    """Trials a level of the rollback's (latest) verification, as ``show --json`` has it."""
    verify = [b for b in shown["benchmarks"] if b["role"] == "verify"]
    assert verify, shown["benchmarks"]
    return {lv["concurrency"]: len(lv["trials"]) for lv in verify[-1]["result"]["levels"]}


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
    each = -(-VERIFICATION_TRIALS // 2)  # the verification's trials spread over the 2 critical levels
    assert _verify_trials(out) == {2: each, 8: each}  # every critical level
    assert installed_profile(cli.box, dep["unit"]) == "baseline" and healthy(dep["port"])
    return out


def test_a_neutral_candidate_on_a_slow_server_start_is_inconclusive_over_two_starts_not_rejected(world):
    cli, dep = world
    text = _promote_on_a_slow_start(cli, dep)
    assert cli.started[-1].returncode == ExitCode.INCONCLUSIVE, text
    out = _decided_over_starts(cli, dep)
    assert out["reasons"][-1].startswith(("inconclusive, not rejected", "still inconclusive")), out["reasons"]
    shown = cli("show", str(out["id"]))
    assert "decided over two baseline starts: INCONCLUSIVE" in shown.stdout, shown.stdout


def test_a_controller_killed_in_the_verification_over_two_starts_is_recovered_over_two_starts(world):
    """SIGKILLed once the verification over two starts is measured, before its outcome is recorded: the next
    command rolls back again and measures and decides the same plan on the baseline's new start."""
    cli, dep = world
    text = _promote_on_a_slow_start(cli, dep, {"DEPLOYCTL_CRASH_AFTER": "VERIFY"})
    assert cli.started[-1].returncode in (-9, 137), text
    done = cli("status", DEP)
    assert done.returncode == ExitCode.OK and "stopped during VERIFY" in done.stdout + done.stderr, done.stdout
    out = _decided_over_starts(cli, dep)
    assert [b["role"] for b in out["benchmarks"]].count("verify") == 2  # measured again after the recovery


def test_a_clear_regression_is_rejected_with_no_extra_verification_trials(world):
    cli, dep = world
    out = cli.json("promote", "regressed", "-d", DEP, "--skip-output-gate", expect=ExitCode.REJECTED)
    assert out["result"] == "rejected" and out["verdict"] == "FAIL" and out["starts"] is None, out
    assert _verify_trials(cli.json("show", str(out["release"]))) == {2: 1}  # verify_concurrency, one trial, as before
    assert installed_profile(cli.box, dep["unit"]) == "baseline"
