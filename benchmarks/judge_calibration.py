"""Calibrate the judge: how often it fails a candidate, and how many trials it needs, by simulation.

Each cell simulates one level whose trials have multiplicative noise σ (lognormal) and a true change
Δ for the candidate. The baseline is measured once with ``--baseline-trials`` trials (what the promote
flow does before installing the candidate); the candidate starts with ``min_trials`` and gets one more
trial each time the real ``deployctl.judge.verdict.judge`` asks, up to ``max_trials``. Printed per cell: the
FAIL / PASS / INCONCLUSIVE rates and the mean number of candidate trials.

Targets (issue "judge"): A/A (Δ = 0) falsely failed ≤ 1 % at σ = 3 %; Δ = −10 % caught ≥ 95 %;
Δ = −87 % caught every time with the minimum trials; mean benchmark time at most half of a fixed
5-trial design (5 baseline + 5 candidate trials).

    .venv/bin/python benchmarks/judge_calibration.py              # the table (≈ 30 s on one core)
    .venv/bin/python benchmarks/judge_calibration.py --runs 500   # quicker, coarser
"""

from __future__ import annotations

import argparse
import math
import random
import time

from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.verdict import Outcome, judge

SIGMAS = (0.01, 0.02, 0.03)
CHANGES = (0.0, -0.03, -0.05, -0.10, -0.30, -0.87, +0.05)
C = 64
FIXED_DESIGN_TRIALS = 5


def _trial(i: int, tok_s: float) -> TrialResult:
    p = Percentiles()
    return TrialResult(
        concurrency=C, trial=i, started_at=0.0, wall_s=60.0, requests_ok=128, requests_failed=0,
        output_tokens=int(tok_s * 60), input_tokens=128_000, output_tok_s=tok_s, input_tok_s=0.0,
        per_request_tok_s=p, ttft_s=p, itl_s=p, tpot_s=p, e2e_s=p,
    )


def _result(values: list[float]) -> BenchResult:
    trials = tuple(_trial(i + 1, v) for i, v in enumerate(values))
    return BenchResult(url="sim", model="sim", input_tokens=1000, output_tokens=1000, started_at=0.0,
                       levels=(LevelResult(C, trials),))


def run_once(rng: random.Random, sigma: float, change: float, policy: JudgePolicy, n_base: int) -> tuple[Outcome, int]:
    """One adaptive promotion of one level: (final outcome, candidate trials used)."""
    def draw(mean: float) -> float:
        return mean * math.exp(rng.gauss(0.0, sigma))

    baseline = _result([draw(1000.0) for _ in range(n_base)])
    cand = [draw(1000.0 * (1 + change)) for _ in range(policy.min_trials)]
    while True:
        verdict = judge(baseline, _result(cand), policy)
        if not verdict.more_trials:
            return verdict.outcome, len(cand)
        cand += [draw(1000.0 * (1 + change)) for _ in range(verdict.more_trials[C])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10000, help="simulated promotions per cell")
    ap.add_argument("--baseline-trials", type=int, default=None, help="default: the policy's max_trials")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    policy = JudgePolicy()
    n_base = args.baseline_trials or policy.max_trials
    rng = random.Random(args.seed)
    started = time.perf_counter()
    print(f"policy: limit −{policy.limit_pct:g} %, confidence {policy.confidence:g}, trials "
          f"{policy.min_trials}…{policy.max_trials}; baseline {n_base} trials; {args.runs} runs per cell\n")
    print(f"{'σ':>4} {'Δ':>6} {'FAIL':>7} {'PASS':>7} {'INCONC':>7} {'cand trials':>11} {'at min':>7}")
    used_all = []
    cells = {}
    for sigma in SIGMAS:
        for change in CHANGES:
            counts = {o: 0 for o in Outcome}
            used = []
            for _ in range(args.runs):
                outcome, n = run_once(rng, sigma, change, policy, n_base)
                counts[outcome] += 1
                used.append(n)
            fail = counts[Outcome.FAIL] / args.runs
            at_min = sum(1 for n in used if n == policy.min_trials) / args.runs
            cells[(sigma, change)] = (fail, sum(used) / len(used), counts, used)
            used_all += used
            print(f"{100 * sigma:3.0f}% {100 * change:+5.0f}% {100 * fail:6.2f}% "
                  f"{100 * counts[Outcome.PASS] / args.runs:6.1f}% "
                  f"{100 * counts[Outcome.INCONCLUSIVE] / args.runs:6.1f}% {sum(used) / len(used):11.2f} "
                  f"{100 * at_min:6.1f}%")
        print()
    mean_cand = sum(used_all) / len(used_all)
    fixed = 2 * FIXED_DESIGN_TRIALS
    aa = cells[(0.03, 0.0)][0]
    caught10 = min(cells[(s, -0.10)][0] for s in SIGMAS)
    big = [cells[(s, -0.87)] for s in SIGMAS]
    big_ok = all(f == 1.0 and all(n == policy.min_trials for n in used) for f, _, _, used in big)
    print("targets:")
    print(f"  A/A falsely failed at σ=3 %: {100 * aa:.2f} % (target ≤ 1 %) {'met' if aa <= 0.01 else 'MISSED'}")
    print(f"  −10 % caught (worst σ): {100 * caught10:.1f} % (target ≥ 95 %) {'met' if caught10 >= 0.95 else 'MISSED'}")
    print(f"  −87 % caught every time at min trials: {'met' if big_ok else 'MISSED'}")
    total = n_base + mean_cand
    print(f"  mean trials per level: candidate {mean_cand:.2f} + baseline {n_base} = {total:.2f} "
          f"vs fixed {FIXED_DESIGN_TRIALS}+{FIXED_DESIGN_TRIALS} = {fixed} → {100 * total / fixed:.0f} % "
          f"(target ≤ 50 %) {'met' if total <= fixed / 2 else 'MISSED'}; candidate side alone "
          f"{100 * mean_cand / FIXED_DESIGN_TRIALS:.0f} % of {FIXED_DESIGN_TRIALS}")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
