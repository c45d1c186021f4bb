"""Why the simulated Qwen3.5 fusion candidate (26 slots) trails the baseline (48) at C=32 and C=64.

Drives the simulator's own engine (deployctl.sim.engine.Engine, noise 0) with closed-loop clients:
fixed 1000-in/1000-out requests (ignore_eos, as deployctl's benchmark sends them), C = 1, 4, 16, 32, 64
with 4, 8, 32, 64, 128 requests. Prints aggregate output tok/s for 48 and 26 running requests, for the
shipped decode curve and for a curve that is flat from 26 to 48 running requests. Simulated time is
wall time x --scale; medians of --runs runs.

    .venv/bin/python benchmarks/sim_fusion_waves.py
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from deployctl.sim.engine import Engine, Request  # noqa: E402
from deployctl.sim.throughput import build  # noqa: E402
from deployctl.sim.world import world  # noqa: E402

LEVELS = ((1, 4), (4, 8), (16, 32), (32, 64), (64, 128))
INCIDENT_BASELINE = {1: 121.6, 4: 399.1, 16: 1213.5, 32: 1515.1, 64: 1582.5}
INCIDENT_CANDIDATE = {1: 121.9, 4: 410.8, 16: 1212.7, 32: 1509.2, 64: 1572.4}
# aggregate decode tok/s flat from 26 to 48 running requests (the "saturated" alternative)
FLAT = ((1, 124.5), (4, 412.0), (8, 700.0), (16, 1305.0), (24, 1590.0), (26, 1600.0), (48, 1620.0))


async def _level(perf, slots: int, concurrency: int, requests: int, scale: float) -> float:
    engine = Engine(perf, slots, 8192, scale)
    engine.start()
    left = requests

    async def client() -> int:
        nonlocal left
        tokens = 0
        while left > 0:
            left -= 1
            req = Request(prompt_tokens=1000, max_tokens=1000, stream=True)
            engine.submit(req)
            while not req.finished:
                await req.wait_change()
            tokens += req.generated
        return tokens

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(client() for _ in range(concurrency))))
    elapsed = (time.perf_counter() - start) * scale
    await engine.stop()
    return tokens / elapsed


def _table(perf, slots: int, runs: int, scale: float) -> dict[int, float]:
    return {c: statistics.median(asyncio.run(_level(perf, slots, c, n, scale)) for _ in range(runs)) for c, n in LEVELS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=50.0)
    args = parser.parse_args()
    model = world()["models"]["Qwen/Qwen3.5-122B-A10B"]
    shipped = build(model, {"SGLANG_SIM_NOISE": "0"}, 84, 600, cuda_graph=True, speculative=True)
    shipped = dataclasses.replace(shipped, drift_sigma=0.0)
    for name, perf in (("shipped curve", shipped), ("flat 26..48", dataclasses.replace(shipped, points=FLAT))):
        base, cand = _table(perf, 48, args.runs, args.scale), _table(perf, 26, args.runs, args.scale)
        print(f"{name}:  C | base tok/s (vs incident) | 26 slots tok/s (vs base) | incident candidate vs base")
        for c, _ in LEVELS:
            real = (INCIDENT_CANDIDATE[c] / INCIDENT_BASELINE[c] - 1) * 100
            print(f"  {c:3d} | {base[c]:7.1f} ({(base[c] / INCIDENT_BASELINE[c] - 1) * 100:+5.1f} %) | "
                  f"{cand[c]:7.1f} ({(cand[c] / base[c] - 1) * 100:+5.1f} %) | {real:+5.1f} %")


if __name__ == "__main__":
    main()
