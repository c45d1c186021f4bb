"""Rolling promotion with Ansible across five hosts: ansible-playbook runs the collection in ansible/ against
one sandboxed systemd in which each "host" is its own deployment - its own unit, port, simulated SGLang
server, deployctl inventory and ledger - reached over the sandbox's sshd. One systemd instead of five keeps
the suite fast; what the playbook does to a host goes through the host's own inventory, state directory and
lock, as on separate machines. A host that must become unreachable gets an sshd of its own.

The Ansible host names are deployctl's ``hosts:`` keys (gpu-1 ... gpu-5): each host's deployctl inventory
runs its deployment on that host, which the playbook checks before anything restarts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from support.clirun import free_port
from support.promote_world import REPO, TWO_WAVES_POLICY, Cli, make_inventory, slowed, wait_for
from support.sshd import Sshd, make_keys, start_sshd

from deployctl.sandbox import Sandbox
from deployctl.units.stamp import unit_hash

pytestmark = [pytest.mark.system, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None,
                                 reason="ansible-core is not installed (the test extra needs Python >= 3.11)")]

HOSTS = ("gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5")
PLAYBOOK = REPO / "ansible" / "playbooks" / "rolling-promote.yml"
# A candidate the judge rejects: half the baseline's speed; one it keeps: one and a half times it. The
# rollout's tests need clear verdicts, not forced fusion's (its benchmark at 0.13 x the speed is most of a
# test's time); test_promote_e2e has that.
REGRESSION = {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "0.5"}}
FASTER = {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "1.5"}}
WORDS = {"kept", "rejected", "inconclusive", "unreachable", "skipped", "unchanged", "failed", "planned"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_keys(tmp_path_factory.mktemp("fleet-keys"))


@pytest.fixture(scope="module")
def sshd(sandbox: Sandbox, keys: Path) -> Iterator[Sshd]:
    """The sandbox's sshd: every host of the fleet is reached through it."""
    server = start_sshd(sandbox, keys, unit="fleet-sshd.service")
    yield server
    server.stop()


@dataclass(frozen=True)
class FleetHost:
    name: str
    dep: str
    unit: str
    port: int
    sshd: Sshd
    cli: Cli

    def releases(self) -> list[dict[str, Any]]:
        if not self.cli.state_dir.exists():
            return []
        done = self.cli("history", "-d", self.dep, "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        return sorted(json.loads(done.stdout), key=lambda r: r["id"])

    def promotes(self) -> list[dict[str, Any]]:
        return [r for r in self.releases() if r["kind"] == "promote"]

    def add_profile(self, name: str, profile: dict[str, Any]) -> None:
        data = yaml.safe_load(self.cli.inventory.read_text())
        data["deployments"][self.dep]["profiles"][name] = profile
        self.cli.inventory.write_text(yaml.safe_dump(data))

    def unit_text(self) -> str:
        return (self.sshd.box.unit_dir / self.unit).read_text()

    def installed_profile(self) -> str:
        assert not (self.sshd.box.runtime_unit_dir / self.unit).exists(), f"{self.name}: a trial was left behind"
        return next(line.split("=", 1)[1] for line in self.unit_text().splitlines()
                    if line.startswith("X-Deployctl-Profile="))

    def unit_hash(self) -> str:
        return unit_hash(self.unit_text())

    @property
    def workdir(self) -> Path:
        """Where a restart outside the rollout keeps its ledger: not the host's state directory."""
        return self.cli.state_dir.parent / "setup-state"

    def promoting(self) -> bool:
        """A promote's trial unit is installed: the host is restarting into its candidate."""
        return (self.sshd.box.runtime_unit_dir / self.unit).exists()


class Fleet:
    def __init__(self, hosts: list[FleetHost], workdir: Path) -> None:
        self.hosts, self.workdir = hosts, workdir
        self.summary_path = workdir / "summary.json"

    def ansible_inventory(self, hosts: list[FleetHost], host_vars: dict[str, str]) -> Path:
        lines = ["[sglang]"]
        for host in hosts:
            lines.append(
                f"{host.name} ansible_host=127.0.0.1 ansible_port={host.sshd.port} ansible_user=root"
                f" ansible_ssh_private_key_file={host.sshd.keys / 'client'} deployment={host.dep}"
                f" deployctl_inventory={host.cli.inventory} deployctl_state_dir={host.cli.state_dir}"
                + "".join(f" {k}={v.format(port=host.port)}" for k, v in host_vars.items()))
        lines += ["", "[sglang:vars]", f"ansible_python_interpreter={sys.executable}",
                  f"deployctl_executable='{sys.executable} -m deployctl'",
                  "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"]
        path = self.workdir / "hosts.ini"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, *extra: str, hosts: list[FleetHost] | None = None,
              host_vars: dict[str, str] | None = None) -> subprocess.Popen[str]:
        self.summary_path.unlink(missing_ok=True)
        bin_dir = Path(sys.executable).parent
        env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "ansible"), "ANSIBLE_HOST_KEY_CHECKING": "False",
               "ANSIBLE_LOCAL_TEMP": str(self.workdir / "ansible-tmp"), "ANSIBLE_NOCOLOR": "1",
               # a module's code over the task's one SSH session, not copied to a file first: fewer round trips
               "ANSIBLE_PIPELINING": "True",
               "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
        inventory = self.ansible_inventory(hosts or self.hosts, host_vars or {})
        return subprocess.Popen([str(bin_dir / "ansible-playbook"), "-i", str(inventory), str(PLAYBOOK),
                                 "-e", f"fleet_summary_file={self.summary_path}", *extra],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def summary(self) -> dict[str, Any]:
        return json.loads(self.summary_path.read_text()) if self.summary_path.exists() else {}

    def playbook(self, *extra: str, hosts: list[FleetHost] | None = None, host_vars: dict[str, str] | None = None,
                 ) -> tuple[int, str, dict[str, Any]]:
        """ansible-playbook's exit code, its output, and the summary it wrote ({} if none)."""
        proc = self.start(*extra, hosts=hosts, host_vars=host_vars)
        out, _ = proc.communicate(timeout=540)
        return proc.returncode, out, self.summary()


def inventory_of(name: str, port: int) -> dict[str, Any]:
    """Host ``name``'s deployctl inventory: deployment glm5-NAME (unit sglang-glm5-NAME.service) on ``port``."""
    data = make_inventory(Path(os.devnull), TWO_WAVES_POLICY)
    dep, sim_host = data["deployments"]["glm5-sim"], data["hosts"]["sim-sm120-x8"]
    dep["profiles"]["regression"] = REGRESSION
    dep["profiles"]["faster"] = FASTER
    dep_name = f"glm5-{name}"
    data["hosts"] = {name: sim_host}
    data["deployments"] = {dep_name: {**dep, "host": name, "unit": f"sglang-{dep_name}.service", "port": port}}
    return data


@pytest.fixture(scope="module")
def ports() -> dict[str, int]:
    """Each host's port for the whole module: a host left on its baseline by one test is reused as it is."""
    return {name: free_port() for name in HOSTS}


@pytest.fixture
def fleet(sshd: Sshd, ports: dict[str, int], tmp_path: Path) -> Iterator[Fleet]:
    """Five hosts on their baseline, each with its own deployctl inventory naming it and no state directory
    yet (deployctl never ran there: the rollout's promote adopts the installed unit)."""
    hosts = []
    for name in HOSTS:
        inventory = tmp_path / name / "inventory.yaml"
        inventory.parent.mkdir()
        inventory.write_text(yaml.safe_dump(inventory_of(name, ports[name])))
        dep = f"glm5-{name}"
        hosts.append(FleetHost(name, dep, f"sglang-{dep}.service", ports[name], sshd,
                               Cli(sshd.box, inventory, tmp_path / name / "state")))
    # Only a host a test left elsewhere restarts (the first test of the module starts them all): at once,
    # in one systemd, each into its own unit.
    stale = [h for h in hosts if not _on_its_baseline(h)]
    if stale:
        with ThreadPoolExecutor(len(stale)) as pool:
            for restarted in pool.map(
                    lambda h: h.cli("restart", "-d", h.dep, "--profile", "baseline", "--state-dir", str(h.workdir)),
                    stale):
                assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    yield Fleet(hosts, tmp_path)
    for host in hosts:  # what a failed test left running: the next test must find no lock held, no trial
        if host.promoting():
            host.cli("abort", "-d", host.dep)


def _on_its_baseline(host: FleetHost) -> bool:
    unit = host.sshd.box.unit_dir / host.unit
    if not unit.exists() or host.promoting() or f"--port {host.port}" not in unit.read_text():
        return False
    if host.installed_profile() != "baseline":
        return False
    return host.sshd.box.run(["systemctl", "is-active", "--quiet", host.unit]).returncode == 0


def test_two_rejections_in_one_batch_undo_each_earlier_host_once(fleet: Fleet):
    h1, h2, h3, h4, h5 = fleet.hosts
    # every host is one deployctl never ran on: its unit is installed, it has no state directory yet
    assert not h1.cli.state_dir.exists()
    before = h1.unit_hash()
    h1.add_profile("next", FASTER)
    for host in (h2, h3):
        host.add_profile("next", REGRESSION)
    for host in (h4, h5):
        host.add_profile("next", FASTER)
    rc, out, summary = fleet.playbook("-e", "profile=next", "-e", "rollback_promoted=true",
                                      "-e", '{"fleet_batches": [1, 2]}', "-e", "max_unavailable=40%")
    assert rc == 2, out
    # the fresh host was adopted as promote adopts it, kept the candidate, and was undone exactly once
    kinds = [(r["kind"], r["result"]) for r in h1.releases()]
    assert kinds[0][0] == "adopted" and ("promote", "kept") in kinds, kinds
    assert [k for k, _ in kinds].count("rollback") == 1, kinds
    assert h1.installed_profile() == "baseline" and h1.unit_hash() == before
    for host in (h2, h3):  # both rejected in the same batch, each rolled back by its own deployctl
        assert [r["result"] for r in host.promotes()] == ["rejected"], host.releases()
        assert host.installed_profile() == "baseline"
    for host in (h4, h5):
        assert host.releases() == [] and host.installed_profile() == "baseline"
    assert summary[h1.name]["result"] == "kept" and summary[h1.name]["undone"] == "rolled_back", summary
    assert [summary[h.name]["result"] for h in (h2, h3, h4, h5)] == ["rejected", "rejected", "skipped", "skipped"]
    for host in (h2, h3):  # the release in each host's ledger, and why
        assert summary[host.name]["release"] == host.promotes()[0]["id"] and summary[host.name]["reasons"], summary
        assert summary[host.name]["levels"], summary  # the change at each concurrency level
    for host in (h4, h5):
        assert summary[host.name] == {"result": "skipped"}, summary
    assert "the rollout stops here" in out and "gpu-2 was rejected" in out and "gpu-3 was rejected" in out


def test_an_unreachable_host_mid_rollout_undoes_the_promoted_ones_and_says_so(fleet: Fleet, keys: Path):
    h1, h2, *rest = fleet.hosts
    lonely = start_sshd(h2.sshd.box, keys, unit="fleet-sshd-gpu-2.service")  # gpu-2's own way in
    try:
        h2_alone = FleetHost(h2.name, h2.dep, h2.unit, h2.port, lonely, h2.cli)
        h1.add_profile("next", FASTER)
        for host in (h2, *rest):
            host.add_profile("next", FASTER)
        proc = fleet.start("-e", "profile=next", "-e", "rollback_promoted=true", "-e", '{"fleet_batches": [1]}',
                           hosts=[h1, h2_alone, *rest])
        # gpu-2's sshd goes while gpu-1 promotes (after the pre-flight reached every host)
        wait_for("gpu-1 restarts into its candidate", h1.promoting, 120)
        lonely.stop()
        out, _ = proc.communicate(timeout=540)
    finally:
        lonely.stop()
    summary = fleet.summary()
    assert proc.returncode != 0, out
    assert [(r["kind"], r["result"]) for r in h1.releases()][-2:][0] == ("promote", "kept"), h1.releases()
    assert [r["kind"] for r in h1.releases()].count("rollback") == 1 and h1.installed_profile() == "baseline"
    assert h2.releases() == [] and h2.installed_profile() == "baseline"
    assert summary[h1.name]["result"] == "kept" and summary[h1.name]["undone"] == "rolled_back", summary
    assert summary[h2.name]["result"] == "unreachable", summary
    assert {summary[h.name]["result"] for h in rest} == {"skipped"}, summary


def test_a_profile_missing_on_a_later_host_stops_the_play_before_any_restart(fleet: Fleet):
    *first, last = hosts = fleet.hosts[:3]
    before = [h.unit_text() for h in hosts]
    for host in first:
        host.add_profile("next", FASTER)
    rc, out, summary = fleet.playbook("-e", "profile=next", hosts=hosts)
    assert rc == 2, out
    assert [h.unit_text() for h in hosts] == before
    assert all(h.promotes() == [] for h in hosts)
    assert summary[last.name]["result"] == "failed" and "next" in summary[last.name]["reasons"][0], summary
    assert {summary[h.name]["result"] for h in first} == {"skipped"}, summary
    assert f"pre-flight failed on {last.name}: nothing restarted" in out


def test_an_interrupted_rollout_leaves_its_summary(fleet: Fleet):
    h1, *rest = fleet.hosts
    for host in fleet.hosts:
        host.add_profile("next", FASTER)
    proc = fleet.start("-e", "profile=next", "-e", '{"fleet_batches": [1]}')
    wait_for("gpu-1 restarts into its candidate", h1.promoting, 120)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out
    summary = fleet.summary()
    assert set(summary) == set(HOSTS) and {s["result"] for s in summary.values()} <= WORDS, summary
    assert summary[h1.name]["result"] == "planned", summary  # in flight: `deployctl status` there says more
    assert all(h.promotes() == [] for h in rest)
    # what an operator does next: abort the promote left on gpu-1, which rolls it back
    if h1.promoting():
        h1.cli("abort", "-d", h1.dep)
    wait_for("gpu-1's promote ends", lambda: not h1.promoting(), 120)


def test_a_regression_in_the_bake_stops_the_rollout_and_undoes(fleet: Fleet):
    h1, *others = hosts = fleet.hosts[:3]
    for host in hosts:
        host.add_profile("next", FASTER)
    proc = fleet.start("-e", "profile=next", "-e", "bake_s=20", "-e", '{"fleet_batches": [1]}', hosts=hosts)
    wait_for("gpu-1 keeps its candidate", lambda: [r["result"] for r in h1.promotes()] == ["kept"], 240)
    # In the bake, the kept candidate gets slow on gpu-1 (as a real one may, under real traffic)
    with slowed(h1.sshd.box, h1.unit, h1.port, "SGLANG_SIM_THROUGHPUT_FACTOR=0.3"):
        out, _ = proc.communicate(timeout=400)
    assert proc.returncode == 2, out
    summary = fleet.summary()
    assert summary[h1.name]["bake"] == "degraded" and summary[h1.name]["undone"] == "rolled_back", summary
    assert [r["kind"] for r in h1.releases()].count("rollback") == 1 and h1.installed_profile() == "baseline"
    assert all(h.releases() == [] for h in others) and {summary[h.name]["result"] for h in others} == {"skipped"}
    assert "gpu-1 was degraded in the bake" in out


def test_check_mode_changes_nothing(fleet: Fleet):
    hosts = fleet.hosts[:3]
    before = [(h.installed_profile(), h.unit_text()) for h in hosts]
    rc, out, summary = fleet.playbook("-e", "profile=candidate-forced-fusion", "--check", hosts=hosts)
    assert rc == 0, out
    assert [(h.installed_profile(), h.unit_text()) for h in hosts] == before
    assert all(h.promotes() == [] for h in hosts)
    assert {s["result"] for s in summary.values()} == {"planned"}, summary
    assert all(s["would_restart"] for s in summary.values()), summary  # --dry-run: each host would restart


def test_a_host_deployctl_does_not_know_fails_before_anything_restarts(fleet: Fleet):
    a, b = fleet.hosts[:2]
    # gpu-9 reaches a's deployment, whose deployctl inventory runs it on gpu-1
    stranger = FleetHost("gpu-9", a.dep, a.unit, a.port, a.sshd, a.cli)
    rc, out, summary = fleet.playbook("-e", "profile=faster", hosts=[stranger, b])
    assert rc == 2, out
    assert f"runs {a.dep} on 'gpu-1', not on 'gpu-9'" in out, out
    assert a.promotes() == [] and b.promotes() == [], "no host promoted"
    assert summary["gpu-9"]["result"] == "failed" and summary[b.name]["result"] == "skipped", summary


# --- draining through SGLang's real router (sglang-router, the test extra) ---

ROUTER = Path(sys.executable).parent / "sglang-router"


class Load(threading.Thread):
    """Requests through the router, one after another, until stopped: how many answered, how many failed."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.ok, self.errors, self.halt = url, 0, [], threading.Event()

    def run(self) -> None:
        body = json.dumps({"text": "hello", "sampling_params": {"max_new_tokens": 4}}).encode()
        while not self.halt.is_set():
            request = urllib.request.Request(f"{self.url}/generate", data=body,
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as resp:
                    resp.read()
                    self.ok += 1
            except OSError as exc:
                self.errors.append(repr(exc))
            time.sleep(0.05)


def router_workers(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/workers", timeout=10) as resp:
        return sorted(w["url"] for w in json.loads(resp.read())["workers"])


@pytest.mark.skipif(not ROUTER.exists() and os.environ.get("CI") != "true",  # CI installs the extra: never skip there
                    reason="sglang-router is not installed (the test extra)")
def test_a_host_drained_through_sglangs_router_restarts_without_a_failed_request(fleet: Fleet):
    h1, h2 = fleet.hosts[:2]
    port = free_port()
    workers = [f"http://127.0.0.1:{h.port}" for h in (h1, h2)]
    # No retries: a request the router sent to a restarting worker fails here instead of being retried
    # elsewhere, so a missing drain shows as errors.
    router = subprocess.Popen([str(ROUTER), "launch", "--host", "127.0.0.1", "--port", str(port), "--worker-urls",
                               *workers, "--policy", "round_robin", "--disable-retries", "--log-level", "warn",
                               "--prometheus-port", str(free_port())],  # its default, 29000, may be taken
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    load = Load(url)
    try:
        wait_for("the router lists both workers", lambda: _listed(url) == sorted(workers), 60)
        load.start()
        wait_for("requests go through the router", lambda: load.ok >= 5, 60)
        rc, out, summary = fleet.playbook("-e", "profile=faster", "-e", f"router_url={url}", "-e", "router_drain_s=1",
                                          hosts=[h1], host_vars={"router_worker_url": "http://127.0.0.1:{port}"})
        served_during = load.ok
        back = _listed(url)
    finally:
        load.halt.set()
        if load.is_alive():
            load.join(timeout=60)
        router.terminate()
        router.wait(timeout=30)
    assert rc == 0, out
    assert summary[h1.name]["result"] == "kept" and h1.installed_profile() == "faster", summary
    assert load.errors == [], load.errors[:5]
    assert served_during >= 20, served_during  # the load ran through the whole rollout
    assert back == sorted(workers), back  # gpu-1 serves through the router again


def _listed(url: str) -> list[str]:
    try:
        return router_workers(url)
    except OSError:
        return []


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


@pytest.mark.parametrize("module", ["deployctl_promote", "deployctl_rollback", "deployctl_facts", "deployctl_watch",
                                    "router_worker"])
def test_each_module_documents_itself(module: str):
    # What validate-modules would check first, offline: the DOCUMENTATION, EXAMPLES and RETURN parse.
    done = subprocess.run([_tool("ansible-doc"), "--json", f"deployctl.sglang.{module}"], cwd=REPO / "ansible",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)[f"deployctl.sglang.{module}"]
    assert doc["doc"]["options"] and doc["examples"] and doc["return"]
