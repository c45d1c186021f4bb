"""Check the telemetry sampler on a real GPU: idle → matmul load → idle, power and utilisation per phase.

Runs deployctl's own ``TelemetrySampler`` (NVML + this process's tree) while a PyTorch bf16 matmul
loop loads GPU 0, and prints one summary line per phase (``render_telemetry``) plus the per-GPU
details. Writes the raw samples as JSON when ``--out FILE`` is given (the format of
``tests/data/telemetry/``). Needs torch and a CUDA GPU; run on the device machine:

    PYTHONPATH=. python3 benchmarks/telemetry_device.py --idle 8 --load 15 --out $OUT/h200-samples.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

from deployctl.adapters.gpu import gpu_inventory
from deployctl.bench.telemetry import render_telemetry, samples_to_dicts, summarize
from deployctl.load.telemetry import TelemetrySampler


def _matmul_loop(seconds: float, n: int) -> float:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    done = 0
    began = time.perf_counter()
    while time.perf_counter() - began < seconds:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        done += 10
    elapsed = time.perf_counter() - began
    return 2 * n**3 * done / elapsed / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=float, default=8.0, help="seconds of idle before and after the load")
    ap.add_argument("--load", type=float, default=15.0, help="seconds of matmul load")
    ap.add_argument("--n", type=int, default=8192, help="matrix size")
    ap.add_argument("--interval", type=float, default=0.5, help="sampling interval (s)")
    ap.add_argument("--out", help="write the raw samples here (JSON)")
    args = ap.parse_args()

    print("inventory:", gpu_inventory())
    sampler = TelemetrySampler.for_server(pid=os.getpid(), interval_s=args.interval)
    if sampler.unavailable:
        print("GPU telemetry unavailable:", sampler.unavailable)
    sampler.start()
    t0 = time.time()
    time.sleep(args.idle)
    t1 = time.time()
    tflops = _matmul_loop(args.load, args.n)
    t2 = time.time()
    time.sleep(args.idle)
    t3 = time.time()
    samples = sampler.stop()
    phases = [("idle before", t0, t1), ("matmul load", t1, t2), ("idle after", t2, t3)]
    print(f"matmul: {tflops:.0f} TFLOP/s (bf16, n={args.n}); {len(samples)} samples at {args.interval} s")
    for name, start, end in phases:
        # Skip the first second of each phase: NVML's power reading averages over about a second.
        summary = summarize(samples, start + 1.0, end, source=sampler.source)
        gpu0 = (summary.details.get("per_gpu") or [{}])[0]
        print(f"{name:12s} {render_telemetry(summary)}")
        print(f"{'':12s} SM clock {gpu0.get('sm_clock_mhz')} MHz, mem clock {gpu0.get('mem_clock_mhz')} MHz, "
              f"max {gpu0.get('temperature_c_max')} °C, mem used {summary.gpu_mem_used_gb} GB, "
              f"PCIe tx/rx {gpu0.get('pcie_tx_mb_s')}/{gpu0.get('pcie_rx_mb_s')} MB/s, "
              f"throttle {gpu0.get('throttle_share')}, samples {summary.details['samples']}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"phases": [{"name": n, "start": s, "end": e} for n, s, e in phases],
                       "source": sampler.source, "samples": samples_to_dicts(samples)}, f)


if __name__ == "__main__":
    main()
