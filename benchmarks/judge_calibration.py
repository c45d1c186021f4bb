"""Calibrate the judge: its error rates and the benchmark time it spends, by simulation.

Each cell simulates one critical level whose trials have multiplicative noise σ (lognormal) and a true
change Δ for the candidate, under four ways of getting the baseline:

- fresh           the baseline measured now with ``max_trials`` trials (nothing known about the host);
- fresh + σ       the host's σ learned from earlier A/A samples (``--prior-df`` degrees of freedom, drawn
                  as σ²·χ²/df), which sizes the baseline (``noise.baseline_trials``) and is pooled into
                  every look;
- reused          a stored baseline whose fingerprint matches (measured like "fresh" earlier), checked by
                  one confirmation trial (``reuse.confirm``): agreeing, it costs that one trial and joins
                  the baseline; disagreeing, a fresh baseline is measured as well;
- reused + σ      the same with the learned σ.

The candidate starts with ``min_trials`` and gets one more trial each time the judge asks, up to
``max_trials``. Cost = every trial run (baseline, confirmation, candidate) × ``--trial-s``, against the
fixed design of 5 baseline + 5 candidate trials. The decisions are vectorised over the runs with the
judge's own boundary and decision functions (``deployctl.judge.sequential``); ``--check`` runs the first
runs of every cell through the real ``judge()`` as well and counts any disagreement.

    .venv/bin/python benchmarks/judge_calibration.py                 # 20 000 runs a cell (≈ 20 s, one core)
    .venv/bin/python benchmarks/judge_calibration.py --runs 2000     # quicker, coarser
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import numpy as np

from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.noise import baseline_trials
from deployctl.judge.reuse import confirm
from deployctl.judge.sequential import SPENDING_RHO, decide, look_boundary
from deployctl.judge.stats import NoiseEstimate, outlier_indices
from deployctl.judge.verdict import Outcome, judge

SIGMAS = (0.01, 0.02, 0.03)
CHANGES = (0.0, -0.03, -0.05, -0.10, -0.30, -0.87, +0.05)
SCENARIOS = (("fresh", False), ("fresh", True), ("reused", False), ("reused", True))
C = 64
FIXED = 5  # trials a side of the fixed design the time is compared with
_CODES = {1: Outcome.FAIL, 2: Outcome.PASS, 3: Outcome.INCONCLUSIVE}


@dataclass
class Cell:
    fail: float
    passed: float
    inconclusive: float
    base_trials: float  # mean baseline + confirmation trials
    cand_trials: float
    at_min: float  # share of runs that stopped at min_trials
    fallback: float  # share of reused runs whose confirmation disagreed
    mismatches: int = 0


def simulate(rng: np.random.Generator, sigma: float, change: float, policy: JudgePolicy, runs: int,
             reused: bool, learned: bool, prior_df: int, check: int) -> Cell:
    lo, hi = policy.min_trials, policy.max_trials
    limit_log = -math.log1p(-policy.limit_pct / 100)
    prior = sigma * np.sqrt(rng.chisquare(prior_df, runs) / prior_df) if learned else None
    priors = [NoiseEstimate(float(p), prior_df) for p in prior] if prior is not None else [None] * runs
    n_plan = np.array([baseline_trials(policy, p.sigma if p else None, C) for p in priors])
    fresh = rng.normal(0.0, sigma, (runs, hi))
    cand = rng.normal(math.log1p(change), sigma, (runs, hi))
    cost_base = n_plan.astype(float)
    base = [fresh[i, :n_plan[i]] for i in range(runs)]
    fallback = 0
    if reused:
        stored = rng.normal(0.0, sigma, (runs, hi))
        conf = rng.normal(0.0, sigma, runs)
        cost_base = np.ones(runs)
        for i in range(runs):
            kept = np.exp(stored[i, :n_plan[i]])
            if confirm(list(kept), float(np.exp(conf[i])), priors[i]).agrees:
                base[i] = np.append(stored[i, :n_plan[i]], conf[i])
            else:
                fallback += 1
                cost_base[i] += n_plan[i]
    nb = np.array([len(b) for b in base])
    outcome = np.zeros(runs, int)
    used = np.zeros(runs, int)
    for n_base in np.unique(nb):
        rows = np.flatnonzero(nb == n_base)
        b = np.stack([base[i] for i in rows])
        mb = b.mean(axis=1)
        ss_b = ((b - mb[:, None]) ** 2).sum(axis=1)
        out = np.zeros(len(rows), int)
        for n in range(lo, hi + 1):
            cc = cand[rows, :n]
            mc = cc.mean(axis=1)
            ss = ss_b + ((cc - mc[:, None]) ** 2).sum(axis=1)
            df = int(n_base) + n - 2
            if prior is not None:
                s = np.sqrt((ss + prior[rows] ** 2 * prior_df) / (df + prior_df))
                df += prior_df
            else:
                s = np.sqrt(ss / df)
            se = s * math.sqrt(1 / n_base + 1 / n)
            bd = look_boundary(int(n_base), n, lo, hi, df, false_fail=policy.false_fail, miss=policy.miss,
                               rho=SPENDING_RHO)
            failed, passed = decide(mb - mc, se, bd, limit_log)
            open_ = out == 0
            used[rows[open_]] = n
            out[open_ & failed] = 1
            out[open_ & passed] = 2
        out[out == 0] = 3
        outcome[rows] = out
    mismatches = sum(
        _real_judge(np.exp(base[i]), np.exp(cand[i]), policy, priors[i]) != (_CODES[outcome[i]], used[i])
        for i in range(min(check, runs))
        if not _outliers(base[i], cand[i], lo)
    )
    return Cell(
        fail=float(np.mean(outcome == 1)), passed=float(np.mean(outcome == 2)),
        inconclusive=float(np.mean(outcome == 3)), base_trials=float(cost_base.mean()),
        cand_trials=float(used.mean()), at_min=float(np.mean(used == lo)), fallback=fallback / runs,
        mismatches=mismatches,
    )


def _outliers(base: np.ndarray, cand: np.ndarray, lo: int) -> bool:
    """Whether judge() would set a trial aside at some look: the vectorised rule does not, so such runs differ."""
    values = [list(np.exp(base))] + [list(np.exp(cand[:n])) for n in range(lo, len(cand) + 1)]
    return any(outlier_indices(v) for v in values)


def _real_judge(base: np.ndarray, cand: np.ndarray, policy: JudgePolicy,
                prior: NoiseEstimate | None) -> tuple[Outcome, int]:
    """The same run through ``judge()``: (final outcome, candidate trials used)."""
    baseline = _result(list(base))
    n = policy.min_trials
    while True:
        verdict = judge(baseline, _result(list(cand[:n])), policy, {C: prior} if prior else None)
        if verdict.final:
            return verdict.outcome, n
        n += verdict.more_trials[C]


def _result(values: list[float]) -> BenchResult:
    p = Percentiles()
    trials = tuple(
        TrialResult(concurrency=C, trial=i + 1, started_at=0.0, wall_s=60.0, requests_ok=128, requests_failed=0,
                    output_tokens=int(v * 60), input_tokens=128_000, output_tok_s=float(v), input_tok_s=0.0,
                    per_request_tok_s=p, ttft_s=p, itl_s=p, tpot_s=p, e2e_s=p)
        for i, v in enumerate(values)
    )
    return BenchResult(url="sim", model="sim", input_tokens=1000, output_tokens=1000, started_at=0.0,
                       levels=(LevelResult(C, trials),))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20_000, help="simulated promotions per cell")
    ap.add_argument("--prior-df", type=int, default=16, help="df of the learned σ (16: four 5-trial baselines)")
    ap.add_argument("--trial-s", type=float, default=170.0, help="seconds of one trial of one level")
    ap.add_argument("--check", type=int, default=200, help="runs per cell also put through judge()")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    policy = JudgePolicy()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    fixed_s = 2 * FIXED * args.trial_s
    print(f"policy: limit −{policy.limit_pct:g} %, false fail {policy.false_fail:g}, miss {policy.miss:g} "
          f"(at twice the limit), trials {policy.min_trials}…{policy.max_trials}; {args.runs} runs a cell; "
          f"learned σ with {args.prior_df} df; a trial = {args.trial_s:g} s; fixed design {FIXED}+{FIXED} "
          f"= {fixed_s:g} trial-s\n")
    mismatches = 0
    for where, learned in SCENARIOS:
        name = where + (" + learned σ" if learned else "")
        print(f"## {name}")
        print(f"{'σ':>4} {'Δ':>5} {'FAIL':>7} {'PASS':>6} {'INCONC':>6} {'base':>5} {'cand':>5} {'at min':>6} "
              f"{'trial-s':>8} {'of fixed':>8}" + (f" {'fallback':>8}" if where == "reused" else ""))
        per_sigma = {}
        cells = {}
        for sigma in SIGMAS:
            costs = []
            for change in CHANGES:
                cell = simulate(rng, sigma, change, policy, args.runs, where == "reused", learned, args.prior_df,
                                args.check)
                cells[(sigma, change)] = cell
                mismatches += cell.mismatches
                cost = (cell.base_trials + cell.cand_trials) * args.trial_s
                costs.append(cost)
                print(f"{100 * sigma:3.0f}% {100 * change:+4.0f}% {100 * cell.fail:6.2f}% {100 * cell.passed:5.1f}% "
                      f"{100 * cell.inconclusive:5.1f}% {cell.base_trials:5.2f} {cell.cand_trials:5.2f} "
                      f"{100 * cell.at_min:5.1f}% {cost:8.0f} {100 * cost / fixed_s:7.0f}%"
                      + (f" {100 * cell.fallback:7.2f}%" if where == "reused" else ""))
            per_sigma[sigma] = sum(costs) / len(costs)
        _targets(cells, per_sigma, fixed_s, policy)
    print(f"judge() cross-check: {mismatches} disagreement(s) in the first {args.check} runs of every cell"
          " (runs where judge() set an outlier trial aside are not compared)")
    print(f"({time.perf_counter() - started:.0f} s)")


def _targets(cells: dict[tuple[float, float], Cell], per_sigma: dict[float, float], fixed_s: float,
             policy: JudgePolicy) -> None:
    def mark(ok: bool) -> str:
        return "met" if ok else "MISSED"

    aa = max(cells[(s, 0.0)].fail for s in SIGMAS)
    caught = min(cells[(s, -0.10)].fail for s in SIGMAS)
    kept = min(cells[(s, 0.0)].passed for s in SIGMAS)
    big = all(cells[(s, -0.87)].fail == 1.0 and cells[(s, -0.87)].at_min == 1.0 for s in SIGMAS)
    overall = sum(per_sigma.values()) / len(per_sigma)
    print(f"  A/A falsely failed (worst σ): {100 * aa:.2f} % (≤ 1 %) {mark(aa <= 0.01)}; "
          f"−10 % caught (worst σ): {100 * caught:.1f} % (≥ 95 %) {mark(caught >= 0.95)}; "
          f"Δ = 0 kept (worst σ): {100 * kept:.1f} % (≥ 80 %) {mark(kept >= 0.8)}; "
          f"−87 % caught at {policy.min_trials} trials: {mark(big)}")
    shares = ", ".join(f"σ={100 * s:.0f} % {100 * c / fixed_s:.0f} %" for s, c in per_sigma.items())
    print(f"  mean trial-seconds over the Δ row, of the fixed design: {shares}; all σ {100 * overall / fixed_s:.0f} %"
          f" (≤ 50 %) {mark(overall <= fixed_s / 2)}\n")


if __name__ == "__main__":
    main()
