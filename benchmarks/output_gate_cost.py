"""What the output gate costs on the simulator, against a throughput sweep, and how often it rejects an A/A.

Starts the simulator (Qwen3.5 preset, the demo's fast settings) as a baseline and as each candidate kind,
runs the gate as a promote does (the baseline's reference answers + its A/A re-scoring, then the
candidate's scoring and greedy answers) and prints its verdict, seconds and requests, next to one sweep of
the demo policy (C=2, 8; 64-in/64-out; 16 requests a level) on the same server.

    .venv/bin/python benchmarks/output_gate_cost.py                   # the four kinds, whole probe set
    .venv/bin/python benchmarks/output_gate_cost.py --aa-runs 20      # + A/A false rejects over 20 runs
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from deployctl.inventory.policy import OutputGatePolicy  # noqa: E402
from deployctl.live.output_gate import LiveOutputs, probe_set  # noqa: E402
from deployctl.outputgate.verdict import OutputVerdict, decide  # noqa: E402
from deployctl.sim.probe import SimHandle, launch, run_level, wait_ready  # noqa: E402

QWEN = ("--model-path Qwen/Qwen3.5-122B-A10B --served-model-name qwen3.5-122b --tp 4 --mem-fraction-static 0.85 "
        "--attention-backend triton").split()
ENV = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "20", "SGLANG_SIM_NOISE": "0.005"}
KINDS = {
    "A/A": ([], {}),
    "fp8 KV cache": (["--kv-cache-dtype", "fp8_e4m3"], {}),
    "wrong sums, 1.3x": ([], {"SGLANG_SIM_FAULT": "wrong_sums", "SGLANG_SIM_THROUGHPUT_FACTOR": "1.3"}),
    "garbage backend": ([], {"SGLANG_SIM_FAULT": "garbage"}),
}


def start(flags: list[str], env: dict[str, str]) -> SimHandle:
    sim = launch(QWEN + flags, {**ENV, **env}, tempfile.mkdtemp(prefix="og-bench-"))
    if not wait_ready(sim):
        sim.stop()
        raise SystemExit(f"the simulator did not get ready:\n{sim.log()[-2000:]}")
    return sim


async def gate(base: str, cand: str, policy: OutputGatePolicy) -> tuple[OutputVerdict, float, float, int]:
    live = LiveOutputs()
    ref = await live.reference(base, policy, "bench")
    floor = await live.measure(base, policy, ref, answers=False)
    t0 = time.monotonic()
    measured = await live.measure(cand, policy, ref, answers=True)
    cand_s = time.monotonic() - t0
    verdict = decide(policy, probe_set(policy), ref.refs, floor.scores, measured.scores, measured.answers,
                     failed=measured.failed, requests=measured.requests)
    return verdict, ref.seconds + floor.seconds, cand_s, ref.requests + floor.requests + measured.requests


async def sweep_s(url: str) -> tuple[float, int]:
    t0 = time.monotonic()
    for c in (2, 8):
        await run_level(url, c, 16, input_tokens=64, output_tokens=64)
    return time.monotonic() - t0, 32


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=None, help="gates.output.probes (default: all)")
    ap.add_argument("--aa-runs", type=int, default=0, help="repeated A/A gates for the false-reject rate")
    args = ap.parse_args()
    policy = OutputGatePolicy(probes=args.probes)
    base = start([], {})
    try:
        sweep, sweep_requests = asyncio.run(sweep_s(base.url))
        print(f"throughput sweep (C=2,8; 16 requests a level; 64/64 tokens): {sweep:.2f} s, {sweep_requests} requests")
        for name, (flags, env) in KINDS.items():
            cand = start(flags, env) if flags or env else None
            try:
                verdict, base_s, cand_s, requests = asyncio.run(gate(base.url, (cand or base).url, policy))
            finally:
                if cand:
                    cand.stop()
            s, a = verdict.shift, verdict.accuracy
            print(f"{name:18} {verdict.outcome.value:12} baseline side {base_s:5.2f} s, candidate side {cand_s:5.2f} s, "
                  f"{requests} requests | accuracy {a.baseline_right}/{a.prompts} → {a.candidate_right}/{a.prompts}, "
                  f"mean KL {s.mean_kl:.2g} (A/A {verdict.floor.mean_kl:.2g}), same top {s.same_top_pct:.1f} %, "
                  f"p99 KL {s.p99_kl:.2g}")
        if args.aa_runs:
            outcomes, kls = [], []
            for _ in range(args.aa_runs):
                verdict, *_ = asyncio.run(gate(base.url, base.url, policy))
                outcomes.append(verdict.outcome.value)
                kls.append(verdict.shift.mean_kl)
            rejects = sum(o == "FAIL" for o in outcomes)
            print(f"A/A x{args.aa_runs}: {rejects} rejected, {outcomes.count('INCONCLUSIVE')} inconclusive; "
                  f"mean KL median {statistics.median(kls):.2g}, max {max(kls):.2g}")
    finally:
        base.stop()


if __name__ == "__main__":
    main()
