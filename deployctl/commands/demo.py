"""deployctl demo: the whole product in about 40 s, on a throwaway systemd and the simulator."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from deployctl.adapters.ledger import resolve_state_dir
from deployctl.errors import EnvironmentUnfit, UsageError
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

With --keep DIR the demo leaves what it made in DIR, to explore afterwards without a GPU host: the
ledger (DIR/state), the inventory (DIR/demo-inventory.yaml) and each incident's HTML report
(DIR/incident-a.html, DIR/incident-b.html); it ends with the commands that read them.

examples:
  sudo deployctl demo                   # from any install (scripts/demo: the same from a checkout)
  sudo deployctl demo --keep ~/demo     # keep the ledger, inventory and reports; then `deployctl history …`
  sudo deployctl demo --report-dir .    # only the reports: incident-a.html / incident-b.html here
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
    parser.add_argument("--keep", "--keep-dir", metavar="DIR", default=None, dest="keep",
                        help="leave the ledger, the inventory and the HTML reports in DIR, and say how to explore "
                             "them (default: a temporary directory, removed)")
    parser.add_argument("--report-dir", metavar="DIR", default=None,
                        help="write each incident's HTML report here (incident-a.html, incident-b.html; "
                             "default with --keep: DIR)")
    parser.add_argument("--inside", metavar="INVENTORY", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    if args.inside:
        return _inside(Path(args.inside), args.report_dir, Path(args.keep) if args.keep else None)
    if os.geteuid() != 0:
        raise EnvironmentUnfit("the demo boots a sandboxed systemd, which needs root", hint="sudo deployctl demo")
    from deployctl.sandbox import Sandbox

    started = time.monotonic()
    keep = Path(args.keep).resolve() if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        if (keep / "state").exists():
            raise UsageError(f"{keep} already holds a demo's ledger ({keep / 'state'})",
                             hint="pass another directory, or remove that one first")
    report_dir = Path(args.report_dir).resolve() if args.report_dir else keep
    with tempfile.TemporaryDirectory(prefix="deployctl-demo-") as tmp:
        inventory = (keep or Path(tmp)) / "demo-inventory.yaml"
        demo_inventory(inventory)
        _say(f"booting a throwaway systemd as PID 1 of a private namespace (inventory: {inventory})")
        with Sandbox.boot() as box:
            _say(f"sandbox up in {time.monotonic() - started:.1f} s (systemd pid {box.pid}); running the demo inside it")
            extra = ["--report-dir", str(report_dir)] if report_dir else []
            extra += ["--keep", str(keep)] if keep else []
            done = subprocess.run(box.nsenter([sys.executable, "-m", "deployctl", "demo", "--inside", str(inventory), *extra]))
            _say("tearing the sandbox down")
    _say(f"demo finished in {time.monotonic() - started:.0f} s")
    if keep is not None and (keep / "state").is_dir():
        print("\n".join(explore_lines(keep, inventory, report_dir)), flush=True)
    return done.returncode


def explore_lines(keep: Path, inventory: Path, report_dir: Path | None) -> list[str]:
    """What --keep left, and the commands that read it (with the release ids of this run)."""
    from deployctl.adapters.ledger import Ledger

    with Ledger.open(keep / "state") as ledger:
        releases = ledger.history(None, 20)
    env = f"export DEPLOYCTL_STATE_DIR={shlex.quote(str(keep / 'state'))} DEPLOYCTL_INVENTORY={shlex.quote(str(inventory))}"
    lines = [f"\n==> kept in {keep}: the ledger (state/), the inventory ({inventory.name})"
             + (f", the HTML reports ({report_dir}/incident-a.html, incident-b.html)" if report_dir else ""),
             "explore them (no GPU, no systemd needed):", f"  {env}", "  deployctl history"]
    promoted = [r for r in reversed(releases) if (r.deployment, r.profile) in {(d, p) for d, p, _ in STEPS}]
    for release in promoted:
        lines.append(f"  deployctl show {release.id}    # {release.deployment} {release.profile}: what happened, the evidence")
    if promoted:
        lines.append(f"  deployctl report {promoted[0].id} -o report.html    # the HTML report again, from the ledger")
    return lines


def demo_inventory(path: Path) -> dict[str, Any]:
    """inventory/demo.yaml with free ports, a time-scaled simulator and the demo's short sweep."""
    data = yaml.safe_load(shipped("inventory/demo.yaml").read_text())
    for dep in data["deployments"].values():
        dep["port"] = _free_port()
        dep["profiles"]["baseline"].setdefault("env", {}).update(DEMO_SIM)
    data["policy"] = DEMO_POLICY
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _inside(inventory: Path, report_dir: str | None = None, keep: Path | None = None) -> int:
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
    if keep is not None:  # the ledger lives on the sandbox's tmpfs: copy it out, every deployctl in here has exited
        shutil.copytree(resolve_state_dir(None, os.environ), keep / "state")
        (keep / "state").chmod(0o700)  # as a state directory is (the copy took the tmpfs root's 1777)
    expected = [10] * len(STEPS)
    _say("both candidates were rejected and rolled back, as they should be" if codes == expected
         else f"unexpected exit codes {codes} (expected {expected})")
    return 0 if codes == expected else 1


def _newest_release(deployment: str) -> int:
    from deployctl.adapters.ledger import Ledger

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
