"""The world the promote system tests share: the demo inventory on a fast simulator with a small policy,
and ``Cli``, deployctl run inside the sandbox where every path (unit dirs, journal) is the standard one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from support.clirun import free_port

from deployctl.sandbox import Sandbox

REPO = Path(__file__).resolve().parents[2]
FAST_SIM = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "20", "SGLANG_SIM_NOISE": "0.005"}
POLICY = {
    # Several waves per trial (the client shares 2 cores with the simulator), so a trial's throughput is steady enough for a neutral change to pass.
    "bench": {"concurrency": [2, 8], "input_tokens": 64, "output_tokens": 64, "requests_per_level": 16,
              "warmup_requests": 1},
    # Two cores shared with other work: a 10 % limit and up to 5 trials let a neutral change pass.
    # 3 baseline trials (not max_trials' 5): a steadier baseline for the neutral change, in little time.
    "judge": {"min_trials": 2, "max_trials": 5, "baseline_trials": 3, "limit_pct": 10},
    # A dozen probe prompts of a dozen tokens (eight in a canary watch): the output gate costs well under a second.
    "gates": {"startup_timeout_s": 8, "output": {"probes": 12, "max_new_tokens": 12, "watch_probes": 8}},
    "verify_concurrency": [2],
}

# POLICY with the product's default requests per level, max(4, 2 x C): two waves at each level. For worlds
# whose candidates are mostly regressions: POLICY's 16 (eight waves at C=2) make C=2 five of the 6.5 s of a
# forced-fusion trial (0.13 x the speed), and C=2's trials of four requests agree within 0.5 % on FAST_SIM.
TWO_WAVES_POLICY = {**POLICY, "bench": {k: v for k, v in POLICY["bench"].items() if k != "requests_per_level"}}


def make_inventory(path: Path, policy: dict[str, Any] = POLICY) -> dict[str, Any]:
    data = yaml.safe_load((REPO / "inventory" / "demo.yaml").read_text())
    for dep in data["deployments"].values():
        dep["port"] = free_port()
        dep["profiles"]["baseline"].setdefault("env", {}).update(FAST_SIM)
    glm5 = data["deployments"]["glm5-sim"]
    glm5["profiles"]["hangs"]["env"] = {"SGLANG_SIM_FAULT": "hang:load"}
    data["policy"] = policy
    path.write_text(yaml.safe_dump(data))
    return data


# Serves at a thousandth of the speed: its benchmark lasts long enough to kill the controller in it.
SLOW_PROFILE = {"extends": "baseline", "env": {"SGLANG_SIM_THROUGHPUT_FACTOR": "0.001"}}


def one_deployment(name: str, profiles: dict[str, Any] | None = None, policy: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """The demo inventory cut to deployment ``name`` and its host, on the fast simulator and a free port,
    with ``profiles`` added and ``policy`` laid over the small one."""
    data = yaml.safe_load((REPO / "inventory" / "demo.yaml").read_text())
    dep = data["deployments"][name]
    data["deployments"] = {name: dep}
    data["hosts"] = {dep["host"]: data["hosts"][dep["host"]]}
    dep["port"] = free_port()
    dep["profiles"]["baseline"].setdefault("env", {}).update(FAST_SIM)
    dep["profiles"].update(profiles or {})
    data["policy"] = {**POLICY, **(policy or {})}
    return data


class Cli:
    """``deployctl`` run inside the sandbox, where every path (unit dirs, journal) is the standard one."""

    def __init__(self, box: Sandbox, inventory: Path, state_dir: Path) -> None:
        self.box, self.inventory, self.state_dir = box, inventory, state_dir
        self.started: list[subprocess.Popen[str]] = []

    def argv(self, *args: str) -> list[str]:
        return self.box.nsenter([sys.executable, "-m", "deployctl", *args])

    def env(self) -> dict[str, str]:
        return {"DEPLOYCTL_INVENTORY": str(self.inventory), "DEPLOYCTL_STATE_DIR": str(self.state_dir),
                "PYTHONPATH": str(REPO), "NO_COLOR": "1"}

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.box.run([sys.executable, "-m", "deployctl", *args], env=self.env(), timeout=timeout)

    def start(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """The verb in the background (``env`` added to its environment); its output goes to a file beside
        the state dir (a pipe nobody reads could fill and stall it). ``stop_started`` ends what a failed test
        left running."""
        log = self.state_dir.parent / f"started-{len(self.started)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(self.argv(*args), env={**os.environ, **self.env(), **(env or {})}, text=True,
                                    stdout=out, stderr=subprocess.STDOUT)
        proc.log_path = log  # type: ignore[attr-defined]  # what output() reads
        self.started.append(proc)
        return proc

    def output(self, proc: subprocess.Popen[str], timeout: float = 90) -> str:
        """Wait for a verb started with ``start`` and return what it printed (stdout and stderr, in order)."""
        proc.wait(timeout=timeout)
        return proc.log_path.read_text()  # type: ignore[attr-defined]

    def stop_started(self, deployments: list[str]) -> None:
        """Abort, as an operator would, any promote a test started and left running (it failed midway),
        so the next test finds no lock held and no trial installed."""
        if all(proc.poll() is not None for proc in self.started):
            return
        for name in deployments:
            self("abort", "-d", name)
        for proc in self.started:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def json(self, *args: str, expect: int = 0) -> Any:
        """The verb's --json document, once its exit code is ``expect``."""
        done = self(*args, "--json")
        assert done.returncode == expect, f"exit {done.returncode}, expected {expect}\n{done.stdout}{done.stderr}"
        return json.loads(done.stdout)


def healthy(port: int) -> bool:
    """The server on ``port`` answers /health with 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def installed_profile(box: Sandbox, unit: str) -> str:
    """The profile of the unit in /etc (asserting no trial is left in /run)."""
    text = (box.unit_dir / unit).read_text()
    assert not (box.runtime_unit_dir / unit).exists(), "a trial was left behind"
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("X-Deployctl-Profile="))


def one_deployment_site(sandbox: Sandbox, root: Path, data: dict[str, Any], deployment: str
                        ) -> Iterator[tuple[Sandbox, Path, dict[str, Any]]]:
    """A module's ``site`` fixture body: ``data`` (``one_deployment``) as ``root``/inventory.yaml, and
    ``deployment`` stopped once the module is done."""
    (root / "inventory.yaml").write_text(yaml.safe_dump(data))
    yield sandbox, root / "inventory.yaml", data
    sandbox.run(["systemctl", "stop", data["deployments"][deployment]["unit"]])


def one_deployment_world(site: tuple[Sandbox, Path, dict[str, Any]], state_dir: Path, deployment: str
                         ) -> Iterator[tuple[Cli, dict[str, Any]]]:
    """A ``world`` fixture's body for a one-deployment ``site`` (sandbox, inventory, data): a fresh ledger in
    ``state_dir`` and ``deployment`` serving its baseline, installed and healthy (restarted only where not);
    whatever the test started and left running is aborted after it."""
    box, inventory, data = site
    cli = Cli(box, inventory, state_dir)
    dep = data["deployments"][deployment]
    if not (box.unit_dir / dep["unit"]).exists() or installed_profile(box, dep["unit"]) != "baseline" \
            or not healthy(dep["port"]):
        done = cli("restart", deployment, "--profile", "baseline")
        assert done.returncode == 0, done.stdout + done.stderr
    yield cli, dep
    cli.stop_started([deployment])


def slow_down(box: Sandbox, unit: str, port: int, *env: str) -> None:
    """A runtime drop-in setting ``env`` on ``unit`` (its unit file and release stay the same), a restart, and
    the server answering again."""
    dropin = box.runtime_unit_dir / f"{unit}.d"
    dropin.mkdir(parents=True, exist_ok=True)
    (dropin / "slow.conf").write_text("[Service]\n" + "".join(f"Environment={e}\n" for e in env))
    box.run(["systemctl", "daemon-reload"])
    box.run(["systemctl", "restart", unit])
    wait_for("the slowed server comes back", lambda: healthy(port), 60)


@contextmanager
def slowed(box: Sandbox, unit: str, port: int, *env: str) -> Iterator[None]:
    """``slow_down`` for the ``with`` block; then the drop-in goes and the unit restarts as it was."""
    try:
        slow_down(box, unit, port, *env)
        yield
    finally:
        (box.runtime_unit_dir / f"{unit}.d" / "slow.conf").unlink(missing_ok=True)
        box.run(["systemctl", "daemon-reload"])
        box.run(["systemctl", "restart", unit])


def wait_for(what: str, check: Callable[[], Any], timeout_s: float) -> Any:
    """``check()``'s first truthy answer, polled; the test fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.3)
    pytest.fail(f"{what}: not within {timeout_s:g} s")
