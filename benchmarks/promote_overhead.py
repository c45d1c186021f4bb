"""The controller's own time per promote: wall time outside server startup and benchmark traffic.

Boots a sandboxed systemd (root), installs the simulated deployments of inventory/demo.yaml (time-scaled
simulator, tiny sweep), then runs ``deployctl promote --json`` inside the sandbox several times on two
paths: a neutral change that is kept (glm5-sim, alternating neutral ↔ baseline so every run changes
something) and a candidate rejected by the startup gate and rolled back (qwen35-sim). For each run:

- in-process overhead = the promote's wall time − time waiting for the server to be ready − benchmark
  traffic (the runner measures both around the adapter calls; reported as ``controller_overhead``);
- whole-command overhead = the same, from the outside: process start, imports, inventory, D-Bus
  connection and report included.

Target: < 2 s. Prints medians (and min/max) over the runs.

    sudo .venv/bin/python benchmarks/promote_overhead.py --runs 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from deployctl.commands.demo import demo_inventory
from deployctl.sandbox import Sandbox

TINY_POLICY = {
    "bench": {"concurrency": [2, 8], "input_tokens": 64, "output_tokens": 64, "requests_per_level": 16,
              "warmup_requests": 1},
    # Traffic is not overhead: 2 baseline trials (not max_trials) keep each run short.
    "judge": {"min_trials": 2, "max_trials": 5, "baseline_trials": 2, "limit_pct": 10},
    "gates": {"startup_timeout_s": 30},
    "verify_concurrency": [2],
}
FAST_SIM = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "20", "SGLANG_SIM_NOISE": "0.005"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="promotes per path (default 3)")
    parser.add_argument("--phases", action="store_true", help="also print the median own time of each phase")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deployctl-overhead-") as tmp:
        inventory = Path(tmp) / "inventory.yaml"
        data = demo_inventory(inventory)
        for dep in data["deployments"].values():
            dep["profiles"]["baseline"]["env"].update(FAST_SIM)
        data["policy"] = TINY_POLICY
        inventory.write_text(yaml.safe_dump(data, sort_keys=False))
        env = {"DEPLOYCTL_INVENTORY": str(inventory), "NO_COLOR": "1"}
        with Sandbox.boot() as box:
            for dep in ("glm5-sim", "qwen35-sim"):
                done = box.run([sys.executable, "-m", "deployctl", "restart", dep, "--profile", "baseline"],
                               env=env, timeout=120)
                if done.returncode != 0:
                    print(done.stdout, done.stderr, file=sys.stderr)
                    return 1
            paths = {"kept (glm5-sim neutral ↔ baseline)": [], "rejected + rolled back (qwen35-sim candidate)": []}
            live = "baseline"
            for _ in range(args.runs):
                profile = "neutral" if live == "baseline" else "baseline"
                run = _promote(box, env, profile, "glm5-sim")
                live = profile if run[3] == "kept" else live
                paths["kept (glm5-sim neutral ↔ baseline)"].append(run)
                paths["rejected + rolled back (qwen35-sim candidate)"].append(_promote(box, env, "candidate", "qwen35-sim"))
    print(f"controller overhead per promote, {args.runs} runs per path (target < 2 s)")
    print(f"{'path':<48} {'in-process s (median, min–max)':>32} {'whole command s':>22} {'wall s':>8}  results")
    for name, runs in paths.items():
        inner = [r[0] for r in runs]
        outer = [r[1] for r in runs]
        wall = [r[2] for r in runs]
        results = ",".join(r[3] for r in runs)
        print(f"{name:<48} {_med(inner):>32} {_med(outer):>22} {statistics.median(wall):>8.1f}  {results}")
        if args.phases:
            phases = sorted({k for r in runs for k in r[4] if k.startswith("own:")})
            print("    own time per phase, median s: " + ", ".join(
                f"{k[4:]} {statistics.median(r[4].get(k, 0.0) for r in runs):.2f}" for k in phases))
    return 0


def _promote(box: Sandbox, env: dict[str, str], profile: str, deployment: str) -> tuple[float, float, float, str, dict]:
    started = time.monotonic()
    done = box.run([sys.executable, "-m", "deployctl", "promote", profile, "-d", deployment, "--json"],
                   env=env, timeout=300)
    outside = time.monotonic() - started
    try:
        out = json.loads(done.stdout)
        timings = out["timings_s"]
    except (ValueError, KeyError):
        raise SystemExit(f"promote {profile} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    excluded = timings.get("startup_wait", 0.0) + timings.get("traffic", 0.0)
    return timings["controller_overhead"], outside - excluded, outside, out["result"], timings


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


if __name__ == "__main__":
    sys.exit(main())
