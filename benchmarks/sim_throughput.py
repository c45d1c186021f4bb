"""How many streamed tokens/s the simulator sustains with its event loop on one core.

The simulator runs with SGLANG_SIM_TIME_SCALE high enough that its model never paces it, pinned to
one CPU (taskset when available); a tiny aiohttp client streams /v1/completions at each concurrency
and counts SSE chunks and tokens. Figures are raw wall-clock rates (not divided by the scale):
they are the ceiling above which the simulator, not the modelled GPU, would be the bottleneck.

    .venv/bin/python benchmarks/sim_throughput.py                 # C=64 and C=1024, 3 runs each
    .venv/bin/python benchmarks/sim_throughput.py --concurrency 64 --runs 5 --tokens 512
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from deployctl.sim.probe import launch, run_level, wait_ready  # noqa: E402

GLM = ("--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --trust-remote-code --tp 8 --mem-fraction-static 0.92 "
       "--max-running-requests 1024 --quantization modelopt_fp4 --attention-backend flashinfer "
       "--moe-runner-backend flashinfer_cutlass --disable-cuda-graph --disable-radix-cache").split()


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(url: str, pid: int, concurrency: int, tokens: int) -> tuple[float, float, float]:
    cpu0 = _cpu_seconds(pid)
    level = await run_level(url, concurrency, concurrency * 2, input_tokens=64, output_tokens=tokens, stream=True)
    cpu = _cpu_seconds(pid) - cpu0
    return level.agg_tok_s, level.chunks / level.wall_s, cpu / level.wall_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256, help="output tokens per request")
    parser.add_argument("--scale", type=float, default=1000.0, help="SGLANG_SIM_TIME_SCALE for the run")
    args = parser.parse_args()
    env = {"SGLANG_SIM_SPEED": "0.1", "SGLANG_SIM_TIME_SCALE": str(args.scale), "SGLANG_SIM_GPU_COUNT": "8", "SGLANG_SIM_NOISE": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        sim = launch(GLM, env, tmp)
        try:
            if not wait_ready(sim):
                print(sim.log()[-2000:], file=sys.stderr)
                return 1
            pinned = shutil.which("taskset") is not None and os.cpu_count() and os.cpu_count() > 1
            if pinned:
                os.system(f"taskset -acp 0 {sim.proc.pid} >/dev/null")
                os.sched_setaffinity(0, set(range(1, os.cpu_count())))
            print(f"simulator pid {sim.proc.pid}, {'pinned to CPU 0, client on the others' if pinned else 'not pinned'}; "
                  f"{args.tokens} output tokens/request, 1 token per SSE chunk (no speculative decoding)")
            print(f"{'C':>6} {'median tok/s':>13} {'chunks/s':>10} {'sim CPU':>8}   runs (tok/s)")
            for concurrency in args.concurrency:
                results = [asyncio.run(_measure(sim.url, sim.proc.pid, concurrency, args.tokens)) for _ in range(args.runs)]
                tok = statistics.median(r[0] for r in results)
                chunks = statistics.median(r[1] for r in results)
                cpu = statistics.median(r[2] for r in results)
                runs = ", ".join(f"{r[0]:.0f}" for r in results)
                print(f"{concurrency:>6} {tok:>13.0f} {chunks:>10.0f} {cpu:>7.0%}   {runs}")
        finally:
            sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
