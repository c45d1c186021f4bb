"""A host's trial-to-trial noise, learned from repeated measurements of an unchanged release.

Every time deployctl measures a release that did not change (a baseline, a rollback's verification, a
canary watch) the spread of its trials at a level is an A/A sample of that host's noise at that level.
Pooled over samples (within-sample variance only: a release measured on another day may sit at another
mean, which is drift, not noise) it gives an estimate σ with degrees of freedom Σ(nᵢ − 1). The judge
pools that estimate with the variance of the trials in front of it, so a quiet host decides in fewer
trials and a noisy one asks for more; the current trials always weigh in, so a host that became
noisier is seen at once.

What the ledger stores per (deployment, level, metric) is a ``NoiseEstimate``: ``sigma`` (of the log
trial values) and ``df``. ``learn`` folds a new A/A sample into a stored estimate; the prior's weight is
capped (``MAX_PRIOR_DF``) so that old history never drowns what the host does now.

A second component no within-run spread can show is the **restart** offset: each server start has its
own speed, and the baseline and the candidate always run on two starts. ``restart_pair`` reads it off
two measurements of the same unit on two starts (a rollback's verification against the baseline before
the promote, an A/A promote's candidate against its baseline, a candidate's second server start against
its first, the first canary watch on a new start against the release's reference measured on an earlier one); ``learn_restart`` pools such pairs into
a ``RestartNoise``, with ``DEFAULT_RESTART_SIGMA`` weighing as ``DEFAULT_RESTART_WEIGHT`` pairs so the
estimate moves off the default as the host's own pairs come in.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from scipy.special import fdtri, ndtri

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.pooling import NOTHING, shared_spreads
from deployctl.judge.stalls import sort_stalls
from deployctl.judge.stats import (
    DEFAULT_RESTART, DEFAULT_RESTART_SIGMA, MAX_PRIOR_DF, NoiseEstimate, RestartNoise, effective_df, outlier_indices,
    pool,
)
from deployctl.judge.metrics import METRICS, stall_scale, valid_trials
from deployctl.judge.sweep import critical_count, false_fail_per_test, sweep_shock, sweep_spreads


def sample_sum_of_squares(values: Sequence[float]) -> tuple[float, int]:
    """Σ(log x − mean)² and its degrees of freedom for one A/A sample, outlier trials set aside."""
    far = set(outlier_indices(values))
    logs = [math.log(v) for i, v in enumerate(values) if i not in far and v > 0 and math.isfinite(v)]
    if len(logs) < 2:
        return 0.0, 0
    mean = sum(logs) / len(logs)
    return sum((x - mean) ** 2 for x in logs), len(logs) - 1


def learn(prior: NoiseEstimate | None, samples: Iterable[Sequence[float]]) -> NoiseEstimate | None:
    """``prior`` updated with new A/A samples (each the trial values of one unchanged release at one level)."""
    ss, df = 0.0, 0
    if prior is not None:
        df = min(prior.df, MAX_PRIOR_DF)
        ss = prior.sigma ** 2 * df
    for values in samples:
        s, d = sample_sum_of_squares(values)
        ss, df = ss + s, df + d
    if df == 0:
        return prior
    if df > MAX_PRIOR_DF:
        ss, df = ss * MAX_PRIOR_DF / df, MAX_PRIOR_DF
    return NoiseEstimate(math.sqrt(ss / df), df)


def plan_z(false_fail: float, miss: float, levels: int) -> float:
    """The separation, in standard errors at the candidate's last look, a baseline is sized for.

    The sizing is for the decisions the policy promises about the sweep's critical ``levels``, both at
    rate ``1 − miss``: an unchanged candidate is kept — PASS at every level, so each level's chance is
    ``(1 − miss)^(1/levels)`` — and a regression of twice the limit at every level is failed — FAIL at
    some level, so each level needs only ``1 − miss^(1/levels)``. One level gives the textbook
    ``z_false_fail + z_miss``. A regression at one level only is *not* sized for: whatever the
    baseline, the PASS boundary keeps it from being kept more often than ``miss``; a larger baseline only
    turns its INCONCLUSIVE into FAIL, and ``inconclusive: keep_baseline`` rolls both back (simulated,
    docs/judge.md: sizing it for that as well cost a brand-new host 55 % of the fixed design's time
    instead of 49 % at σ = 3 %, and took its FAIL label from 81 % to 86 %).
    """
    n = max(1, levels)
    keep = float(ndtri(1 - miss) + ndtri((1 - miss) ** (1 / n)))
    fail = float(ndtri(1 - false_fail) + ndtri(1 - miss ** (1 / n)))
    return max(keep, fail)


def planned_trials(
    sigma: float | None, limit_log: float, *, false_fail: float, miss: float, least: int, most: int,
    levels: int = 1, restart_sigma: float = 0.0,
) -> int:
    """Baseline trials for a design that separates 0 from twice the limit (``plan_z``).

    The baseline's count is fixed before the candidate runs, and the candidate may run up to ``most``
    trials: the baseline is the smallest (at least ``least``) with which ``most`` candidate trials reach
    that separation, ``σ²·(1/n_b + 1/most) + 2·σ_restart² ≤ (2·limit / plan_z)²``; the sequential
    candidate stops sooner whenever the trials are clear. Past that, or without any σ: ``most``.
    """
    if sigma is None:
        return most
    if sigma <= 0:  # identical trials: nothing to separate from
        return least
    z = plan_z(false_fail, miss, levels)
    room = (2 * limit_log / z) ** 2 - 2 * restart_sigma ** 2
    for n in range(least, most):
        if sigma ** 2 * (1 / n + 1 / most) <= room:
            return n
    return most


# Below this many degrees of freedom a σ estimate is too unsure to plan on: σ̂² ~ σ²·χ²_ν/ν, and at ν = 1
# (one level's first stage) σ̂ is below half of σ 38 % of the time; planned on, such a baseline caught a
# −10 % regression in only 79 % of one-level promotes (benchmarks/judge_calibration.py). At ν = 4 that
# chance is 9 %, and a sweep of 4 levels or a host with any learned σ of 4 df gets there.
MIN_PLAN_DF = 4


def first_stage_trials(
    policy: JudgePolicy, levels: Sequence[int], learned: Mapping[int, NoiseEstimate]
) -> dict[int, int]:
    """Baseline trials per level measured before anything is known of today's noise.

    An explicit ``policy.baseline_trials`` is the whole baseline (an operator's choice). Otherwise the
    first stage is ``min_trials`` a level and ``baseline_plan`` decides from its spread whether to add
    more; where that stage could not reach ``MIN_PLAN_DF`` (one or two levels, nothing learned) the
    plan would be ``max_trials`` whatever it shows, so that is measured at once, in one sweep.
    """
    if policy.baseline_trials is not None:
        return {c: policy.baseline_trials for c in levels}
    pilot_df = len(levels) * (policy.min_trials - 1)

    def plannable(c: int) -> bool:
        return pilot_df + min(learned[c].df if c in learned else 0, MAX_PRIOR_DF) >= MIN_PLAN_DF

    return {c: policy.min_trials if plannable(c) else policy.max_trials for c in levels}


def baseline_plan(
    policy: JudgePolicy, measured: BenchResult, learned: Mapping[int, NoiseEstimate],
    restart: RestartNoise = DEFAULT_RESTART,
) -> dict[int, int]:
    """Valid baseline trials each level should have, sized from the noise ``measured`` shows so far.

    The baseline cannot be extended once the candidate runs, so it is sized before: an internal pilot
    (Wittes & Brittain): the spread of the trials so far, pooled over the sweep's levels (a far noisier
    level apart, ``pooling``) and with the learned σ, goes into the fixed design's sample size
    (``planned_trials``); the judge later uses all the trials, so the pilot costs its error rates
    nothing (a sample variance tells nothing of its mean). With too little to go on (fewer than
    ``MIN_PLAN_DF`` effective degrees of freedom: one or two levels with nothing learned, or levels
    that move together trial by trial): ``max_trials``. ``restart``: the between-restart σ the judge
    will add, which no baseline trial averages away.
    """
    levels = [lv.concurrency for lv in measured.levels]
    if policy.baseline_trials is not None:
        return {c: policy.baseline_trials for c in levels}
    spreads = sweep_spreads(measured, None, policy.metric)
    shared = shared_spreads(spreads, shock=sweep_shock(measured, None, policy.metric))
    false_fail = false_fail_per_test(policy, levels)
    decisive = critical_count(policy, levels)
    plan = {}
    for c in levels:
        own = spreads.get(c, NOTHING) + (shared[c].spread if c in shared else NOTHING)
        prior = learned.get(c)
        noise = pool(prior, own.ss, own.df)
        df = _effective(noise.df, shared[c].components if c in shared else (), prior) if noise is not None else 0
        sigma = noise.sigma if noise is not None and df >= MIN_PLAN_DF else None
        limit = policy.rule_for(c).limit_pct or policy.limit_pct
        plan[c] = planned_trials(
            sigma, -math.log1p(-min(limit, 99.0) / 100),
            false_fail=false_fail, miss=policy.miss, least=policy.min_trials, most=policy.max_trials,
            # The split of the miss over the levels assumes their errors independent; levels that move
            # together (a shared per-trial shock seen) fail together or not at all: sized as one.
            levels=1 if c in shared and shared[c].components else decisive,
            restart_sigma=_planned_restart(restart.in_test()),
        )
    return plan


def _planned_restart(restart: RestartNoise) -> float:
    """The restart σ a baseline is sized for: the host's learned one; the default only guards the test.

    Sizing for the default as well put a brand-new host's baseline at σ = 3 % on the knife edge between
    2 and 3 trials a level (the default sweep's cost 51 % of the fixed design instead of 50 %); the
    sequential candidate still adds the trials a wider test needs.
    """
    return restart.sigma if restart.df is not None else 0.0


def _effective(df: int, components: Sequence, prior: NoiseEstimate | None) -> float:
    """The pool's effective df, as ``stats.log_ratio_interval`` counts it (the levels' shared shock allowed for)."""
    if not components:
        return df
    k = min(prior.df, MAX_PRIOR_DF) if prior is not None else 0
    parts = [(p.ss, p.df) for p in components] + ([(prior.sigma ** 2 * k, k)] if prior is not None and k else [])
    found = effective_df(parts)
    return df if math.isinf(found) else min(float(df), found)


def baseline_top_up(
    policy: JudgePolicy, measured: BenchResult, learned: Mapping[int, NoiseEstimate],
    restart: RestartNoise = DEFAULT_RESTART,
) -> dict[int, int]:
    """The baseline trials of the next round: one at each level whose plan wants more, never past ``max_trials``.

    Called again after every round until it returns nothing. Each round's trials go into the next plan,
    so a sweep whose first two trials looked noisy by chance stops at three instead of being topped up
    to the first plan's five at once (simulated at σ = 3 %: the default sweep's baseline averages 2.6
    trials a level instead of 2.8, for the same error rates). Invalid trials count against the budget;
    trials a stall set aside do not count as valid and do not (``stalls.MAX_STALL_EXTRA`` at most), and a
    level whose trials disagree without a clean majority gets one more (``stalls.sort_stalls``).
    """
    metric = METRICS[policy.metric]
    sigma = stall_scale((measured,), metric)
    out = {}
    for c, want in baseline_plan(policy, measured, learned, restart).items():
        level = measured.level(c)
        trials = level.trials if level is not None else ()
        stalls = sort_stalls(valid_trials(trials, metric)[0], c, "baseline", sigma=sigma,
                             higher_is_better=metric.higher_is_better)
        if (len(stalls.kept) < want or stalls.more) and len(trials) < max(policy.max_trials, want) + stalls.extra:
            out[c] = 1
    return out


def describe_baseline(first: Mapping[int, int], more: Mapping[int, int]) -> str:
    """How the baseline was sized, in the operator's words: ``baseline: 2 trials a level, then C=64 +1 …``."""
    counts = set(first.values())
    text = "baseline: " + (f"{counts.pop()} trial(s) a level" if len(counts) == 1 else
                           ", ".join(f"C={c} {n} trial(s)" for c, n in sorted(first.items())))
    if more:
        return text + (", then " + ", ".join(f"C={c} +{n}" for c, n in sorted(more.items())) +
                       " where the trials' spread, pooled over the levels, asked for more")
    return text


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def aa_samples(result: BenchResult, metric: str) -> dict[int, list[float]]:
    """The valid trial values of ``metric`` per level of one measurement of an unchanged release, stalls set aside."""
    out: dict[int, list[float]] = {}
    sigma = stall_scale((result,), METRICS[metric])
    for level in result.levels:
        # A stall is not the host's trial-to-trial noise: learned into σ it would widen every later test.
        good = sort_stalls(valid_trials(level.trials, METRICS[metric])[0], level.concurrency, "", sigma=sigma,
                           higher_is_better=METRICS[metric].higher_is_better).values
        if len(good) >= 2:
            out[level.concurrency] = good
    return out


def learn_from(
    known: Mapping[int, NoiseEstimate], result: BenchResult, metric: str
) -> dict[int, NoiseEstimate]:
    """``known`` (per level, as the ledger holds it) updated with one more A/A measurement."""
    updated = dict(known)
    for c, values in aa_samples(result, metric).items():
        estimate = learn(known.get(c), [values])
        if estimate is not None:
            updated[c] = estimate
    return updated


def learn_history(results: Iterable[BenchResult], metric: str) -> dict[int, NoiseEstimate]:
    """Per level, the noise learned from stored A/A measurements, oldest first (the newest weigh most)."""
    known: dict[int, NoiseEstimate] = {}
    for result in results:
        known = learn_from(known, result, metric)
    return known


# --- the between-restart component -------------------------------------------------------------------

# The default counts as this many restart pairs: a host's first few pairs (each one degree of freedom)
# move the estimate without a single lucky pair setting it to zero.
DEFAULT_RESTART_WEIGHT = 4


@dataclass(frozen=True)
class PairSource:
    """What measured a restart pair's second side, in the operator's words (one, many)."""

    one: str
    many: str


ROLLBACK_VERIFICATION = PairSource("rollback verification", "rollback verifications")
AA_PROMOTE = PairSource("A/A promote", "A/A promotes")
WATCH_AFTER_RESTART = PairSource("canary watch after a restart", "canary watches after a restart")
CANDIDATE_RESTARTED = PairSource("candidate restarted in place", "candidates restarted in place")


@dataclass(frozen=True)
class RestartPair:
    """One unit measured on two server starts: the difference of its sweep means, and what the trials alone
    make that difference vary by — ``scale`` times the mean square of a trial's mean over the levels, of
    which ``ss`` over ``df`` is this pair's own estimate (``learn_restart`` pools them over the pairs)."""

    difference: float  # mean over the common levels of (mean log after − mean log before)
    scale: float  # Σ (1/n_after + 1/n_before) over the levels / levels²
    ss: float
    df: int
    source: PairSource | None = None  # None: not said (the calibration's simulated pairs)


def restart_pair(
    before: BenchResult, after: BenchResult, metric: str, learned: Mapping[int, NoiseEstimate],
    source: PairSource | None = None,
) -> RestartPair | None:
    """The restart pair of two measurements of one unit on two starts, None without a common level.

    Per common level the difference of the mean logs, averaged over the levels: a start's offset is
    shared by its levels. The within-run part of that average's variance comes from ``before``'s trial
    effect (``pooling.trial_effect``: with levels that share a per-trial shock, the sweep's mean moves
    with it, not by σ/√L), else from its pooled spread with the learned σ as if the levels were
    independent.
    """
    value = METRICS[metric].value
    late = {lv.concurrency: [float(v) for t in lv.trials if t.invalid_reason is None and _positive(v := value(t))]
            for lv in after.levels}
    diffs, weights = [], []
    for c, base in aa_samples(before, metric).items():
        if not late.get(c):
            continue
        logs_b, logs_a = [math.log(v) for v in base], [math.log(v) for v in late[c]]
        diffs.append(sum(logs_a) / len(logs_a) - sum(logs_b) / len(logs_b))
        weights.append(1 / len(logs_a) + 1 / len(logs_b))
    if not diffs:
        return None
    shock = sweep_shock(before, None, metric)
    count = len(diffs)
    scale = sum(weights) / count ** 2
    if shock.df >= 1:  # L × the variance of a trial's mean over the levels, with any shared shock in it
        return RestartPair(sum(diffs) / count, scale, shock.ss, shock.df, source)
    spreads = sweep_spreads(before, None, metric)
    ss, df = sum(sp.ss for sp in spreads.values()), sum(sp.df for sp in spreads.values())
    noise = pool(mean_estimate(learned, list(spreads)), ss, df)
    if noise is None:
        return None
    return RestartPair(sum(diffs) / count, scale, noise.sigma ** 2 * noise.df, noise.df, source)


def mean_estimate(learned: Mapping[int, NoiseEstimate], levels: Sequence[int]) -> NoiseEstimate | None:
    """The learned σ of a sweep's levels as one estimate (mean variance, the fewest df), None if none is learned."""
    known = [learned[c] for c in levels if c in learned]
    if not known:
        return None
    df = min(min(k.df for k in known), MAX_PRIOR_DF)
    return NoiseEstimate(math.sqrt(sum(k.sigma ** 2 for k in known) / len(known)), df)


def learn_restart(pairs: Sequence[RestartPair]) -> RestartNoise:
    """The between-restart σ a side from restart pairs (method of moments), the default weighing in.

    Each pair's difference has variance ``2·σ_r² + scale·m`` with ``m`` the within-run mean square of a
    trial's mean over the levels, pooled over the pairs (one pair's own has a degree of freedom or two:
    subtracted pair by pair it made a host without any restart effect learn one of 1–2 % by chance, and
    a one-level promote then caught −10 % 88 % of the time instead of 95 %). The excess, halved, is σ_r²,
    shrunk towards the default (``DEFAULT_RESTART_WEIGHT`` pairs). Drift between the two measurements
    counts as restart variance: the baseline and the candidate are measured at two times as well.
    Without pairs: ``DEFAULT_RESTART``.
    """
    used = list(pairs)[-MAX_PRIOR_DF:]
    if not used:
        return DEFAULT_RESTART
    df = sum(p.df for p in used)
    mean_square = sum(p.ss for p in used) / df if df else 0.0
    excess = sum(p.difference ** 2 - p.scale * mean_square for p in used) / 2
    k = DEFAULT_RESTART_WEIGHT
    sigma2 = max(0.0, (k * DEFAULT_RESTART_SIGMA ** 2 + excess) / (k + len(used)))
    return RestartNoise(math.sqrt(sigma2), k + len(used),
                        f"learned from {len(used)} restart pair(s) of this host{_sources(used)}, the default "
                        f"weighing as {k}", seen=restart_seen(used, mean_square, df))


# The pairs show a restart offset when their differences' mean square exceeds what the trials alone give
# at this level (an F test); below it ``RestartNoise.in_test`` keeps the default.
RESTART_SEEN_ALPHA = 0.05


def restart_seen(pairs: Sequence[RestartPair], mean_square: float, df: int) -> bool:
    """Whether ``Σ d²`` over what the trials alone make it (``m̄ · Σ scale``) is beyond chance: F(pairs, df)."""
    expected = mean_square * sum(p.scale for p in pairs)
    if df < 1 or expected <= 0:
        return True  # nothing to hold the differences against: as learned
    ratio = sum(p.difference ** 2 for p in pairs) / expected
    return ratio > float(fdtri(len(pairs), df, 1 - RESTART_SEEN_ALPHA))


def _sources(pairs: Sequence[RestartPair]) -> str:
    """`` (2 rollback verifications, 1 canary watch after a restart)``; nothing when no pair says."""
    counts = Counter(p.source for p in pairs if p.source is not None)
    said = [f"{n} {source.one if n == 1 else source.many}" for source, n in counts.most_common()]
    return f" ({', '.join(said)})" if said else ""
