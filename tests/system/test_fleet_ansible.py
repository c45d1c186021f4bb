"""Rolling promotion with Ansible across three hosts: ansible-playbook runs the collection in ansible/
against three sandboxed systemds, each with its own sshd, its own deployctl inventory and ledger, and its
own simulated SGLang server (each on its own port of the shared network namespace).

The Ansible host names are deployctl's ``hosts:`` keys (gpu-a, gpu-b, gpu-c): each host's deployctl
inventory runs the deployment on that host, which the playbook checks before anything restarts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from support.promote_world import REPO, TWO_WAVES_POLICY, Cli, make_inventory
from support.sshd import Sshd, make_keys, start_sshd

from deployctl.live.sandbox import Sandbox

pytestmark = [pytest.mark.system, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None,
                                 reason="ansible-core is not installed (the test extra needs Python >= 3.11)")]

DEP = "glm5-sim"
UNIT = "sglang-glm5-sim.service"
HOSTS = ("gpu-a", "gpu-b", "gpu-c")
PLAYBOOK = REPO / "ansible" / "playbooks" / "rolling-promote.yml"
# A candidate the judge rejects: half the baseline's speed. The rollout's tests need a rejection, not
# forced fusion's (its benchmark at 0.13 x the speed is most of a test's time); test_promote_e2e has that.
REGRESSION = {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "0.5"}}


@pytest.fixture(scope="module")
def sshds(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Sshd]]:
    """Three hosts: the session's sandbox and two more, one sshd in each."""
    keys = make_keys(tmp_path_factory.mktemp("fleet-keys"))
    boxes = [sandbox, Sandbox.boot(), Sandbox.boot()]
    servers: list[Sshd] = []
    try:
        for box in boxes:
            servers.append(start_sshd(box, keys, unit="fleet-sshd.service"))
        yield servers
    finally:
        for server in servers:
            server.stop()
        for box in boxes[1:]:
            box.close()


@dataclass(frozen=True)
class FleetHost:
    name: str
    sshd: Sshd
    cli: Cli

    def releases(self) -> list[dict[str, Any]]:
        done = self.cli("history", "-d", DEP, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return sorted(json.loads(done.stdout), key=lambda r: r["id"])

    def promotes(self) -> list[dict[str, Any]]:
        return [r for r in self.releases() if r["kind"] == "promote"]

    def add_profile(self, name: str, profile: dict[str, Any]) -> None:
        data = yaml.safe_load(self.cli.inventory.read_text())
        data["deployments"][DEP]["profiles"][name] = profile
        self.cli.inventory.write_text(yaml.safe_dump(data))

    def installed_profile(self) -> str:
        text = (self.sshd.box.unit_dir / UNIT).read_text()
        return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("X-Deployctl-Profile="))


class Fleet:
    def __init__(self, hosts: list[FleetHost], workdir: Path) -> None:
        self.hosts, self.workdir = hosts, workdir

    def ansible_inventory(self, names: dict[str, FleetHost]) -> Path:
        lines = ["[sglang]"]
        for name, host in names.items():
            lines.append(
                f"{name} ansible_host=127.0.0.1 ansible_port={host.sshd.port} ansible_user=root"
                f" ansible_ssh_private_key_file={host.sshd.keys / 'client'}"
                f" deployctl_inventory={host.cli.inventory} deployctl_state_dir={host.cli.state_dir}")
        lines += ["", "[sglang:vars]", f"ansible_python_interpreter={sys.executable}",
                  f"deployctl_executable='{sys.executable} -m deployctl'",
                  "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"]
        path = self.workdir / "hosts.ini"
        path.write_text("\n".join(lines) + "\n")
        return path

    def playbook(self, *extra: str, names: dict[str, FleetHost] | None = None,
                 ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        """ansible-playbook's outcome, and the summary it wrote ({} if none)."""
        summary = self.workdir / "summary.json"
        summary.unlink(missing_ok=True)
        bin_dir = Path(sys.executable).parent
        env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "ansible"), "ANSIBLE_HOST_KEY_CHECKING": "False",
               "ANSIBLE_LOCAL_TEMP": str(self.workdir / "ansible-tmp"), "ANSIBLE_NOCOLOR": "1",
               # a module's code over the task's one SSH session, not copied to a file first: fewer round trips
               "ANSIBLE_PIPELINING": "True",
               "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
        inventory = self.ansible_inventory(names or {h.name: h for h in self.hosts})
        done = subprocess.run([str(bin_dir / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK),
                               "-e", f"deployment={DEP}", "-e", f"fleet_summary_file={summary}", *extra],
                              env=env, capture_output=True, text=True, timeout=540)
        return done, json.loads(summary.read_text()) if summary.exists() else {}


@pytest.fixture
def fleet(sshds: list[Sshd], tmp_path: Path) -> Fleet:
    """Each host on its baseline, with a fresh ledger and its own deployctl inventory naming it."""
    hosts = []
    for name, server in zip(HOSTS, sshds):
        inventory = tmp_path / name / "inventory.yaml"
        inventory.parent.mkdir()
        # two waves a level: the verdicts asserted are of 1.5 x and 0.5 x steps, the neutral one may be inconclusive
        data = make_inventory(inventory, TWO_WAVES_POLICY)
        dep = data["deployments"][DEP]
        dep["profiles"]["regression"] = REGRESSION
        data["hosts"] = {name: data["hosts"][dep["host"]]}
        data["deployments"] = {DEP: {**dep, "host": name}}
        inventory.write_text(yaml.safe_dump(data))
        hosts.append(FleetHost(name, server, Cli(server.box, inventory, tmp_path / name / "state")))
    # three sandboxes, three systemds: the restarts are independent, so they run at once
    with ThreadPoolExecutor(len(hosts)) as pool:
        for restarted in pool.map(lambda h: h.cli("restart", "-d", DEP, "--profile", "baseline"), hosts):
            assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    return Fleet(hosts, tmp_path)


def test_a_neutral_candidate_is_kept_on_every_host_one_after_the_other(fleet: Fleet):
    # inconclusive=ok: on two shared cores a neutral change may be judged within noise; the baseline stays
    # then, and the rollout goes on, as it would for an operator who asked for that.
    done, summary = fleet.playbook("-e", "profile=neutral", "-e", "inconclusive=ok")
    assert done.returncode == 0, done.stdout + done.stderr
    releases = [h.promotes() for h in fleet.hosts]
    assert [len(r) for r in releases] == [1, 1, 1], releases
    results = [r[0]["result"] for r in releases]
    assert set(results) <= {"kept", "inconclusive"}, results
    # In order: each host's promote started after the one before it finished (batches of 1, then 1, then 1).
    for before, after in zip(releases, releases[1:]):
        assert before[0]["finished_at"] <= after[0]["started_at"], (before, after)
    for host, result in zip(fleet.hosts, results):
        assert host.installed_profile() == ("neutral" if result == "kept" else "baseline"), host.name
        assert summary[host.name]["result"] == result, summary
        assert summary[host.name]["levels"], summary  # the change at each level


def test_a_regressing_candidate_stops_the_rollout_at_the_first_host(fleet: Fleet):
    done, summary = fleet.playbook("-e", "profile=regression", "-e", "rollback_promoted=true")
    assert done.returncode == 2, done.stdout + done.stderr  # ansible-playbook: a host failed
    first, *others = fleet.hosts
    (release,) = first.promotes()
    assert release["result"] == "rejected" and first.installed_profile() == "baseline", release
    assert summary[first.name]["result"] == "rejected" and summary[first.name]["release"] == release["id"], summary
    assert summary[first.name]["reasons"], summary
    for host in others:
        assert host.promotes() == [] and host.installed_profile() == "baseline", host.name
        assert summary[host.name] == {"result": "skipped"}, summary
    assert f"regression was rejected on {first.name}: the rollout stops here" in done.stdout


def test_a_rejection_on_the_second_host_rolls_back_the_first_when_asked(fleet: Fleet):
    # The same profile name means a faster server on gpu-a (kept) and a regression on gpu-b (rejected).
    a, b, c = fleet.hosts
    a.add_profile("next", {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "1.5"}})
    b.add_profile("next", {"extends": "regression"})
    c.add_profile("next", {"extends": "baseline", "flags": {"enable-metrics": True}})
    done, summary = fleet.playbook("-e", "profile=next", "-e", "rollback_promoted=true")
    assert done.returncode == 2, done.stdout + done.stderr
    assert [r["result"] for r in a.promotes()] == ["kept"], a.releases()
    assert a.releases()[-1]["kind"] == "rollback" and a.installed_profile() == "baseline", a.releases()
    assert [r["result"] for r in b.promotes()] == ["rejected"] and b.installed_profile() == "baseline"
    assert c.releases() == [] and c.installed_profile() == "baseline"
    assert [summary[h.name]["result"] for h in fleet.hosts] == ["kept", "rejected", "skipped"], summary


def test_check_mode_changes_nothing(fleet: Fleet):
    before = [(h.installed_profile(), (h.sshd.box.unit_dir / UNIT).read_bytes()) for h in fleet.hosts]
    done, summary = fleet.playbook("-e", "profile=candidate-forced-fusion", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(h.installed_profile(), (h.sshd.box.unit_dir / UNIT).read_bytes()) for h in fleet.hosts] == before
    assert all(h.promotes() == [] for h in fleet.hosts)
    assert {s["result"] for s in summary.values()} == {"planned"}, summary
    assert "changed=1" in done.stdout  # --dry-run: each host would restart


def test_a_host_deployctl_does_not_know_fails_before_anything_restarts(fleet: Fleet):
    a, b, _ = fleet.hosts
    # gpu-d reaches a's machine, whose deployctl inventory runs the deployment on gpu-a
    done, _summary = fleet.playbook("-e", "profile=neutral", names={"gpu-d": a, b.name: b})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "runs glm5-sim on 'gpu-a', not on 'gpu-d'" in done.stdout, done.stdout
    assert a.promotes() == [] and b.promotes() == [], "no host promoted"


# --- the collection's own checks (no sandbox needed; they need the test extra's ansible-core/ansible-lint) ---

COLLECTION = REPO / "ansible" / "ansible_collections" / "deployctl" / "sglang"
# ansible-test's other sanity tests (pep8, pylint, validate-modules, import, yamllint, ...) build a venv with a
# pip bootstrap script fetched from Ansible's server: they cannot run offline, these can.
OFFLINE_SANITY = ("compile", "shebang", "line-endings", "empty-init", "no-smart-quotes", "symlinks")


def _tool(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def test_ansible_lint_passes_offline_on_the_collection_and_playbook():
    done = subprocess.run([_tool("ansible-lint"), "--offline", "--nocolor"], cwd=REPO / "ansible",
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ansible_test_sanity_passes_its_offline_tests():
    tests = [arg for name in OFFLINE_SANITY for arg in ("--test", name)]
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = subprocess.run([_tool("ansible-test"), "sanity", *tests, "--python", python], cwd=COLLECTION,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("module", ["deployctl_promote", "deployctl_rollback", "deployctl_facts"])
def test_each_module_documents_itself(module: str):
    # What validate-modules would check first, offline: the DOCUMENTATION, EXAMPLES and RETURN parse.
    done = subprocess.run([_tool("ansible-doc"), "--json", f"deployctl.sglang.{module}"], cwd=REPO / "ansible",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)[f"deployctl.sglang.{module}"]
    assert doc["doc"]["options"]["deployment"]["required"] and doc["examples"] and doc["return"]
