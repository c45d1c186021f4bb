"""deployctl demo: the whole product in under a minute, on a throwaway systemd and the simulator."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

import yaml

from deployctl.adapters.ledger import resolve_state_dir
from deployctl.errors import EnvironmentUnfit, ExitCode, UsageError
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
small, so it all takes well under a minute.

With --keep DIR the demo leaves what it made in DIR, to explore afterwards without a GPU host: the
ledger (DIR/state), the inventory (DIR/demo-inventory.yaml) and each incident's HTML report
(DIR/incident-a.html, DIR/incident-b.html); it ends with the commands that read them.

examples:
  sudo deployctl demo                   # from any install (scripts/demo: the same from a checkout)
  sudo deployctl demo --keep ~/demo     # keep the ledger, inventory and reports; then `deployctl history …`
  sudo deployctl demo --report-dir .    # only the reports: incident-a.html / incident-b.html here
"""

# Startup in about a second, throughput scaled ×10 (every ratio within a deployment kept), a sweep of seconds
# per level. GLM-5's clock runs ×15: its −87 % candidate runs the whole sweep, the longest part of the demo. At
# ×20 its baseline (10k tok/s at C=16) lost up to 16 % to a loaded 2-core box and the change read −84…−86 %
# (×15: −86…−86.4 %, ×10: −86…−87 %); Qwen3.5's candidate never benchmarks, so its clock stays at ×10.
DEMO_SIM = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "10"}
DEMO_TIME_SCALE = {"glm5-sim": "15"}
DEMO_POLICY = {
    # max(4, 2 × C) requests per level; short requests so even the −87 % candidate takes seconds.
    "bench": {"concurrency": [1, 4, 16], "input_tokens": 128, "output_tokens": 64, "warmup_requests": 1},
    "judge": {"min_trials": 2, "max_trials": 3},
    # Neither incident reaches the output gate (it judges a candidate that passed), but each baseline records
    # its reference answers first: a dozen short probes instead of all 304 × 24 tokens, twice, per promote.
    "gates": {"startup_timeout_s": 60, "output": {"probes": 12, "max_new_tokens": 12}},
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
            # nsenter ignores SIGINT, so it stays to hand back the exit code of the demo inside, which takes it.
            code, interrupted = _run_to_its_end(
                box.nsenter([sys.executable, "-m", "deployctl", "demo", "--inside", str(inventory), *extra]),
                ignore_sigint=True)
            # The demo inside exits 130 on a SIGINT that this process ignored (started in the background).
            interrupted = interrupted or code == ExitCode.INTERRUPTED
            if not interrupted:
                _say("tearing the sandbox down")
    if interrupted:
        _say("interrupted: the step under way ended first (a promote rolls back), and the sandbox is torn down")
        return code if code == ExitCode.ROLLBACK_FAILED else ExitCode.INTERRUPTED
    _say(f"demo finished in {time.monotonic() - started:.0f} s")
    if keep is not None and (keep / "state").is_dir():
        print("\n".join(explore_lines(keep, inventory, report_dir)), flush=True)
    return code


def explore_lines(keep: Path, inventory: Path, report_dir: Path | None) -> list[str]:
    """What --keep left, and the commands that read it (with the release ids of this run)."""
    from deployctl.adapters.ledger import Ledger

    with Ledger.open(keep / "state") as ledger:
        releases = ledger.history(None, 20)
    env = f"export DEPLOYCTL_STATE_DIR={shlex.quote(str(keep / 'state'))} DEPLOYCTL_INVENTORY={shlex.quote(str(inventory))}"
    me = deployctl_command()
    lines = [f"\n==> kept in {keep}: the ledger (state/), the inventory ({inventory.name})"
             + (f", the HTML reports ({report_dir}/incident-a.html, incident-b.html)" if report_dir else ""),
             "explore them (no GPU, no systemd needed):", f"  {env}", f"  {me} history"]
    promoted = [r for r in reversed(releases) if (r.deployment, r.profile) in {(d, p) for d, p, _ in STEPS}]
    for release in promoted:
        lines.append(f"  {me} show {release.id}    # {release.deployment} {release.profile}: what happened, the evidence")
    if promoted:
        lines.append(f"  {me} report {promoted[0].id} -o report.html    # the HTML report again, from the ledger")
    return lines


def deployctl_command() -> str:
    """How to run this deployctl again: ``deployctl`` when that is the one on PATH, else its path (scripts/demo
    runs the checkout's .venv/bin/deployctl, which a shell does not find by name)."""
    here = Path(sys.executable).parent / "deployctl"
    if not here.exists():
        return "deployctl"
    found = shutil.which("deployctl")
    return "deployctl" if found is not None and Path(found).resolve() == here.resolve() else shlex.quote(str(here))


def demo_inventory(path: Path) -> dict[str, Any]:
    """inventory/demo.yaml with free ports, a time-scaled simulator and the demo's short sweep."""
    data = yaml.safe_load(shipped("inventory/demo.yaml").read_text())
    for name, dep in data["deployments"].items():
        dep["port"] = _free_port()
        env = dep["profiles"]["baseline"].setdefault("env", {})
        env.update(DEMO_SIM)
        if name in DEMO_TIME_SCALE:
            env["SGLANG_SIM_TIME_SCALE"] = DEMO_TIME_SCALE[name]
    data["policy"] = DEMO_POLICY
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return data


def _inside(inventory: Path, report_dir: str | None = None, keep: Path | None = None) -> int:
    """Inside the sandbox: standard paths (unit dirs, journal, /var/lib/deployctl on a private tmpfs)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)  # nsenter passed SIGINT on ignored: Ctrl-C is ours
    os.environ["DEPLOYCTL_INVENTORY"] = str(inventory)
    codes = []
    stopped: _Interrupted | None = None
    try:
        deployments = list(dict.fromkeys(d for d, _, _ in STEPS))
        _say(f"installing the baselines of {' and '.join(deployments)} as their known-good units, both at once")
        if any(_shells_at_once([("restart", d, "--profile", "baseline") for d in deployments])):
            return 1
        for n, (deployment, profile, story) in enumerate(STEPS):
            _say(f"{story}")
            codes.append(_shell("promote", profile, "-d", deployment))
            if report_dir:
                _shell("report", str(_newest_release(deployment)), "-o", str(Path(report_dir) / f"incident-{'ab'[n]}.html"))
        _shell("history")
    except _Interrupted as stop:
        stopped = stop  # the ledger still says what the interrupted step did: keep it
    except KeyboardInterrupt:  # between two steps: none was under way
        stopped = _Interrupted(ExitCode.INTERRUPTED)
    if keep is not None:  # the ledger lives on the sandbox's tmpfs: copy it out, every deployctl in here has exited
        shutil.copytree(resolve_state_dir(None, os.environ), keep / "state")
        (keep / "state").chmod(0o700)  # as a state directory is (the copy took the tmpfs root's 1777)
    if stopped is not None:
        return stopped.code if stopped.code == ExitCode.ROLLBACK_FAILED else ExitCode.INTERRUPTED
    expected = [10] * len(STEPS)
    _say("both candidates were rejected and rolled back, as they should be" if codes == expected
         else f"unexpected exit codes {codes} (expected {expected})")
    return 0 if codes == expected else 1


def _newest_release(deployment: str) -> int:
    from deployctl.adapters.ledger import Ledger

    with Ledger.open(resolve_state_dir(None, os.environ)) as ledger:
        return ledger.history(deployment, 1)[0].id


class _Interrupted(Exception):
    """Ctrl-C reached a step of the demo, which has ended (with ``code``): the steps after it are skipped."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _shell(*args: str) -> int:
    print(f"\n$ deployctl {' '.join(args)}", flush=True)
    code, interrupted = _run_to_its_end([sys.executable, "-m", "deployctl", *args])
    if interrupted:
        raise _Interrupted(code)
    return code


def _shells_at_once(commands: Sequence[Sequence[str]]) -> list[int]:
    """Commands that do not depend on each other, run at the same time (each pays its own start-up); each
    one's output is printed whole under its command line once all have ended. Their exit codes."""
    with ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in commands]
        procs = [subprocess.Popen([sys.executable, "-m", "deployctl", *args], stdout=log, stderr=subprocess.STDOUT)
                 for args, log in zip(commands, logs)]
        codes, interrupted = _wait_through_ctrl_c(procs)
        for args, log in zip(commands, logs):
            log.seek(0)
            print(f"\n$ deployctl {' '.join(args)}\n{log.read()}", end="", flush=True)
    if interrupted:
        raise _Interrupted(ExitCode.INTERRUPTED)
    return codes


def _run_to_its_end(argv: Sequence[str], *, ignore_sigint: bool = False) -> tuple[int, bool]:
    """Run ``argv`` and wait for it even through Ctrl-C: (its exit code, whether Ctrl-C came)."""
    with subprocess.Popen(argv, preexec_fn=_ignore_sigint if ignore_sigint else None) as proc:
        codes, interrupted = _wait_through_ctrl_c([proc])
    return codes[0], interrupted


def _wait_through_ctrl_c(procs: Sequence[subprocess.Popen[Any]]) -> tuple[list[int], bool]:
    """Wait for every process even through Ctrl-C: (their exit codes, whether Ctrl-C came).

    A terminal sends SIGINT to its whole foreground process group, so the commands got it too and end their
    own way: a promote rolls back first. ``subprocess.run`` would kill them a quarter of a second later.
    """
    interrupted = False
    codes = []
    for proc in procs:
        while True:
            try:
                codes.append(proc.wait())
                break
            except KeyboardInterrupt:
                interrupted = True
    return codes, interrupted


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
