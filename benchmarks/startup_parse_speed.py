"""How fast the startup parser reads a big log, and whether its memory stays flat while it is fed.

The log is built by repeating the shared fixture logs (tests/data/logs, every format: \\r meters,
glued records, 11 KB dumps, tracebacks, argparse usage blocks) up to --mb megabytes, split on '\\n'
only, and held in memory so that only parsing is timed. Prints the median of --runs runs, then one
traced run (tracemalloc) with the traced memory at 10 %, 50 % and 100 % of the feed.

    .venv/bin/python benchmarks/startup_parse_speed.py            # 50 MB, 5 runs
    .venv/bin/python benchmarks/startup_parse_speed.py --mb 5 --runs 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from deployctl.startup.parser import StartupParser  # noqa: E402

SHARED = ("01-", "02-", "03-", "04-", "06-", "08-", "10-")


def build_lines(megabytes: float) -> tuple[list[str], int]:
    logs = sorted(p for p in (REPO / "tests" / "data" / "logs").glob("*.log") if p.name.startswith(SHARED))
    unit = [line for p in logs for line in p.read_bytes().decode("utf-8").split("\n")]
    unit_bytes = sum(len(line.encode()) + 1 for line in unit)
    copies = max(1, int(megabytes * 1024 * 1024 / unit_bytes))
    return unit * copies, unit_bytes * copies


def parse(lines: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds; the CPU figure is the one to read on a shared, loaded machine."""
    parser = StartupParser()
    feed = parser.feed
    start, cpu = time.perf_counter(), time.process_time()
    for line in lines:
        feed(line)
    parser.report()
    return time.perf_counter() - start, time.process_time() - cpu


def traced(lines: list[str]) -> list[tuple[int, float, float]]:
    marks = {len(lines) // 10: 10, len(lines) // 2: 50, len(lines) - 1: 100}
    out = []
    tracemalloc.start()
    parser = StartupParser()
    for index, line in enumerate(lines):
        parser.feed(line)
        if index in marks:
            parser.report()
            current, peak = tracemalloc.get_traced_memory()
            out.append((marks[index], current / 2**20, peak / 2**20))
    tracemalloc.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-trace", action="store_true", help="skip the tracemalloc run")
    args = ap.parse_args()
    lines, size = build_lines(args.mb)
    runs = [parse(lines) for _ in range(args.runs)]
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    median = statistics.median(walls)
    print(f"log: {size / 2**20:.1f} MiB, {len(lines):,} lines (shared fixtures repeated)")
    print(f"parse wall: median {median:.2f} s over {args.runs} runs (min {min(walls):.2f}, max {max(walls):.2f}) "
          f"= {size / 2**20 / median:.0f} MiB/s, {len(lines) / median / 1e3:.0f} k lines/s")
    print(f"parse CPU:  median {statistics.median(cpus):.2f} s (min {min(cpus):.2f}, max {max(cpus):.2f})")
    if not args.no_trace:
        for pct, current, peak in traced(lines):
            print(f"traced memory after {pct:3d}% of the feed: current {current:.2f} MiB, peak {peak:.2f} MiB")


if __name__ == "__main__":
    main()
