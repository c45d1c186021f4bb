"""Wall time of `deployctl demo`, end to end, and where it went.

Runs the demo N times (root: it boots its own sandboxed systemd) as an operator does, with its output in a
pipe, and prints each run's wall time, the time of each part (from the moment each line of the demo's
output arrived: boot, the baselines' installs, each incident's promote and its benchmark seconds as the
promote reports them, history, teardown), the load average before and after, and the median over the
runs. The first run warms the page cache (imports, the simulator); pass ``--warm-up 1`` to leave it out.

    sudo .venv/bin/python benchmarks/demo_time.py --runs 5 --warm-up 1
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

# The lines that start each part of the demo (its own "==>" lines and the commands it runs).
MARKS = (
    ("boot", "==> booting a throwaway systemd"),
    ("baselines", "==> installing the baseline"),
    ("incident A", "==> incident A:"),
    ("incident B", "==> incident B:"),
    ("history", "$ deployctl history"),
    ("teardown", "==> tearing the sandbox down"),
)
BENCH_TIME = re.compile(r"benchmark time (\d+) s")


@dataclass
class Run:
    wall_s: float
    code: int
    parts: dict[str, float] = field(default_factory=dict)
    bench_s: list[int] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)


def run_demo() -> Run:
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    firsts: dict[str, float] = {}
    bench: list[int] = []
    proc = subprocess.Popen([sys.executable, "-m", "deployctl", "demo"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic() - started
        for name, mark in MARKS:
            if line.startswith(mark) and name not in firsts:
                firsts[name] = now
        if (found := BENCH_TIME.search(line)) is not None:
            bench.append(int(found.group(1)))
    code = proc.wait()
    wall = time.monotonic() - started
    names = [name for name, _ in MARKS if name in firsts]
    parts = {name: (firsts[names[i + 1]] if i + 1 < len(names) else wall) - firsts[name] for i, name in enumerate(names)}
    return Run(wall, code, parts, bench, (load_before, os.getloadavg()[0]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="demos measured (default 5)")
    parser.add_argument("--warm-up", type=int, default=0, help="demos run first and not counted (default 0)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("the demo boots a sandboxed systemd: run this as root", file=sys.stderr)
        return 5
    for _ in range(args.warm_up):
        run_demo()
    runs = []
    for n in range(args.runs):
        run = run_demo()
        runs.append(run)
        parts = ", ".join(f"{name} {s:.1f}" for name, s in run.parts.items())
        print(f"run {n + 1}: {run.wall_s:.1f} s (exit {run.code}; load {run.load[0]:.1f} → {run.load[1]:.1f}); "
              f"{parts}; benchmark seconds per promote {run.bench_s}", flush=True)
    failed = [r for r in runs if r.code != 0]
    print(f"median of {len(runs)}: {statistics.median(r.wall_s for r in runs):.1f} s "
          f"(min {min(r.wall_s for r in runs):.1f}, max {max(r.wall_s for r in runs):.1f})"
          + (f"; {len(failed)} run(s) did not exit 0" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
