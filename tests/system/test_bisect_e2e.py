"""`deployctl bisect` end to end: the real sandboxed systemd, the simulator, the CLI inside the sandbox.

Three candidates of the issue: baseline + three harmless changes + forced all-reduce fusion (the
fusion change is found in at most ⌈log2 4⌉ + 1 benchmarked trials, the other three are kept); the
Qwen3.5 candidate of two fusion flags (the flag that cuts max_running_requests is blamed from the
startup facts, without a benchmark); two changes that only hurt together (the simulator's synthetic
pair) are reported as an interaction. Each test prints its trials, restarts and time.
"""

from __future__ import annotations

import json
import re
import math
import sqlite3
import time
from typing import Any, Iterator

import pytest
import yaml

from support.promote_world import TWO_WAVES_POLICY, Cli, make_inventory, one_deployment
from support.promote_world import healthy as _healthy
from support.promote_world import installed_profile as _installed_profile

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

FUSION = "SGLANG_SIM_FORCE_AR_FUSION=1"


@pytest.fixture(scope="module")
def world(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cli, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("bisect-e2e")
    path = root / "inventory.yaml"
    data = make_inventory(path, TWO_WAVES_POLICY)  # a search benchmarks forced fusion three times
    glm5 = data["deployments"]["glm5-sim"]["profiles"]
    glm5["three-harmless-and-fusion"] = {
        "extends": "baseline", "flags": {"enable-metrics": True},
        "env": {"OMP_NUM_THREADS": 4, "TOKENIZERS_PARALLELISM": "false", "SGLANG_SIM_FORCE_AR_FUSION": 1}}
    glm5["hangs-with-metrics"] = {  # its first trial (the candidate itself) never gets ready
        "extends": "baseline", "flags": {"enable-metrics": True}, "env": {"SGLANG_SIM_FAULT": "hang:load"}}
    glm5["pair"] = {
        "extends": "baseline", "flags": {"enable-metrics": True},
        "env": {"SGLANG_SIM_SYNTHETIC_PAIR_A": 1, "OMP_NUM_THREADS": 4, "SGLANG_SIM_SYNTHETIC_PAIR_B": 1}}
    path.write_text(yaml.safe_dump(data))
    cli = Cli(sandbox, path, root / "state")
    for name in ("glm5-sim", "qwen35-sim"):
        _reset(cli, name)
    yield cli, data
    for dep in data["deployments"].values():
        sandbox.run(["systemctl", "stop", dep["unit"]])


def _kinds(cli: Cli, deployment: str) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=5)
    try:
        return con.execute("SELECT kind, profile, result FROM releases WHERE deployment=? ORDER BY id",
                           (deployment,)).fetchall()
    finally:
        con.close()


def _baselines_measured(cli: Cli, deployment: str) -> tuple[int, int, list[str]]:
    """(reused, fresh, why): a reused baseline names its source; a fresh one its release's reason."""
    con = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=5)
    try:
        rows = con.execute("SELECT b.release_id, b.reused_from FROM benchmarks b JOIN releases r ON r.id = b.release_id"
                           " WHERE r.deployment=? AND b.role='baseline' ORDER BY b.id", (deployment,)).fetchall()
        why = []
        for release, reused_from in rows:
            if reused_from is None:
                note = con.execute("SELECT detail_json FROM events WHERE release_id=? AND kind='note' AND"
                                   " name='benchmark' ORDER BY id DESC", (release,)).fetchone()
                why.append("; ".join(json.loads(note[0])["fresh_because"]) if note else "no benchmark note")
    finally:
        con.close()
    return len(rows) - len(why), len(why), why


def _say(case: str, found: dict[str, Any]) -> None:
    searching = [t for t in found["trials"] if not t["final"]]
    print(f"\n{case}: {len(found['trials'])} trial(s) ({len(searching)} searching, "
          f"{sum(t['benchmarked'] for t in searching)} of them benchmarked), {found['restarts']} restart(s), "
          f"{found['bench_s']:.1f} s of traffic, {found['wall_s']:.1f} s")
    for t in found["trials"]:
        print(f"  {t['profile']}: {t['changes']} → {t['result']} ({t['summary'][:90]})")


def _reset(cli: Cli, deployment: str) -> None:
    done = cli("restart", deployment, "--profile", "baseline")
    assert done.returncode == 0, done.stdout + done.stderr


def test_forced_fusion_among_three_harmless_changes_is_found_and_the_rest_kept(world):
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    done = cli("promote", "three-harmless-and-fusion", "-d", "glm5-sim", "--bisect", "--json", timeout=280)
    assert done.returncode == ExitCode.OK, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["promote"]["result"] == "rejected"
    found = report["bisect"]
    _say("forced fusion + 3 harmless", found)
    assert [c["texts"] for c in found["culprits"]] == [[f"+ {FUSION}"]]
    assert not found["culprits"][0]["interaction"]
    searching = [t for t in found["trials"] if not t["final"]]
    assert sum(t["benchmarked"] for t in searching) <= math.ceil(math.log2(4)) + 1
    final = found["trials"][-1]
    assert final["final"] and final["result"] == "kept" and len(final["changes"]) == 3
    survivor = yaml.safe_load(found["survivor_yaml"])["three-harmless-and-fusion-bisected"]
    assert survivor["extends"] == "baseline" and survivor["flags"] == {"enable-metrics": True}
    assert survivor["env"] == {"OMP_NUM_THREADS": "4", "TOKENIZERS_PARALLELISM": "false"}
    assert _installed_profile(cli.box, dep["unit"]) == "three-harmless-and-fusion-bisected"
    assert _healthy(dep["port"])
    kinds = [k for k, _, _ in _kinds(cli, "glm5-sim")]
    assert kinds.count("bisect") == len(searching) and kinds[-1] == "promote"
    # every intermediate profile was rolled back, none kept
    assert all(r in ("passed", "rejected") for k, _, r in _kinds(cli, "glm5-sim") if k == "bisect")
    assert "three-harmless-and-fusion-bisected" not in (cli.inventory.read_text())  # never edited
    # The promote measured the one fresh baseline; every trial reused it, unless its confirmation trial
    # disagreed with it (load on a shared machine can shift the server's speed), which it must say.
    reused, fresh, why = _baselines_measured(cli, "glm5-sim")
    assert reused >= 1 and why[0].startswith("no stored baseline"), why
    assert all(w.startswith("C=") for w in why[1:]), why


def test_qwen35_fusion_flag_is_blamed_from_the_startup_facts_without_a_benchmark(world):
    cli, data = world
    dep = data["deployments"]["qwen35-sim"]
    done = cli("promote", "candidate", "-d", "qwen35-sim")
    assert done.returncode == ExitCode.REJECTED, done.stdout + done.stderr
    plan = cli("bisect", "candidate", "-d", "qwen35-sim", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert re.search(r"blamed by the startup facts without a restart: #\d \+ --enable-flashinfer-allreduce-fusion\n",
                     plan.stdout), plan.stdout
    assert "enable-fused-moe-sum-all-reduce" not in plan.stdout.split("blamed by")[1]
    done = cli("bisect", "candidate", "-d", "qwen35-sim", "--json", timeout=200)
    found = json.loads(done.stdout)
    _say("Qwen3.5 two fusion flags", found)
    assert [(c["texts"], c["how"]) for c in found["culprits"]] == [
        (["+ --enable-flashinfer-allreduce-fusion"], "startup facts")]
    assert "max_running_requests" in found["culprits"][0]["evidence"][0]
    # no trial searched: the only one is the promote of the survivor
    assert [t["final"] for t in found["trials"]] == [True]
    assert done.returncode == ExitCode.OK and found["trials"][0]["result"] == "kept", done.stdout + done.stderr
    assert _installed_profile(cli.box, dep["unit"]) == "candidate-bisected"


def test_changes_that_only_hurt_together_are_reported_as_an_interaction(world):
    cli, data = world
    _reset(cli, "glm5-sim")
    done = cli("promote", "pair", "-d", "glm5-sim", "--bisect", "--json", timeout=280)
    report = json.loads(done.stdout)
    found = report["bisect"]
    _say("synthetic pair", found)
    assert report["promote"]["result"] == "rejected"
    assert len(found["culprits"]) == 1, found["culprits"]
    culprit = found["culprits"][0]
    assert culprit["interaction"] and sorted(culprit["texts"]) == [
        "+ SGLANG_SIM_SYNTHETIC_PAIR_A=1", "+ SGLANG_SIM_SYNTHETIC_PAIR_B=1"]
    assert done.returncode == ExitCode.OK, done.stdout[-2000:] + done.stderr[-2000:]
    survivor = yaml.safe_load(found["survivor_yaml"])["pair-bisected"]
    assert survivor["flags"] == {"enable-metrics": True} and survivor["env"] == {"OMP_NUM_THREADS": "4"}
    assert _installed_profile(cli.box, data["deployments"]["glm5-sim"]["unit"]) == "pair-bisected"


def _trial_in(cli: Cli, proc: Any, phase: str) -> int:
    """The id of the bisect trial once it is in ``phase``."""
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline and proc.poll() is None, f"no bisect trial reached {phase}"
        con = sqlite3.connect(cli.state_dir / "ledger.sqlite3", timeout=5)
        try:
            row = con.execute("SELECT id, phase FROM releases WHERE kind='bisect' AND finished_at IS NULL"
                              " ORDER BY id DESC LIMIT 1").fetchone()
        except sqlite3.OperationalError:
            row = None
        finally:
            con.close()
        if row and row[1] == phase:
            return int(row[0])
        time.sleep(0.02)


def test_abort_stops_a_bisect_and_the_known_good_unit_runs(world):
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    _reset(cli, "glm5-sim")
    proc = cli.start("bisect", "hangs-with-metrics", "-d", "glm5-sim")
    trial = _trial_in(cli, proc, "RESTART")
    done = cli("abort", "-d", "glm5-sim")
    assert done.returncode == 0, done.stdout + done.stderr
    assert proc.wait(timeout=60) == ExitCode.INTERRUPTED
    assert cli.json("show", str(trial))["result"] == "aborted"
    assert _installed_profile(cli.box, dep["unit"]) == "baseline" and _healthy(dep["port"])


def test_a_killed_bisect_is_recovered_to_the_known_good_unit(world):
    cli, data = world
    dep = data["deployments"]["glm5-sim"]
    proc = cli.start("bisect", "hangs-with-metrics", "-d", "glm5-sim")
    trial = _trial_in(cli, proc, "RESTART")
    lock = cli.box.root / "run/deployctl/locks" / f"{dep['unit']}.lock"
    cli.box.run(["kill", "-9", str(json.loads(lock.read_text())["pid"])])  # the controller, as the OOM killer would
    proc.wait(timeout=10)
    done = cli("status", "glm5-sim")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"recovered release {trial}" in done.stdout + done.stderr
    assert _installed_profile(cli.box, dep["unit"]) == "baseline" and _healthy(dep["port"])


# One level, 8 requests a trial and no warm-up, so SGLANG_SIM_SWING's blocks of 8 requests are the trials:
# a candidate started with the swing runs its trials at full, half and quarter speed and stays
# inconclusive after the 3 trials the budget allows (test_faults_e2e's UNSTEADY); without it, it passes.
UNSTEADY = {
    "bench": {"concurrency": [2], "input_tokens": 32, "output_tokens": 32, "requests_per_level": 8,
              "warmup_requests": 0},
    "judge": {"min_trials": 2, "max_trials": 3, "baseline_trials": 3, "limit_pct": 10},
}


def test_an_inconclusive_trial_is_measured_again_and_no_harmless_change_is_blamed(sandbox, tmp_path):
    """Two harmless changes; the first trial (the candidate itself) restarts under a runtime drop-in that
    makes its speed swing, removed while it benchmarks: inconclusive, then the re-measurement passes.
    Counting the inconclusive trial as failed named a harmless change the culprit."""
    data = one_deployment("glm5-sim", {"two-harmless": {
        "extends": "baseline", "flags": {"enable-metrics": True}, "env": {"OMP_NUM_THREADS": 4}}}, UNSTEADY)
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(data))
    cli = Cli(sandbox, tmp_path / "inventory.yaml", tmp_path / "state")
    dep = data["deployments"]["glm5-sim"]
    _reset(cli, "glm5-sim")
    swing = sandbox.runtime_unit_dir / f"{dep['unit']}.d" / "swing.conf"
    swing.parent.mkdir(parents=True, exist_ok=True)
    swing.write_text("[Service]\nEnvironment=SGLANG_SIM_SWING=8:1,0.5,0.25\n")  # read at the next start only
    try:
        proc = cli.start("bisect", "two-harmless", "-d", "glm5-sim", "--skip-preflight")
        _trial_in(cli, proc, "BENCH")  # the candidate runs with the swing; every later start runs without
    finally:
        swing.unlink()
    said = cli.output(proc, timeout=200)
    assert proc.returncode == ExitCode.OK, said
    trials = [r for k, _, r in _kinds(cli, "glm5-sim") if k == "bisect"]
    assert trials[0] == "inconclusive" and trials[-1] == "passed" and "rejected" not in trials, trials
    assert re.search(r"re-measure \([12] of 2\): the candidate itself → passed", said), said
    assert "the candidate passes now: there is nothing to explain" in said
    assert "culprit" not in said.split("trials:")[1].replace("is the culprit among", "") and " fails" not in said
    assert _installed_profile(cli.box, dep["unit"]) == "baseline" and _healthy(dep["port"])
    sandbox.run(["systemctl", "stop", dep["unit"]])
