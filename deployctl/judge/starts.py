"""Deciding over server starts: a verdict a restart offset could explain, judged on a second baseline start.

Each server start has its own speed (CUDA graphs, memory layout, KV pool): the baseline B1 runs on one
start, the candidate C1 on another, and their difference carries ``o_C1 − o_B1 ~ N(0, 2·σ_r²)`` whatever
the trials. With one start a side no test that fails an unchanged candidate ≤ 1 % of the time catches a
−10 % regression ≥ 95 % of the time once σ_r reaches 2 % (at best Φ(0.105 / (√2·0.02) − 2.326) = 92 %).
So stage 1 (``verdict.judge``, unchanged: the learned σ_r or the small default) decides what it can, and

- a FAIL that would also be a FAIL with the **guard** in the variance (``RESTART_GUARD`` a start, or the
  host's own σ_r once it has learned it from enough restart pairs) is **robust**: it stands as it is;
- a FAIL that is not robust, and a final INCONCLUSIVE, roll back as before, and the rollback's
  verification measures the restored baseline on its NEW start (B2) at every critical level
  (``verification_plan``); ``judge_over_starts`` then compares the candidate with the baseline measured
  on two starts, the restart offset a random effect: the estimate is the candidate's mean minus the mean
  of the two baseline starts, its variance ``σ_r²·(1/starts_b + 1/starts_c)`` plus the within-run part.

The restart part is shared by every level of a start, so the levels' tests are highly correlated: the
test is on the **sweep** (the mean over the critical levels of the log change), where averaging over the
levels shrinks the within-run part and no multiplicity is paid for five levels that move as one. B1 and
B2 are themselves a restart pair: pooled into the host's learned σ_r before it is used.

Outcomes: FAIL (the candidate regressed even allowing a restart offset of σ_r) or INCONCLUSIVE — never
PASS: the candidate was rolled back before the second start was measured. Pure: sweeps in, verdict out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from scipy.special import chdtri

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.noise import DEFAULT_RESTART_WEIGHT, mean_estimate
from deployctl.judge.outcome import Outcome
from deployctl.judge.pooling import shares_shock, trial_effect
from deployctl.judge.stats import (
    DEFAULT_RESTART_SIGMA, ChangeInterval, NoiseEstimate, RestartNoise, Spread, pool, t_quantile,
)
from deployctl.judge.verdict import METRICS, Verdict, format_interval, format_pct, judge, judgeable_by_trial

# The restart σ a start a FAIL must survive while the host has not learned its own: the top of the range
# issue #26 targets (real SGLang hosts move 0.5–2 % a restart).
RESTART_GUARD = 0.02

# A host's learned σ_r replaces the guard once it rests on this many restart pairs (each a rollback's
# verification against its baseline, or an A/A promote), and then at its upper confidence bound
# (``RESTART_BOUND``): the learned estimate is shrunk towards the 0.5 % default and low by chance half
# the time, and a FAIL judged on a σ_r that came out low fails unchanged candidates.
MIN_RESTART_PAIRS = 8
RESTART_BOUND = 0.8

# Trials a level of the verification on the new start: its within-run part is averaged over the levels
# and the restart part does not shrink with trials, so a few suffice (benchmarks/judge_calibration.py).
VERIFICATION_TRIALS = 2


@dataclass(frozen=True)
class StartsVerdict:
    """The candidate against the baseline measured on two server starts."""

    outcome: Outcome  # FAIL or INCONCLUSIVE (never PASS: the candidate is rolled back by then)
    reasons: tuple[str, ...]  # the first line says what decided it, in the operator's words
    restart: RestartNoise  # the σ_r the test used (guard or learned): shown and stored
    interval: ChangeInterval | None = None  # the sweep's mean change, None when no level could be compared

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data


def restart_in_force(restart: RestartNoise | None, pooled: tuple[float, int] = (0.0, 0)) -> RestartNoise:
    """The σ_r a start that deciding over starts allows for: the guard, or the host's learned one.

    ``restart``: the host's σ_r as ``noise.learn_restart`` made it (None or the default: no pairs yet);
    ``pooled``: (excess, pairs) of this promote's own baseline starts, folded in the way ``learn_restart``
    folds a pair (``excess`` = its share of ``Σ d² − within``, the sum over its pairs). Below
    ``MIN_RESTART_PAIRS`` pairs: the guard, or the learned σ_r when it is larger (that host's restarts
    move more); from there on: the learned σ_r's ``RESTART_BOUND`` upper confidence bound. Returned as
    known (``df`` None): the bound already allows for what the pairs do not know.
    """
    learned = restart is not None and restart.df is not None
    weight = restart.df if learned else DEFAULT_RESTART_WEIGHT  # type: ignore[union-attr]
    sigma2 = (restart.sigma if learned else DEFAULT_RESTART_SIGMA) ** 2  # type: ignore[union-attr]
    excess, added = pooled
    if added:
        sigma2 = max(0.0, (weight * sigma2 + excess) / (weight + added))
        weight += added
    pairs = weight - DEFAULT_RESTART_WEIGHT
    here = " (this promote's own baseline starts included)" if added else ""
    if pairs >= MIN_RESTART_PAIRS:
        bound = math.sqrt(sigma2 * weight / float(chdtri(weight, RESTART_BOUND)))
        return RestartNoise(bound, None, f"learned from {pairs} restart pair(s) of this host{here}: "
                                         f"{100 * math.sqrt(sigma2):.1f} %, its {100 * RESTART_BOUND:g} % upper bound")
    if math.sqrt(sigma2) > RESTART_GUARD:
        return RestartNoise(math.sqrt(sigma2), None, f"learned from {pairs} restart pair(s) of this host{here}, "
                                                     f"above the {100 * RESTART_GUARD:g} % guard")
    return RestartNoise(RESTART_GUARD, None, f"guard: this host has {pairs} restart pair(s){here}, "
                                             f"{MIN_RESTART_PAIRS} needed to use its own")


def over_starts_needed(verdict: Verdict, baseline: BenchResult, candidate: BenchResult, policy: JudgePolicy,
                       noise: Mapping[int, NoiseEstimate] | None, restart: RestartNoise | None) -> bool:
    """FAIL not robust to the guard, or a final INCONCLUSIVE: decide over two baseline starts.

    A FAIL is robust when ``judge`` still fails the same trials with ``restart_in_force`` in the variance:
    −30 % or −87 % regressions are, and go on as before. A verdict still asking for trials, a PASS and an
    INVALID are not decided over starts.
    """
    if not verdict.final:
        return False
    if verdict.outcome is Outcome.INCONCLUSIVE:
        return True
    if verdict.outcome is not Outcome.FAIL:
        return False
    return judge(baseline, candidate, policy, noise, restart_in_force(restart)).outcome is not Outcome.FAIL


def verification_plan(policy: JudgePolicy, baseline: BenchResult) -> dict[int, int]:
    """Levels → trials the rollback's verification measures when over_starts_needed (every critical level)."""
    return {lv.concurrency: VERIFICATION_TRIALS for lv in baseline.levels
            if policy.rule_for(lv.concurrency).role == "critical"}


@dataclass(frozen=True)
class _Start:
    """One server start's judgeable log values at the compared levels, by level and trial number."""

    logs: dict[int, dict[int, float]]

    def mean(self, c: int) -> float:
        return sum(self.logs[c].values()) / len(self.logs[c])

    def spread(self) -> Spread:
        ss, df = 0.0, 0
        for values in self.logs.values():
            m = sum(values.values()) / len(values)
            ss += sum((x - m) ** 2 for x in values.values())
            df += len(values) - 1
        return Spread(ss, df)


def judge_over_starts(baselines: Sequence[BenchResult], candidate: BenchResult, policy: JudgePolicy,
                      noise: Mapping[int, NoiseEstimate] | None, restart: RestartNoise | None) -> StartsVerdict:
    """baselines: [B1 (before), B2 (the verification after the rollback)].

    The sweep's mean log change, candidate minus the mean of the baseline starts, over the critical levels
    every start measured, tested one-sided at ``policy.false_fail`` against a standard error with the
    restart part ``σ_r²·(1/starts + 1)`` (``restart_in_force``, this promote's baseline starts pooled in)
    and the within-run part (the trials' spread pooled over starts and levels with the learned σ; when the
    levels share a per-trial shock, the per-trial effect's mean square, with its df). FAIL needs the
    regression significant and the estimate beyond the limit (the mean of the levels' limits).
    """
    if len(baselines) < 2:
        raise ValueError("deciding over starts needs the baseline measured on two server starts")
    metric = METRICS[policy.metric]
    critical = [lv.concurrency for lv in baselines[0].levels if policy.rule_for(lv.concurrency).role == "critical"]
    sides = [_start(b, critical, policy.metric) for b in baselines]
    cand = _start(candidate, critical, policy.metric)
    levels = [c for c in critical if all(c in s.logs for s in (*sides, cand))]
    if not levels:
        guard = restart_in_force(restart)
        return StartsVerdict(Outcome.INCONCLUSIVE, (
            "INCONCLUSIVE over server starts: no critical level has valid trials on every start to compare",),
            guard)
    sides = [_Start({c: s.logs[c] for c in levels}) for s in sides]
    cand = _Start({c: cand.logs[c] for c in levels})
    L = len(levels)
    # Within-run variance of one trial of one level (or, when the levels move together, of a trial's mean
    # over the levels times L): what the start means' averages carry besides the restart offsets.
    total = sum((s.spread() for s in (*sides, cand)), Spread(0.0, 0))
    pooled = pool(mean_estimate(noise or {}, levels), total.ss, total.df)
    shock = trial_effect([s.logs for s in (*sides, cand)])
    if 1 <= shock.df < total.df and shares_shock(shock, Spread(max(0.0, total.ss - shock.ss), total.df - shock.df)):
        variance, df = shock.ss / shock.df, float(shock.df)
    elif pooled is not None:
        variance, df = pooled.sigma ** 2, float(pooled.df)
    else:
        return StartsVerdict(Outcome.INCONCLUSIVE, (
            "INCONCLUSIVE over server starts: one trial a start at every level gives no estimate of the noise",),
            restart_in_force(restart))
    # B1, B2 (…) as a restart pair: the spread of the baseline starts' sweep means beyond what the trials
    # explain, folded into the host's σ_r.
    means = [sum(s.mean(c) for c in levels) / L for s in sides]
    trial_parts = [variance / L ** 2 * sum(1 / len(s.logs[c]) for c in levels) for s in sides]
    centre = sum(means) / len(means)
    k = len(sides)
    excess = sum((m - centre) ** 2 for m in means) - (k - 1) / k * sum(trial_parts)
    in_force = restart_in_force(restart, (excess, k - 1))
    d = sum(cand.mean(c) - sum(s.mean(c) for s in sides) / k for c in levels) / L
    within = variance / L ** 2 * sum(1 / len(cand.logs[c]) + sum(1 / len(s.logs[c]) for s in sides) / k ** 2
                                     for c in levels)
    se = math.sqrt(within + in_force.sigma ** 2 * (1 / k + 1))
    sign = 1 if metric.higher_is_better else -1
    regression = -sign * d
    limits = [policy.rule_for(c).limit_pct or policy.limit_pct for c in levels]
    limit_log = sum(-math.log1p(-min(x, 99.0) / 100) if sign > 0 else math.log1p(x / 100) for x in limits) / L
    failed = regression > t_quantile(1 - policy.false_fail, df) * se and regression > limit_log
    half = t_quantile(1 - (1 - policy.confidence) / 2, df) * se
    interval = ChangeInterval(
        change=math.expm1(d), low=math.expm1(d - half), high=math.expm1(d + half), confidence=policy.confidence,
        n_baseline=sum(len(s.logs[c]) for s in sides for c in levels), n_candidate=sum(len(v) for v in cand.logs.values()),
        df=df, test=f"t on the sweep's mean log change over {k} baseline starts, df={df:g}; restart σ "
                    f"{100 * in_force.sigma:.1f} % a start ({in_force.source})",
        log_change=d, se=se, sigma=math.sqrt(variance), restart_sigma=in_force.sigma,
    )
    limit_text = f"{'−' if sign > 0 else '+'}{100 * abs(math.expm1(-sign * limit_log)):.3g} %"
    what = (f"the sweep's mean change {format_interval(interval)} against the baseline on {k} server starts, "
            f"limit {limit_text}")
    if failed:
        head = (f"FAIL over server starts: {what}: regressed beyond the limit even allowing a restart offset of "
                f"{100 * in_force.sigma:.1f} % a start")
    elif regression > limit_log:
        head = (f"INCONCLUSIVE over server starts: {what}: a restart offset of up to {100 * in_force.sigma:.1f} % "
                "a start could explain it; the host learns its own from rollbacks like this one")
    else:
        head = (f"INCONCLUSIVE over server starts: {what}: not beyond the limit measured over {k} baseline starts; "
                "the candidate was rolled back before, so it is not kept")
    lines = [f"C={c}: candidate {format_pct(math.expm1(cand.mean(c) - sum(s.mean(c) for s in sides) / k))} against "
             f"the mean of {k} baseline starts (" + ", ".join(
                 f"start {i}: {format_pct(math.expm1(s.mean(c) - sides[0].mean(c)))}" for i, s in enumerate(sides[1:], 2))
             + " from start 1)" for c in levels]
    return StartsVerdict(Outcome.FAIL if failed else Outcome.INCONCLUSIVE,
                         (head, f"restart σ {100 * in_force.sigma:.1f} % a start: {in_force.source}", *lines),
                         in_force, interval)


def _start(result: BenchResult, levels: Sequence[int], metric: str) -> _Start:
    logs = {}
    for c in levels:
        values = judgeable_by_trial(result.level(c), metric)
        if values:
            logs[c] = {k: math.log(v) for k, v in values.items()}
    return _Start(logs)
