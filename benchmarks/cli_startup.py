"""What a deployctl command costs before it does anything: start-up time and the heavy modules it imports.

Operators run `deployctl status`, `history` and `show` interactively over SSH and from cron, and the test
suite spawns the CLI hundreds of times, so every verb's start-up counts. Each case below is run as its
own process (the installed `deployctl` script, as an operator runs it) --runs times, the cases taken in
turn so that a burst of load from a neighbour falls on all of them alike; the median wall and CPU
(user + system, the figure to read on a shared, loaded machine) of each are printed. Two references are
measured in the same run: a bare interpreter (`python -c pass`) and `import deployctl` (the package
alone); what a command costs above the second is its own.

The read-only verbs run against a throwaway ledger made here with the project's own ledger code (two
releases of the example inventory's glm5), in a temporary state directory. Completion is argcomplete's
hook as bash calls it (`deployctl show -d <TAB>`: deployment names from the inventory and the ledger).

Then one more run of each case with PYTHONPROFILEIMPORTTIME=1 (`-X importtime`) lists which heavy
modules it imported. numpy, scipy and aiohttp should appear only under verbs that judge or measure
(none of the cases here): tests/cli/test_cli_imports.py fails CI when one does.

    .venv/bin/python benchmarks/cli_startup.py              # 7 runs of each case
    .venv/bin/python benchmarks/cli_startup.py --runs 15    # steadier medians on a busy machine
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from deployctl.adapters.ledger import Ledger  # noqa: E402

EXAMPLE = REPO / "inventory" / "example.yaml"
# The heavy third-party packages a start-up can pull in; the first three are the ones no read-only verb needs.
HEAVY = ("numpy", "scipy", "aiohttp", "matplotlib", "httpx", "pydantic", "dbus_fast", "jinja2", "rich")
TARGETS = HEAVY[:3]


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def cases(python: str, deployctl: str) -> list[Case]:
    inv = ("-i", str(EXAMPLE))
    line = "deployctl show -d "
    return [
        Case("python -c pass", (python, "-c", "pass")),
        Case("python -c 'import deployctl'", (python, "-c", "import deployctl")),
        Case("deployctl --version", (deployctl, "--version")),
        Case("deployctl --help", (deployctl, "--help")),
        Case("deployctl history", (deployctl, "history", *inv)),
        Case("deployctl history --json", (deployctl, "history", "--json", *inv)),
        Case("deployctl show 2", (deployctl, "show", "2", *inv)),
        Case("completion: show -d <TAB>", (deployctl,),
             (("_ARGCOMPLETE", "1"), ("COMP_LINE", line), ("COMP_POINT", str(len(line))),
              ("_ARGCOMPLETE_STDOUT_FILENAME", os.devnull), ("DEPLOYCTL_INVENTORY", str(EXAMPLE)))),
    ]


def make_ledger(state: Path) -> None:
    with Ledger.open(state) as ledger:
        for profile in ("baseline", "candidate"):
            ledger.begin_release(deployment="glm5", kind="promote", unit_name="sglang-glm5.service",
                                 unit_text="[Service]\nExecStart=/bin/true\n", unit_hash="0" * 64, who="root",
                                 profile=profile, finished=True, result="kept")


def run_once(case: Case, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is the child's user + system time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(case.argv, env={**env, **dict(case.env)}, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{case.name}: exit {done.returncode}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def imported(case: Case, env: dict[str, str]) -> list[str]:
    """The heavy top-level packages the case imported (from -X importtime's report on stderr)."""
    done = subprocess.run(case.argv, env={**env, **dict(case.env), "PYTHONPROFILEIMPORTTIME": "1"},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    names = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", done.stderr, flags=re.MULTILINE))
    return [h for h in HEAVY if h in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs of each case; the median is printed (default 7)")
    parser.add_argument("--deployctl", default=str(Path(sys.executable).parent / "deployctl"),
                        help="the deployctl script to time (default: the one beside this interpreter)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        state = Path(tmp) / "state"
        make_ledger(state)
        env = {**os.environ, "DEPLOYCTL_STATE_DIR": str(state), "NO_COLOR": "1"}
        env.pop("DEPLOYCTL_OPERATION", None)
        todo = cases(sys.executable, args.deployctl)
        times: dict[str, list[tuple[float, float]]] = {c.name: [] for c in todo}
        for _ in range(args.runs):
            for case in todo:
                times[case.name].append(run_once(case, env))
        found = {c.name: imported(c, env) for c in todo}
    print(f"deployctl start-up: median of {args.runs} runs each, {os.cpu_count()} CPUs "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"{'case':32} {'wall s':>7} {'CPU s':>7} {'CPU over import':>16}  heavy modules imported")
    base = statistics.median(cpu for _, cpu in times["python -c 'import deployctl'"])
    for case in todo:
        wall = statistics.median(w for w, _ in times[case.name])
        cpu = statistics.median(c for _, c in times[case.name])
        heavy = found[case.name]
        flagged = [f"{h}!" if h in TARGETS else h for h in heavy]
        over = f"{cpu - base:+.3f}" if case.argv[0] != sys.executable else ""
        print(f"{case.name:32} {wall:7.3f} {cpu:7.3f} {over:>16}  {', '.join(flagged) or '-'}")
    print(f"('!': {', '.join(TARGETS)} — none of these cases needs them)")


if __name__ == "__main__":
    main()
