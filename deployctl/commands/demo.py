"""deployctl demo: the whole product in about 40 s, on a throwaway systemd and the simulator."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from deployctl.errors import EnvironmentUnfit
from deployctl.shipped import shipped

NAME = "demo"
HELP = "run a promote end to end on a sandboxed systemd with the simulator (needs root)"
DESCRIPTION = """\
Boot a throwaway systemd (PID 1 of a private PID+mount namespace: nothing touches this host's units,
journal or /var/lib/deployctl), install the baseline of two simulated deployments from
inventory/demo.yaml (the incidents' hardware: 4 and 8 x RTX PRO 6000, SM120), then promote the two
changes of the incidents and watch deployctl reject them and roll back:

  1. Qwen3.5-122B + the two all-reduce fusion flags: max_running_requests 48 → 26 at startup, so the
     startup gate fails before any benchmark request;
  2. GLM-5-NVFP4 + forced all-reduce fusion (the patched SM120 gate): it serves, at about −87 %,
     so the judge fails it on the benchmark.

Then `deployctl history`, and the sandbox is torn down. The simulator runs time-scaled and the sweep is
small, so it all takes about 40 s.

examples:
  sudo ./scripts/demo                # bootstraps the venv, then runs `.venv/bin/deployctl demo`
  sudo ./scripts/demo --report-dir .   # and writes incident-a.html / incident-b.html here
"""

# Startup in a few seconds, throughput scaled ×10 (every ratio kept), a sweep of seconds per level.
DEMO_SIM = {"SGLANG_SIM_SPEED": "0.25", "SGLANG_SIM_TIME_SCALE": "10"}
DEMO_POLICY = {
    # max(4, 2 × C) requests per level; short requests so even the −87 % candidate takes seconds.
    "bench": {"concurrency": [1, 4, 16], "input_tokens": 128, "output_tokens": 64, "warmup_requests": 1},
    "judge": {"min_trials": 2, "max_trials": 3},
    "gates": {"startup_timeout_s": 60},
    "verify_concurrency": [1, 16],
}
STEPS = (
    ("qwen35-sim", "candidate", "incident A: two fusion flags on Qwen3.5 (tp 4, MTP)"),
    ("glm5-sim", "candidate-forced-fusion", "incident B: forced all-reduce fusion on GLM-5 (tp 8, no P2P)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-dir", metavar="DIR", default=None,
                        help="write the demo inventory here and keep it (default: a temporary directory)")
    parser.add_argument("--report-dir", metavar="DIR", default=None,
                        help="write each incident's HTML report here (incident-a.html, incident-b.html)")
    parser.add_argument("--inside", metavar="INVENTORY", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.inside:
        return _inside(Path(args.inside), args.report_dir)
    if os.geteuid() != 0:
        raise EnvironmentUnfit("the demo boots a sandboxed systemd, which needs root", hint="sudo ./scripts/demo")
    from deployctl.live.sandbox import Sandbox

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="deployctl-demo-", dir=args.keep_dir) as tmp:
        inventory = Path(tmp) / "demo-inventory.yaml"
        demo_inventory(inventory)
        _say(f"booting a throwaway systemd as PID 1 of a private namespace (inventory: {inventory})")
        with Sandbox.boot() as box:
            _say(f"sandbox up in {time.monotonic() - started:.1f} s (systemd pid {box.pid}); running the demo inside it")
            reports = ["--report-dir", str(Path(args.report_dir).resolve())] if args.report_dir else []
            done = subprocess.run(box.nsenter([sys.executable, "-m", "deployctl", "demo", "--inside", str(inventory), *reports]))
            _say("tearing the sandbox down")
    _say(f"demo finished in {time.monotonic() - started:.0f} s")
    return done.returncode


def demo_inventory(path: Path) -> dict[str, Any]:
    """inventory/demo.yaml with free ports, a time-scaled simulator and the demo's short sweep."""
    data = yaml.safe_load(shipped("inventory/demo.yaml").read_text())
    for dep in data["deployments"].values():
        dep["port"] = _free_port()
        dep["profiles"]["baseline"].setdefault("env", {}).update(DEMO_SIM)
    data["policy"] = DEMO_POLICY
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _inside(inventory: Path, report_dir: str | None = None) -> int:
    """Inside the sandbox: standard paths (unit dirs, journal, /var/lib/deployctl on a private tmpfs)."""
    os.environ["DEPLOYCTL_INVENTORY"] = str(inventory)
    codes = []
    for deployment in dict.fromkeys(d for d, _, _ in STEPS):
        _say(f"installing the baseline of {deployment} as its known-good unit")
        if _shell("restart", deployment, "--profile", "baseline") != 0:
            return 1
    for n, (deployment, profile, story) in enumerate(STEPS):
        _say(f"{story}")
        codes.append(_shell("promote", profile, "-d", deployment))
        if report_dir:
            _shell("report", str(_newest_release(deployment)), "-o", str(Path(report_dir) / f"incident-{'ab'[n]}.html"))
    _shell("history")
    expected = [10] * len(STEPS)
    _say("both candidates were rejected and rolled back, as they should be" if codes == expected
         else f"unexpected exit codes {codes} (expected {expected})")
    return 0 if codes == expected else 1


def _newest_release(deployment: str) -> int:
    from deployctl.adapters.ledger import Ledger, resolve_state_dir

    with Ledger.open(resolve_state_dir(None, os.environ)) as ledger:
        return ledger.history(deployment, 1)[0].id


def _shell(*args: str) -> int:
    print(f"\n$ deployctl {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "deployctl", *args]).returncode


def _say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
