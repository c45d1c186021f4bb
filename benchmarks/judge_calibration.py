"""Calibrate the judge: its error rates and the benchmark time it spends, by simulation.

Each cell simulates promotes of a sweep of critical levels (one level, and the default policy's sweep:
every level of ``BenchPolicy().concurrency``, all critical), every trial with multiplicative noise σ
(lognormal, the same σ at every level, independent trials) and a true change Δ of the candidate at every
level. Four ways of getting the baseline:

- fresh           measured now, in rounds (``noise.baseline_top_up``): ``min_trials`` a level, then one
                  more a round where the σ the spread so far shows, pooled over the levels, asks for it;
- fresh + σ       the host's σ learned from earlier A/A samples (``--prior-df`` degrees of freedom, drawn
                  as σ²·χ²/df per level), pooled into the baseline's sizing and every look;
- reused          a stored baseline whose fingerprint matches (measured like "fresh" by an earlier
                  promote), checked by one confirmation trial a level (``reuse.confirm``): all agreeing,
                  they cost one trial a level and join the baseline; else a fresh baseline is measured too;
- reused + σ      the same with the learned σ.

The candidate starts with ``min_trials`` at every level; each judgement asks one more trial at every
level still unclear, up to ``max_trials``; a FAIL anywhere ends the promote. The judge pools the
spreads of the levels (``judge.pooling``, a far noisier level apart). Then the step over server starts
(``deployctl.judge.starts``): a FAIL or a PASS that is not robust to the restart guard (``pass_robust``:
twice the limit ruled out on the sweep's mean), or a final INCONCLUSIVE, is decided on the candidate
restarted in place (C2, its own restart offset) and the restored baseline on its new start (B2),
``verification_plan``'s trials each — on one critical level a third start a side as well (C3 restarted in
place before the rollback, B3 after B2: ``starts_a_side``); ``--baseline-start-only`` leaves C2 out (and the
third starts: the design it replaced). Cost = every trial run (baseline, confirmation, candidate, and B2, C2
(B3, C3) where the step runs, summed over the levels) × ``--trial-s``, against the fixed design of 5 baseline + 5 candidate trials a level — not the
short verification every rollback runs today (1 trial at ``verify_concurrency``), in either design; the
"mean" is over the seven Δ of a σ row, equally weighted. ``restarts``: server restarts a promote (the
candidate's start, a rollback's, C2's, C3's and B3's); ``verif``: B2 + C2 (+ B3 + C3) trials a level, over all
runs; ``over``:
the share of runs decided over starts.
With several levels a row more puts −10 % at the last level only: what one level's regression costs.
The decisions are vectorised over the runs with the judge's own boundary and decision functions
(``deployctl.judge.sequential``, ``noise.plan_z``); ``--check`` runs the first runs of every cell through
the real baseline rounds, ``judge()``, ``over_starts_needed`` and ``judge_over_starts`` as well and counts
any disagreement (baseline size, outcome, trials, the verification's plan).

    .venv/bin/python benchmarks/judge_calibration.py                 # 20 000 runs a cell (8 000: 2.5 min of CPU)
    .venv/bin/python benchmarks/judge_calibration.py --runs 2000     # quicker, coarser

Noise models (``--models`` runs each in turn, ``--targets-only`` only Δ = 0 and −10 %): ``--shock-corr``
(a per-trial shock shared by the levels), ``--restart-sigma`` (each server start's own offset; a host with
history learns it from ``--restart-pairs`` pairs), ``--tails-df`` (Student t noise).

Measured (seed 7, 8 000 runs a cell, three starts a side on one level, the PASS re-check at ⅔ of ``miss``; the
tables are in docs/judge.md). i.i.d., default 5-level sweep, worst of σ = 1, 2, 3 %: A/A false fail 0.00 % in all
four columns, −10 % caught 100.0 %; trial-seconds of the fixed design at σ = 3 %: 55.5 / 55.1 / 38.5 / 37.9 %
(fresh / fresh + σ / reused / reused + σ; 48 % over σ = 1, 2, 3 % fresh): the fresh ones MISS the 50 % target
(49.8 % with no step over starts; the non-robust FAILs alone, which the A/A target under a 2 % restart offset
needs, already take it to 51–52 %). −10 % at one level only, σ = 3 %: FAIL 73–78 %. One level: −10 % caught
99.8 / 99.5 / 99.8 / 99.6 %, Δ = 0 kept 94.7 / 86.0 / 95.5 / 89.8 %, 118.5 / 106.2 / 77.8 / 85.6 % of the
fixed design at σ = 3 %.
Under the other noises (``--models --targets-only --runs 8000 --check 50``, 207 s wall): a shared per-trial
shock (ρ 0.5, 0.8) and t(3) noise hold both targets in every column (A/A ≤ 0.05 %, −10 % caught ≥ 98.5 %); a
restart offset of 1 % a start A/A ≤ 0.05 %, −10 % caught 99.2–99.8 %, of 2 % A/A ≤ 0.73 %, −10 % caught
95.9–97.0 % on one level, 96.0–96.9 % on the default sweep: every error target met; 0 disagreements with
``judge()``, ``over_starts_needed`` and ``judge_over_starts`` in 13 905 runs (8 843 i.i.d.).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.special import chdtri, fdtri, ndtri, stdtrit

from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.inventory.policy import BenchPolicy, JudgePolicy
from deployctl.judge.noise import (
    DEFAULT_RESTART_WEIGHT, MIN_PLAN_DF, RESTART_SEEN_ALPHA, RestartPair, baseline_top_up, first_stage_trials, learn_restart, plan_z,
)
from deployctl.judge.multiplicity import effective_tests
from deployctl.judge.pooling import GUARD_ALPHA, SHOCK_ALPHA
from deployctl.judge.reuse import confirm
from deployctl.judge.sequential import SPENDING_RHO, decide, look_boundary
from deployctl.judge.starts import (
    FOCUS_SWEEP, FOCUS_TRIALS, MIN_RESTART_PAIRS, PASS_SHARE, RESTART_BOUND, RESTART_GUARD, SHOCK_VERIFICATION_TRIALS,
    STARTS, SWEEP_SHARE, TEST_SHARE,
    critical_levels, judge_over_starts, over_starts_needed, starts_a_side, verification_plan,
)
from deployctl.judge.stats import (
    DEFAULT_RESTART, DEFAULT_RESTART_SIGMA, MAX_PRIOR_DF, NoiseEstimate, RestartNoise, outlier_indices,
)
from deployctl.judge.sweep import false_fail_per_test
from deployctl.judge.verdict import JudgeOutcome, judge

SIGMAS = (0.01, 0.02, 0.03)
CHANGES = (0.0, -0.03, -0.05, -0.10, -0.30, -0.87, +0.05)
SCENARIOS = (("fresh", False), ("fresh", True), ("reused", False), ("reused", True))
FIXED = 5  # trials a side of the fixed design the time is compared with
_CODES = {1: JudgeOutcome.FAIL, 2: JudgeOutcome.PASS, 3: JudgeOutcome.INCONCLUSIVE}


@dataclass(frozen=True)
class NoiseModel:
    """How the simulated trials vary, beyond i.i.d. lognormal noise σ.

    ``shock_corr``: a per-trial shock shared by the sweep's levels (trial k of every level), the levels'
    correlation; ``restart_sigma``: each server start's own offset (σ of the log; the baseline, a stored
    baseline and the candidate each run on their own start); ``tails_df``: Student t noise of that many
    degrees of freedom, scaled to the same σ, instead of normal.
    """

    shock_corr: float = 0.0
    restart_sigma: float = 0.0
    tails_df: float | None = None

    @property
    def name(self) -> str:
        parts = ([f"shared per-trial shock, correlation {self.shock_corr:g}"] if self.shock_corr else []) + (
            [f"restart offset σ {100 * self.restart_sigma:g} % a start"] if self.restart_sigma else []) + (
            [f"Student t noise, {self.tails_df:g} df"] if self.tails_df else [])
        return ", ".join(parts) or "i.i.d. lognormal"

    def draw(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Standard noise of unit variance: normal, or Student t scaled to unit variance."""
        if self.tails_df is None:
            return rng.standard_normal(shape)
        return rng.standard_t(self.tails_df, shape) * math.sqrt((self.tails_df - 2) / self.tails_df)

    def trials(self, rng: np.random.Generator, sigma: float, shape: tuple[int, int, int]) -> np.ndarray:
        """Log noise of trials [run, level, trial] measured on one server start."""
        rho = self.shock_corr
        noise = math.sqrt(1 - rho) * self.draw(rng, shape) + math.sqrt(rho) * self.draw(rng, (shape[0], 1, shape[2]))
        start = rng.normal(0.0, self.restart_sigma, (shape[0], 1, 1)) if self.restart_sigma else 0.0
        return sigma * noise + start


DEBUG = False  # --debug: print every disagreement of the cross-check

IID = NoiseModel()
# The noise models the targets are checked under (docs/judge.md has the table).
MODELS = (IID, NoiseModel(shock_corr=0.5), NoiseModel(shock_corr=0.8), NoiseModel(restart_sigma=0.01),
          NoiseModel(restart_sigma=0.02), NoiseModel(tails_df=3))


@dataclass
class Cell:
    fail: float
    passed: float
    inconclusive: float
    base_trials: float  # mean baseline + confirmation trials a level
    cand_trials: float  # mean candidate trials a level
    at_min: float  # share of runs that stopped at min_trials at every level
    fallback: float  # share of reused runs whose confirmation disagreed
    over_starts: float = 0.0  # share of runs decided over starts (a non-robust FAIL or a final INCONCLUSIVE)
    verify_trials: float = 0.0  # mean trials a level of that verification on the new start, over all runs
    restarts: float = 0.0  # server restarts per promote: the candidate's start, a rollback's
    mismatches: int = 0
    compared: int = 0  # runs put through judge() as well
    compared_over: int = 0  # of them, runs decided over starts (through judge_over_starts as well)


def _within(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and within sum of squares of the first n[run, level] values of x[run, level, :]."""
    mask = np.arange(x.shape[2])[None, None, :] < n[:, :, None]
    mean = np.where(mask, x, 0.0).sum(axis=2) / n
    return mean, np.where(mask, (x - mean[:, :, None]) ** 2, 0.0).sum(axis=2)


def _trial_effect(x: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pooling.trial_effect`` of one side vectorised: per run, the trial effect's ss and df, over the levels
    with two or more trials and the trials all of them have (nothing with fewer than two such levels)."""
    mean, _ = _within(x, n)
    counted = n >= 2
    levels = counted.sum(axis=1)
    core = np.where(levels >= 2, np.where(counted, n, x.shape[2]).min(axis=1), 0)
    k = np.arange(x.shape[2])[None, :]
    in_core = k < core[:, None]
    residuals = np.where(counted[:, :, None], x - mean[:, :, None], 0.0)
    effects = np.where(in_core, residuals.sum(axis=1) / np.maximum(levels, 1)[:, None], 0.0)
    centre = effects.sum(axis=1) / np.maximum(core, 1)
    ss = levels * np.where(in_core, (effects - centre[:, None]) ** 2, 0.0).sum(axis=1)
    return ss, np.maximum(core - 1, 0)


def _satterthwaite(parts: list[tuple[np.ndarray, np.ndarray | None]]) -> np.ndarray:
    """``stats.effective_df`` vectorised (inf where every part with df is zero)."""
    total = sum(np.where(v > 0, v, 0.0) for v, _ in parts)
    denominator = sum(np.where((v > 0) & (d > 0), v * v / np.maximum(d, 1e-300), 0.0) for v, d in parts if d is not None)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, total * total / np.where(denominator > 0, denominator, 1.0), np.inf)


def pooled(ss: np.ndarray, df: np.ndarray, prior: np.ndarray | None, prior_df: int,
           shock: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (run, level): the sum of squares, plain df and effective df the judge uses — ``pooling.shared_spreads``
    and ``stats.log_ratio_interval``'s within part vectorised. ``shock``: the sweep's trial effect (ss, df) per run."""
    rest_ss = ss.sum(axis=1, keepdims=True) - ss
    rest_df = df.sum(axis=1, keepdims=True) - df
    testable = (df >= 1) & (rest_df >= 1) & (ss > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (ss / df) / (rest_ss / rest_df)
        crit = fdtri(np.maximum(df, 1), np.maximum(rest_df, 1), 1 - GUARD_ALPHA)
    alone = testable & ((rest_ss <= 0) | (ratio > crit))
    use_ss, use_df = np.where(alone, ss, ss + rest_ss), np.where(alone, df, df + rest_df)
    k = min(prior_df, MAX_PRIOR_DF) if prior is not None else 0
    prior_part = [(prior ** 2 * k, np.full(ss.shape, k))] if prior is not None and k else []
    eff = use_df.astype(float) + k
    split = np.zeros(ss.shape, bool)
    if shock is not None:
        t_ss, t_df = (np.broadcast_to(a[:, None], ss.shape) for a in shock)
        total_ss, total_df = use_ss, use_df
        split = ~alone & (t_df >= 1) & (t_df < total_df)
        rest_part = (np.maximum(0.0, total_ss - t_ss), total_df - t_df)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = (t_ss / t_df) / (rest_part[0] / rest_part[1])
            crit = fdtri(np.maximum(t_df, 1), np.maximum(rest_part[1], 1), 1 - SHOCK_ALPHA)
        split &= (t_ss > 0) & ((rest_part[0] <= 0) | (f > crit))
        found = _satterthwaite([(t_ss, t_df), rest_part, *prior_part])
        eff = np.where(split & np.isfinite(found), np.minimum(eff, found), eff)
    if prior is not None:
        use_ss, use_df = use_ss + prior ** 2 * k, use_df + k
    return use_ss, use_df, eff, split


def plan(values: np.ndarray, prior: np.ndarray | None, prior_df: int, policy: JudgePolicy,
         false_fail: float, restart: np.ndarray) -> np.ndarray:
    """The baseline's rounds (``noise.baseline_top_up`` until it asks nothing) vectorised: its valid trials a level.

    ``values[run, level, :]`` are the trials in the order they would be measured; ``min_trials`` a level
    first, then one more at each level whose plan, re-made on every trial so far, wants more.
    ``restart[run]``: the between-restart σ the judge will use.
    """
    lo, hi = policy.min_trials, policy.max_trials
    z, z_one = plan_z(false_fail, policy.miss, values.shape[1]), plan_z(false_fail, policy.miss, 1)
    limit_log = -math.log1p(-policy.limit_pct / 100)
    n = np.full(values.shape[:2], lo)
    while True:
        _, ss = _within(values[:, :, :hi], n)
        use_ss, use_df, eff, split = pooled(ss, n - 1, prior, prior_df, _trial_effect(values[:, :, :hi], n))
        room = (2 * limit_log / np.where(split, z_one, z)) ** 2 - 2 * restart[:, None] ** 2
        var = use_ss / use_df
        want = np.full(values.shape[:2], hi)
        for k in range(hi - 1, lo - 1, -1):
            want = np.where(var * (1 / k + 1 / hi) <= room, k, want)
        want = np.where(var <= 0, lo, want)
        more = np.where(eff >= MIN_PLAN_DF, want, hi) > n
        if not more.any():
            return n
        n = n + more


class Boundaries:
    """fail_t / pass_t per (baseline trials, candidate trials, df): the judge's ``look_boundary`` tails, then
    its t quantile (``sequential._t``) vectorised over the (fractional) effective df. ``false_fail``: the
    per-test rate of independent levels; ``tests`` (per run) the levels' worth when they move together."""

    def __init__(self, policy: JudgePolicy, false_fail: float) -> None:
        self.policy, self.false_fail = policy, false_fail
        self.cache: dict[tuple[int, int, float], tuple[float, float]] = {}

    def __call__(self, nb: np.ndarray, n: np.ndarray, df: np.ndarray, tests: np.ndarray | None = None) -> SimpleNamespace:
        rate = np.broadcast_to((self.false_fail if tests is None else self.policy.false_fail / tests[:, None]), nb.shape)
        keys = np.stack([nb, n, rate], axis=-1).reshape(-1, 3)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        table = np.array([self._one(int(k[0]), int(k[1]), float(k[2])) for k in uniq])
        f, p = table[inverse.ravel(), 0].reshape(nb.shape), table[inverse.ravel(), 1].reshape(nb.shape)
        return SimpleNamespace(fail_t=_t(1 - f, df), pass_t=_t(1 - p, df))

    def _one(self, nb: int, n: int, rate: float) -> tuple[float, float]:
        if (nb, n, rate) not in self.cache:
            p = self.policy
            b = look_boundary(nb, n, p.min_trials, p.max_trials, 10, false_fail=rate, miss=p.miss,
                              rho=SPENDING_RHO)
            self.cache[(nb, n, rate)] = (b.fail_tail, b.pass_tail)
        return self.cache[(nb, n, rate)]


def _levels_worth(ss: np.ndarray, df: np.ndarray, shock: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Per run, the tests the levels are worth (``sweep.sweep_correlation``, ``multiplicity.effective_tests``)."""
    L = ss.shape[1]
    t_ss, t_df = shock
    total_ss, total_df = ss.sum(axis=1), df.sum(axis=1)
    rest_ss, rest_df = np.maximum(0.0, total_ss - t_ss), total_df - t_df
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (t_ss / t_df) / (rest_ss / rest_df)
        crit = fdtri(np.maximum(t_df, 1), np.maximum(rest_df, 1), 1 - SHOCK_ALPHA)
        excess = np.where(rest_ss > 0, f / crit - 1, np.inf)
        r = np.where(np.isinf(excess), 1.0, excess / (excess + L))
    seen = (t_df >= 1) & (t_df < total_df) & (rest_df >= 1) & (t_ss > 0) & ((rest_ss <= 0) | (f > crit))
    r = np.where(seen, np.maximum(r, 0.0), 0.0)
    uniq, inverse = np.unique(r, return_inverse=True)
    return np.array([effective_tests(L, float(v), math.inf) for v in uniq])[inverse.ravel()]


def _t(q: np.ndarray, df: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.where(df < 10_000, stdtrit(np.minimum(df, 10_000), q), ndtri(q))


@dataclass(frozen=True)
class Learned:
    """What a host with history has learned, per run: the within σ per level and the restart pairs."""

    sigma: np.ndarray  # [run, level]
    pair_diff: np.ndarray  # [run, pair]
    pair_scale: float
    pair_ss: np.ndarray  # [run, pair]
    pair_df: int

    def restart(self) -> np.ndarray:
        """``noise.learn_restart`` vectorised: the restart σ per run."""
        k, pairs = DEFAULT_RESTART_WEIGHT, self.pair_diff.shape[1]
        mean_square = self.pair_ss.sum(axis=1) / (self.pair_df * pairs)
        excess = ((self.pair_diff ** 2).sum(axis=1) - pairs * self.pair_scale * mean_square) / 2
        return np.sqrt(np.maximum(0.0, (k * DEFAULT_RESTART_SIGMA ** 2 + excess) / (k + pairs)))

    def in_test(self) -> tuple[np.ndarray, np.ndarray]:
        """``RestartNoise.in_test`` vectorised: per run the restart σ the one-start test uses, and whether it
        is the learned one (``noise.restart_seen``; else the default, known)."""
        pairs = self.pair_diff.shape[1]
        mean_square = self.pair_ss.sum(axis=1) / (self.pair_df * pairs)
        ratio = (self.pair_diff ** 2).sum(axis=1) / (pairs * self.pair_scale * mean_square)
        seen = ratio > fdtri(pairs, self.pair_df * pairs, 1 - RESTART_SEEN_ALPHA)
        return np.where(seen, self.restart(), DEFAULT_RESTART_SIGMA), seen

    def restart_noise(self, i: int) -> RestartNoise:
        return learn_restart([RestartPair(float(d), self.pair_scale, float(ss), self.pair_df)
                              for d, ss in zip(self.pair_diff[i], self.pair_ss[i])])


def learned_history(rng: np.random.Generator, sigma: float, model: NoiseModel, runs: int, levels: int,
                    prior_df: int, pairs: int) -> Learned:
    """A host's history: σ learned from ``prior_df`` df of A/A samples (σ²·χ²/df per level), and ``pairs``
    restart pairs (``noise.restart_pair``) — a rollback's one-trial verification against a baseline of 3
    trials a level, whose trial effect (2 df) estimates the within part of the sweep mean's difference."""
    learned = sigma * np.sqrt(rng.chisquare(prior_df, (runs, levels)) / prior_df)
    rho, scale = model.shock_corr, (1 / 3 + 1) / levels
    per_trial = sigma ** 2 * (1 + (levels - 1) * rho)  # E[trial-effect mean square]
    diff = (rng.normal(0.0, math.sqrt(2) * model.restart_sigma, (runs, pairs))
            + rng.normal(0.0, math.sqrt(per_trial * scale), (runs, pairs)))
    return Learned(learned, diff, scale, per_trial * rng.chisquare(2, (runs, pairs)), 2)


def simulate(rng: np.random.Generator, sigma: float, change: float, policy: JudgePolicy, runs: int,
             levels: tuple[int, ...], reused: bool, learned: bool, prior_df: int, check: int,
             bounds: Boundaries, one_level: bool = False, model: NoiseModel = IID, pairs: int = 8,
             c2: bool = True) -> Cell:
    lo, hi = policy.min_trials, policy.max_trials
    L = len(levels)
    limit_log = -math.log1p(-policy.limit_pct / 100)
    history = learned_history(rng, sigma, model, runs, L, prior_df, pairs) if learned else None
    prior = history.sigma if history is not None else None
    restart, seen = history.in_test() if history is not None else (np.full(runs, DEFAULT_RESTART_SIGMA),
                                                                    np.zeros(runs, bool))
    restart_df = np.where(seen, DEFAULT_RESTART_WEIGHT + pairs, np.inf)  # inf: known
    live = model.trials(rng, sigma, (runs, L, hi + 2))  # the live server: a fresh baseline, a confirmation
    fresh = live[:, :, :hi + 1].copy()
    fresh[:, :, hi] = 0.0
    cand = model.trials(rng, sigma, (runs, L, hi))  # the candidate's own start
    shift = np.zeros((1, L, 1))
    shift[:, -1 if one_level else slice(None), :] = math.log1p(change)
    cand += shift
    planned = np.where(seen, restart, 0.0)  # noise._planned_restart: the default is not
    nb_fresh = plan(fresh, prior, prior_df, policy, bounds.false_fail, planned)
    base, nb = fresh, nb_fresh
    cost_base = nb_fresh.sum(axis=1).astype(float)
    agree = np.zeros(runs, bool)
    if reused:
        stored = model.trials(rng, sigma, (runs, L, hi + 1))  # measured on an earlier start
        nb_stored = plan(stored, prior, prior_df, policy, bounds.false_fail, planned)
        conf = live[:, :, hi + 1]
        agree = np.array([all(
            confirm(list(np.exp(stored[i, j, :nb_stored[i, j]])), float(np.exp(conf[i, j])),
                    NoiseEstimate(float(prior[i, j]), prior_df) if prior is not None else None).agrees
            for j in range(L)) for i in range(runs)])
        np.put_along_axis(stored, nb_stored[:, :, None], conf[:, :, None], axis=2)
        base = np.where(agree[:, None, None], stored, fresh)
        nb = np.where(agree[:, None], nb_stored + 1, nb_fresh)
        cost_base = L + np.where(agree, 0.0, cost_base)
    mb, ssb = _within(base, nb)
    shock_b = _trial_effect(base, nb)
    outcome, used = _sequential(mb, ssb, nb, shock_b, cand, prior, prior_df, restart, restart_df, policy,
                                limit_log, bounds)
    k = _verification_trials(base, nb, cand, used, policy, levels)
    outcome, over, verify, again = _over_starts(rng, model, sigma, outcome, used, base, nb, cand, shift, prior,
                                                prior_df, history, policy, limit_log, bounds, k, c2)
    compared = [i for i in range(min(check, runs))
                if not _outliers(base[i], nb[i], cand[i], fresh[i], lo)
                and not any(outlier_indices(list(np.exp(v[:n]))) for x in (*verify, *again)
                            for v, n in zip(x[i], k[i]))]
    mismatches = 0
    for i in compared:
        real = _real(np.exp(base[i]), nb[i], np.exp(cand[i]), np.exp(fresh[i, :, :hi]), [np.exp(v[i]) for v in verify],
                     [np.exp(x[i]) for x in again], levels, policy,
                     prior[i] if prior is not None else None, prior_df,
                     history.restart_noise(i) if history is not None else None)
        vectorised = (_CODES[outcome[i]], tuple(used[i]), tuple(nb_fresh[i]), tuple(k[i]) if over[i] else ())
        if real != vectorised:
            mismatches += 1
            if DEBUG:
                print(f"  judge() {real} ≠ vectorised {vectorised} (run {i})")
    return Cell(
        fail=float(np.mean(outcome == 1)), passed=float(np.mean(outcome == 2)),
        inconclusive=float(np.mean(outcome == 3)), base_trials=float(cost_base.mean() / L),
        cand_trials=float(used.mean()), at_min=float(np.mean((used == lo).all(axis=1))),
        fallback=float(np.mean(~agree)) if reused else 0.0, over_starts=float(over.mean()),
        # The verification's trials count every later start of either side (B2, C2; B3, C3 on one level), and
        # so do the restarts: the candidate's in place, the restored baseline's in place for B3.
        verify_trials=float((over[:, None] * k).mean() * (len(verify) + len(again))),
        restarts=float(1 + np.mean(outcome != 2) + over.mean() * (len(again) + len(verify) - 1)),
        mismatches=mismatches, compared=len(compared), compared_over=int(over[compared].sum()),
    )


def _sequential(mb: np.ndarray, ssb: np.ndarray, nb: np.ndarray, shock_b: tuple[np.ndarray, np.ndarray],
                cand: np.ndarray, prior: np.ndarray | None, prior_df: int, restart: np.ndarray,
                restart_df: np.ndarray, policy: JudgePolicy, limit_log: float, bounds: Boundaries) -> tuple[np.ndarray, np.ndarray]:
    """JudgeOutcome code per run and candidate trials per (run, level), as judge() and promote would reach them."""
    lo, hi = policy.min_trials, policy.max_trials
    runs, L = mb.shape
    n = np.full((runs, L), lo)
    outcome = np.zeros(runs, int)
    stats = {k: _within(cand, np.full((runs, L), k)) for k in range(lo, hi + 1)}
    between = 2 * restart[:, None] ** 2
    while True:
        open_ = outcome == 0
        if not open_.any():
            return outcome, n
        mc = np.choose(n - lo, [stats[k][0] for k in range(lo, hi + 1)])
        ssc = np.choose(n - lo, [stats[k][1] for k in range(lo, hi + 1)])
        failed, passed = _look(mb, ssb, nb, shock_b, cand, n, mc, ssc, prior, prior_df, between, restart_df,
                               limit_log, bounds)
        unknown = ~failed & ~passed
        asks = unknown & (n < hi)
        outcome[open_ & failed.any(axis=1)] = 1
        still = outcome == 0
        outcome[still & ~unknown.any(axis=1)] = 2
        outcome[still & unknown.any(axis=1) & ~asks.any(axis=1)] = 3
        n = n + (asks & (outcome == 0)[:, None])


def _look(mb: np.ndarray, ssb: np.ndarray, nb: np.ndarray, shock_b: tuple[np.ndarray, np.ndarray], cand: np.ndarray,
          n: np.ndarray, mc: np.ndarray, ssc: np.ndarray, prior: np.ndarray | None, prior_df: int,
          between: np.ndarray, restart_df: np.ndarray, limit_log: float,
          bounds: Boundaries) -> tuple[np.ndarray, np.ndarray]:
    """One look of ``judge()`` at ``n[run, level]`` candidate trials (mean ``mc``, spread ``ssc``): (failed, passed).
    ``restart_df[run]``: the restart σ's df, inf where it is known."""
    t_c = _trial_effect(cand, n)
    shock = (shock_b[0] + t_c[0], shock_b[1] + t_c[1])
    use_ss, use_df, eff, _ = pooled(ssb + ssc, nb + n - 2, prior, prior_df, shock)
    within = use_ss / use_df * (1 / nb + 1 / n)
    se = np.sqrt(within + between)
    learned = (between > 0) & np.isfinite(restart_df)[:, None]
    satt = _satterthwaite([(within, eff), (between + 0 * within, np.broadcast_to(
        np.where(np.isfinite(restart_df), restart_df, 1.0)[:, None], within.shape))])
    df = np.where(learned, np.minimum(eff, satt), eff)
    tests = _levels_worth(ssb + ssc, nb + n - 2, shock)
    return decide(mb - mc, se, bounds(nb, n, df, tests), limit_log)


def _in_force(history: Learned | None, runs: int, excess: np.ndarray | None = None, count: int = 0) -> np.ndarray:
    """``starts.restart_in_force`` vectorised: the σ_r per run deciding over starts allows for (``excess`` over
    ``count`` pairs: this promote's own pairs of starts, pooled in)."""
    weight = DEFAULT_RESTART_WEIGHT + (history.pair_diff.shape[1] if history is not None else 0)
    sigma2 = history.restart() ** 2 if history is not None else np.full(runs, DEFAULT_RESTART_SIGMA ** 2)
    if count:
        sigma2 = np.maximum(0.0, (weight * sigma2 + excess) / (weight + count))
        weight += count
    floor = np.maximum(RESTART_GUARD, np.sqrt(sigma2))
    pairs = weight - DEFAULT_RESTART_WEIGHT
    if pairs >= MIN_RESTART_PAIRS:
        bound = np.sqrt(sigma2 * pairs / chdtri(pairs, RESTART_BOUND))
        return np.where(bound < RESTART_GUARD, bound, floor)
    return floor


def _shares_shock(t_ss: np.ndarray, t_df: np.ndarray, total_ss: np.ndarray, total_df: np.ndarray) -> np.ndarray:
    """``pooling.shares_shock`` of a trial effect (``t_ss``, ``t_df``) against the rest of a pool, per run."""
    rest_ss, rest_df = np.maximum(0.0, total_ss - t_ss), total_df - t_df
    with np.errstate(divide="ignore", invalid="ignore"):
        f = (t_ss / t_df) / (rest_ss / rest_df)
        crit = fdtri(np.maximum(t_df, 1), np.maximum(rest_df, 1), 1 - SHOCK_ALPHA)
        return (t_df >= 1) & (t_df < total_df) & (t_ss > 0) & ((rest_ss <= 0) | (f > crit))


def _verification_trials(base: np.ndarray, nb: np.ndarray, cand: np.ndarray, used: np.ndarray, policy: JudgePolicy,
                         levels: tuple[int, ...]) -> np.ndarray:
    """``starts.verification_plan`` (with the candidate) vectorised: trials of each verification start per (run, level)."""
    each = verification_plan(policy, _result(levels, [[1.0]] * len(levels)))[levels[0]]  # one trial: no shock
    (_, ssb), (_, ssc) = _within(base, nb), _within(cand, used)
    (tb, db), (tc, dc) = _trial_effect(base, nb), _trial_effect(cand, used)
    shock = _shares_shock(tb + tc, db + dc, (ssb + ssc).sum(axis=1), (nb + used - 2).sum(axis=1))
    k = np.where(shock, max(each, SHOCK_VERIFICATION_TRIALS), each)[:, None]
    mb, mc = _within(base, nb)[0], _within(cand, used)[0]
    limit_log = -math.log1p(-policy.limit_pct / 100)
    regression, L = mb - mc, mb.shape[1]
    others = (regression.sum(axis=1, keepdims=True) - regression) / max(L - 1, 1)
    standing_out = others <= FOCUS_SWEEP * limit_log  # the other levels' mean within its share of the limit
    beyond = (regression > limit_log) & standing_out  # the candidate's first start beyond the limit at a level
    return np.minimum(np.where(beyond, np.maximum(k, FOCUS_TRIALS), k), policy.max_trials)


def _starts_test(base: list[tuple[np.ndarray, np.ndarray]], cand: list[tuple[np.ndarray, np.ndarray]],
                 prior: np.ndarray | None, prior_df: int, history: Learned | None, policy: JudgePolicy,
                 limit_log: float, pairs: bool) -> SimpleNamespace:
    """``starts._compare`` vectorised over the runs, the test over these starts (each ``(values, trials)``):
    ``failed``, and ``rules_out`` (``starts._pass_doubt``: twice the limit ruled out on the sweep's mean)."""
    runs, L = base[0][1].shape
    kb, kc = len(base), len(cand)
    means = [[_within(x, n) for x, n in side] for side in (base, cand)]
    total_ss = sum(ss for side in means for _, ss in side).sum(axis=1)
    total_df = sum(n - 1 for side in (base, cand) for _, n in side).sum(axis=1)
    pooled_ss, pooled_df = total_ss, total_df
    if prior is not None:  # noise.mean_estimate pooled in (stats.pool)
        kp = min(prior_df, MAX_PRIOR_DF)
        pooled_ss, pooled_df = total_ss + (prior ** 2).mean(axis=1) * kp, total_df + kp
    effects = [_trial_effect(x, n) for side in (base, cand) for x, n in side]
    t_ss, t_df = sum(e[0] for e in effects), sum(e[1] for e in effects)
    shock = _shares_shock(t_ss, t_df, total_ss, total_df)
    with np.errstate(divide="ignore", invalid="ignore"):
        level_var = pooled_ss / pooled_df
        sweep_var = np.where(shock, t_ss / t_df, level_var)
    df = np.where(shock, t_df, pooled_df).astype(float)
    excess, count = np.zeros(runs), 0
    if pairs:
        for side, stats in zip((base, cand), means):
            if len(side) > 1:
                sweeps = [m.mean(axis=1) for m, _ in stats]
                centre = sum(sweeps) / len(sweeps)
                trials = sum(sweep_var / L ** 2 * (1 / n).sum(axis=1) for _, n in side)
                excess = excess + sum((m - centre) ** 2 for m in sweeps) - (len(side) - 1) / len(side) * trials
                count += len(side) - 1
    sigma_r = _in_force(history, runs, excess, count)
    between = sigma_r ** 2 * (1 / kb + 1 / kc)
    diffs = sum(m for m, _ in means[1]) / kc - sum(m for m, _ in means[0]) / kb
    weights = sum(1 / n for _, n in cand) / kc ** 2 + sum(1 / n for _, n in base) / kb ** 2
    alpha = policy.false_fail * TEST_SHARE
    one = L == 1
    within = sweep_var / L ** 2 * weights.sum(axis=1)
    se = np.sqrt(within + between)
    d = diffs.mean(axis=1)
    eff = _satterthwaite([(within, df), (between, None)])
    failed = (-d > limit_log) & (-d > _t(1 - (alpha if one else alpha * SWEEP_SHARE), eff) * se)
    rules_out = -d + _t(1 - policy.miss * PASS_SHARE, eff) * se < 2 * limit_log
    if not one:
        within_l = level_var[:, None] * weights
        se_l = np.sqrt(within_l + between[:, None])
        eff_l = _satterthwaite([(within_l, df[:, None]), (np.broadcast_to(between[:, None], within_l.shape), None)])
        q = _t(1 - alpha * (1 - SWEEP_SHARE) / L, eff_l)
        failed |= ((-diffs > limit_log) & (-diffs > q * se_l)).any(axis=1)
    return SimpleNamespace(failed=failed, rules_out=rules_out)


def _over_starts(rng: np.random.Generator, model: NoiseModel, sigma: float, outcome: np.ndarray, used: np.ndarray,
                 base: np.ndarray, nb: np.ndarray, cand: np.ndarray, shift: np.ndarray, prior: np.ndarray | None,
                 prior_df: int, history: Learned | None, policy: JudgePolicy, limit_log: float, bounds: Boundaries,
                 k: np.ndarray, c2: bool) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """The promote's outcome after deciding over starts (``deployctl.judge.starts``) vectorised; ``starts_a_side``
    starts a side (3 on one level: C2 and C3 before the rollback, B2 and B3 after it).

    A FAIL that ``judge()`` or the test still fails on one start a side with the guard (``_in_force``) in the
    variance is robust, and so is a PASS whose sweep mean rules out twice the limit there (``pass_robust``);
    any other FAIL or PASS and a final INCONCLUSIVE roll back: the candidate restarted in place first (C2, ``c2``), then the
    restored baseline on its new start (B2), ``k`` trials a level (``verification_plan``) each with its own restart
    offset, and ``judge_over_starts`` decides: FAIL or INCONCLUSIVE. Returns (the final outcome code, which
    runs were decided over starts, the restored baseline's starts [B2(, B3)], the candidate's later ones [C2(, C3)],
    empty without ``c2``: the design it replaced, one verification B2 and no third start).
    """
    runs, L = nb.shape
    mb, ssb = _within(base, nb)
    mc, ssc = _within(cand, used)
    guard = _in_force(history, runs)
    judged, _ = _look(mb, ssb, nb, _trial_effect(base, nb), cand, used, mc, ssc, prior, prior_df,
                      2 * guard[:, None] ** 2, np.full(runs, np.inf), limit_log, bounds)
    one_start = _starts_test([(base, nb)], [(cand, used)], prior, prior_df, history, policy, limit_log, pairs=False)
    robust = judged.any(axis=1) | one_start.failed
    over = (outcome == 3) | ((outcome == 1) & ~robust) | ((outcome == 2) & ~one_start.rules_out)
    nv = k
    # Drawn to max_trials, the first k[run] used: the cross-check cuts them by the real verification_plan.
    verify, again = [], []
    for _ in range((starts_a_side(L) if c2 else STARTS) - 1):
        verify.append(model.trials(rng, sigma, (runs, L, policy.max_trials)))  # the restored baseline on a new start
        if c2:
            again.append(model.trials(rng, sigma, (runs, L, policy.max_trials)) + shift)  # the candidate restarted
    fail = _starts_test([(base, nb)] + [(v, nv) for v in verify], [(cand, used)] + [(x, nv) for x in again], prior,
                        prior_df, history, policy, limit_log, pairs=True).failed
    return np.where(over, np.where(fail, 1, 3), outcome), over, verify, again


def _outliers(base: np.ndarray, nb: np.ndarray, cand: np.ndarray, fresh: np.ndarray, lo: int) -> bool:
    """Whether a baseline round or judge() would set a trial aside: the vectorised rules do not, so such runs differ."""
    hi = cand.shape[1]
    for j in range(len(nb)):
        values = ([list(np.exp(base[j, :nb[j]]))] + [list(np.exp(cand[j, :k])) for k in range(lo, hi + 1)]
                  + [list(np.exp(fresh[j, :k])) for k in range(lo, hi + 1)])
        if any(outlier_indices(v) for v in values):
            return True
    return False


def _real(base: np.ndarray, nb: np.ndarray, cand: np.ndarray, fresh: np.ndarray, verify: list[np.ndarray],
          again: list[np.ndarray], levels: tuple[int, ...], policy: JudgePolicy, prior: np.ndarray | None, prior_df: int,
          learned_restart: RestartNoise | None) -> tuple[JudgeOutcome, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The same run through the baseline's rounds, ``judge()`` and, where ``over_starts_needed``, ``judge_over_starts``
    with the first trials ``verification_plan`` asks of the restored baseline's starts ``verify`` (and of the
    candidate's later ones ``again``), as many a side as ``starts_a_side`` asks: (outcome, candidate trials, fresh
    baseline size, the verification's trials a level if any)."""
    learned = {c: NoiseEstimate(float(prior[j]), prior_df) for j, c in enumerate(levels)} if prior is not None else {}
    restart = learned_restart or DEFAULT_RESTART
    measured = first_stage_trials(policy, levels, learned)
    while more := baseline_top_up(policy, _result(levels, [list(fresh[j, :measured[c]]) for j, c in enumerate(levels)]),
                                  learned, restart):
        measured = {c: measured[c] + more.get(c, 0) for c in levels}
    baseline = _result(levels, [list(base[j, :nb[j]]) for j in range(len(levels))])
    n = {c: policy.min_trials for c in levels}
    while True:
        candidate = _result(levels, [list(cand[j, :n[c]]) for j, c in enumerate(levels)])
        verdict = judge(baseline, candidate, policy, learned or None, restart)
        if verdict.final:
            outcome, k = verdict.outcome, ()
            if over_starts_needed(verdict, baseline, candidate, policy, learned or None, learned_restart):
                plan = verification_plan(policy, baseline, candidate)
                k = tuple(plan[c] for c in levels)
                later = starts_a_side(len(critical_levels(policy, baseline))) - 1
                restored = [_result(levels, [list(v[:n]) for v, n in zip(start, k)]) for start in verify[:later]]
                candidates = [candidate] + [_result(levels, [list(v[:n]) for v, n in zip(start, k)])
                                            for start in again[:later]]
                outcome = judge_over_starts([baseline, *restored], candidates, policy, learned or None,
                                            learned_restart).outcome
            return outcome, tuple(n.values()), tuple(measured[c] for c in levels), k
        for c, more in verdict.more_trials.items():
            n[c] += more


def _result(levels: tuple[int, ...], values: list[list[float]]) -> BenchResult:
    p = Percentiles()
    return BenchResult(url="sim", model="sim", input_tokens=1000, output_tokens=1000, started_at=0.0, levels=tuple(
        LevelResult(c, tuple(
            TrialResult(concurrency=c, trial=i + 1, started_at=0.0, wall_s=60.0, requests_ok=128, requests_failed=0,
                        output_tokens=int(v * 60), input_tokens=128_000, output_tok_s=float(v), input_tok_s=0.0,
                        per_request_tok_s=p, ttft_s=p, itl_s=p, tpot_s=p, e2e_s=p)
            for i, v in enumerate(vs)))
        for c, vs in zip(levels, values)))


def cross_check(model: NoiseModel, runs: int, seed: int = 7, changes: tuple[float, ...] = (0.0, -0.05, -0.10),
                sigma: float = 0.03, c2: bool = True) -> tuple[int, int, int]:
    """(disagreements, runs compared, of them decided over starts) between the vectorised decisions and
    ``judge()`` (then ``judge_over_starts``) under ``model``, over both sweeps, every way of getting the
    baseline and ``changes`` — what the unit test runs small."""
    rng = np.random.default_rng(seed)
    policy = JudgePolicy()
    mismatches = compared = over = 0
    for levels in ((BenchPolicy().concurrency[-1],), tuple(BenchPolicy().concurrency)):
        bounds = Boundaries(policy, false_fail_per_test(policy, levels))
        for (where, learned), change in itertools.product(SCENARIOS, changes):
            cell = simulate(rng, sigma, change, policy, runs, levels, where == "reused", learned, 16, runs, bounds,
                            model=model, c2=c2)
            mismatches, compared, over = mismatches + cell.mismatches, compared + cell.compared, over + cell.compared_over
    return mismatches, compared, over


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20_000, help="simulated promotions per cell")
    ap.add_argument("--prior-df", type=int, default=16, help="df of the learned σ (16: four 5-trial baselines)")
    ap.add_argument("--restart-pairs", type=int, default=8,
                    help="restart pairs a host with history has learned its restart σ from (default 8)")
    ap.add_argument("--trial-s", type=float, default=170.0, help="seconds of one trial of one level")
    ap.add_argument("--check", type=int, default=200, help="runs per cell also put through judge()")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shock-corr", type=float, default=0.0, metavar="RHO",
                    help="a per-trial shock shared by the sweep's levels, with this correlation (0…1)")
    ap.add_argument("--restart-sigma", type=float, default=0.0, metavar="SIGMA",
                    help="each server start's own offset, σ of the log (0.02 = 2 %%)")
    ap.add_argument("--tails-df", type=float, default=None, metavar="DF",
                    help="Student t trial noise with DF degrees of freedom (> 2), scaled to the same σ")
    ap.add_argument("--models", action="store_true",
                    help="every noise model the targets are checked under, one after the other: "
                         + "; ".join(m.name for m in MODELS).replace("%", "%%"))
    ap.add_argument("--targets-only", action="store_true",
                    help="only Δ = 0 and −10 %% (the error targets), not the seven Δ of the cost")
    ap.add_argument("--sweeps", choices=("both", "one", "five"), default="both",
                    help="one critical level, the default 5-level sweep, or both")
    ap.add_argument("--scenarios", default="fresh,fresh+σ,reused,reused+σ",
                    help="which ways of getting the baseline, comma-separated (default: all four)")
    ap.add_argument("--baseline-start-only", action="store_true",
                    help="decide over starts without restarting the candidate (B2 only, no C2): the design it replaced")
    args = ap.parse_args()
    if args.tails_df is not None and args.tails_df <= 2:
        ap.error("--tails-df must be above 2 (the noise needs a variance to scale to σ)")
    if not 0 <= args.shock_corr < 1:
        ap.error("--shock-corr must be in [0, 1)")
    policy = JudgePolicy()
    sweep = tuple(BenchPolicy().concurrency)
    sweeps = {"both": ((sweep[-1],), sweep), "one": ((sweep[-1],),), "five": (sweep,)}[args.sweeps]
    models = MODELS if args.models else (NoiseModel(args.shock_corr, args.restart_sigma, args.tails_df),)
    changes = (0.0, -0.10) if args.targets_only else CHANGES
    chosen = set(args.scenarios.split(","))
    if not chosen <= {"fresh", "fresh+σ", "reused", "reused+σ"}:
        ap.error("--scenarios takes fresh, fresh+σ, reused, reused+σ")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"policy: limit −{policy.limit_pct:g} %, false fail {policy.false_fail:g}, miss {policy.miss:g} "
          f"(at twice the limit), trials {policy.min_trials}…{policy.max_trials}; {args.runs} runs a cell; "
          f"learned σ with {args.prior_df} df and restart σ from {args.restart_pairs} pairs; default restart σ "
          f"{100 * DEFAULT_RESTART_SIGMA:g} %; a trial = {args.trial_s:g} s; fixed design {FIXED}+{FIXED} "
          f"trials a level\n")
    mismatches = compared = 0
    summary = []
    for model in models:
        print(f"# noise: {model.name}\n")
        for levels in sweeps:
            bounds = Boundaries(policy, false_fail_per_test(policy, levels))
            fixed_s = 2 * FIXED * args.trial_s * len(levels)
            for where, learned in [sc for sc in SCENARIOS if sc[0] + ("+σ" if sc[1] else "") in chosen]:
                name = where + (" + learned σ" if learned else "")
                print(f"## {len(levels)} critical level(s) {list(levels)}, {name} (fixed design {fixed_s:g} trial-s)")
                print(f"{'σ':>4} {'Δ':>5} {'FAIL':>7} {'PASS':>6} {'INCONC':>6} {'base':>5} {'cand':>5} {'verif':>5} "
                      f"{'over':>6} {'restarts':>8} {'at min':>6} {'trial-s':>8} {'of fixed':>8}"
                      + (f" {'fallback':>8}" if where == "reused" else ""))
                per_sigma = {}
                cells: dict[tuple[float, float | str], Cell] = {}
                for sigma in SIGMAS:
                    costs = []
                    for change in changes:
                        cell = simulate(rng, sigma, change, policy, args.runs, levels, where == "reused", learned,
                                        args.prior_df, args.check, bounds, model=model, pairs=args.restart_pairs,
                                        c2=not args.baseline_start_only)
                        cells[(sigma, change)] = cell
                        mismatches, compared = mismatches + cell.mismatches, compared + cell.compared
                        cost = (cell.base_trials + cell.cand_trials + cell.verify_trials) * args.trial_s * len(levels)
                        costs.append(cost)
                        print(f"{100 * sigma:3.0f}% {100 * change:+4.0f}% {100 * cell.fail:6.2f}% "
                              f"{100 * cell.passed:5.1f}% {100 * cell.inconclusive:5.1f}% {cell.base_trials:5.2f} "
                              f"{cell.cand_trials:5.2f} {cell.verify_trials:5.2f} {100 * cell.over_starts:5.1f}% "
                              f"{cell.restarts:8.2f} {100 * cell.at_min:5.1f}% {cost:8.0f} "
                              f"{100 * cost / fixed_s:7.0f}%" + (f" {100 * cell.fallback:7.2f}%" if where == "reused" else ""))
                    if len(changes) == len(CHANGES):
                        per_sigma[sigma] = sum(costs) / len(costs)
                    if len(levels) > 1 and not args.targets_only:
                        cell = simulate(rng, sigma, -0.10, policy, args.runs, levels, where == "reused", learned,
                                        args.prior_df, args.check, bounds, one_level=True, model=model,
                                        pairs=args.restart_pairs, c2=not args.baseline_start_only)
                        cells[(sigma, "one")] = cell
                        mismatches, compared = mismatches + cell.mismatches, compared + cell.compared
                        print(f"{100 * sigma:3.0f}% −10% at C={levels[-1]} only: FAIL {100 * cell.fail:.2f} %, "
                              f"PASS {100 * cell.passed:.1f} %, INCONCLUSIVE {100 * cell.inconclusive:.1f} %")
                summary.append((model.name, len(levels), name, *_targets(cells, per_sigma, fixed_s, policy)))
    print("# the targets, worst σ of 1, 2, 3 %: A/A falsely failed ≤ 1 %, −10 % caught ≥ 95 %"
          + ("" if args.targets_only else ", i.i.d. mean cost at σ = 3 % ≤ 50 % of the fixed design"))
    for name, count, scenario, aa, caught, share in summary:
        cost = f", cost {100 * share:.0f} %" if share is not None and name == IID.name else ""
        ok = aa <= 0.01 and caught >= 0.95 and (share is None or name != IID.name or share <= 0.5)
        print(f"  {name:<45} {count} level(s) {scenario:<20} A/A {100 * aa:5.2f} %, −10 % {100 * caught:5.1f} %"
              f"{cost}: {'met' if ok else 'MISSED'}")
    print(f"judge() cross-check: {mismatches} disagreement(s) in {compared} runs (the first {args.check} of every "
          "cell; runs where judge() set an outlier trial aside are not compared)")
    print(f"({time.perf_counter() - started:.0f} s)")


def _targets(cells: dict[tuple[float, float | str], Cell], per_sigma: dict[float, float], fixed_s: float,
             policy: JudgePolicy) -> tuple[float, float, float | None]:
    """Print the targets of one table; return (worst A/A false fail, worst −10 % caught, σ = 3 % cost share)."""
    def mark(ok: bool) -> str:
        return "met" if ok else "MISSED"

    aa = max(cells[(s, 0.0)].fail for s in SIGMAS)
    caught = min(cells[(s, -0.10)].fail for s in SIGMAS)
    kept = min(cells[(s, 0.0)].passed for s in SIGMAS)
    worst = max(SIGMAS)
    if (worst, "one") in cells:
        one = min(cells[(s, "one")].fail for s in SIGMAS)
        print(f"  −10 % at one level only, caught (worst σ): {100 * one:.1f} % (not a target; the per-level power)")
    line = (f"  A/A falsely failed (worst σ): {100 * aa:.2f} % (≤ 1 %) {mark(aa <= 0.01)}; "
            f"−10 % caught (worst σ): {100 * caught:.1f} % (≥ 95 %) {mark(caught >= 0.95)}; "
            f"Δ = 0 kept (worst σ): {100 * kept:.1f} % (≥ 80 %) {mark(kept >= 0.8)}")
    if (worst, -0.87) in cells:
        big = all(cells[(s, -0.87)].fail == 1.0 and cells[(s, -0.87)].at_min == 1.0 for s in SIGMAS)
        line += f"; −87 % caught at {policy.min_trials} trials: {mark(big)}"
    print(line)
    if not per_sigma:
        print()
        return aa, caught, None
    shares = ", ".join(f"σ={100 * s:.0f} % {100 * c / fixed_s:.1f} %" for s, c in per_sigma.items())
    print(f"  mean trial-seconds over the seven Δ, of the fixed design: {shares} "
          f"(σ = {100 * worst:.0f} % ≤ 50 %: {mark(per_sigma[worst] <= fixed_s / 2)})\n")
    return aa, caught, per_sigma[worst] / fixed_s


if __name__ == "__main__":
    main()
