"""The judge: is the candidate's sweep worse than the baseline's, beyond the policy's limit, beyond noise?

Pure: two ``BenchResult``s and a ``JudgePolicy`` in, a ``Verdict`` out, every level with the change,
its confidence interval, the test used and a reason in the operator's words, e.g.
``C=64: −12.4 % (95 % CI −14.1 … −10.6 %), limit −5 %: regressed beyond the limit``.

Per level (the baseline's levels; the trial is the unit of replication, ``deployctl.judge.stats``):

- FAIL    "no regression" is rejected at the sequential boundary of this look (``policy.false_fail``
          split over the decisive tests, ``false_fail_per_test``, and spent over the looks) and the estimate
          is beyond the limit;
- PASS    "a regression of twice the limit" (in logs) is rejected at this look's boundary
          (``policy.miss`` spent over the looks);
- UNKNOWN anything else: the judge asks for one more candidate trial, up to ``max_trials``; a decided
          level is not measured again;
- INVALID no valid baseline or candidate trial (``TrialResult.invalid_reason`` says why).

Critical levels combine worst-first (FAIL, INVALID, UNKNOWN, PASS): FAIL is final even while other
levels are unclear. UNKNOWN levels with budget left make the verdict INCONCLUSIVE *with*
``more_trials`` (run them, merge, judge again); with the budget spent it is a final INCONCLUSIVE.
Advisory levels are reported, never decisive. GPU power and utilisation, when both sides have them,
are shown as secondary evidence only.

The baseline cannot get more trials once the candidate runs (that would mean restarting it), so the
precision of every look rests on the baseline's trial count: ``noise.baseline_plan`` sizes it in
rounds from its trials' pooled spread and the host's learned noise (docs/judge.md has the
calibration). ``noise``, when given, is that learned
σ per concurrency, pooled into every look of the policy's metric; the sweep's levels pool their spreads
too (``deployctl.judge.pooling``: one relative noise level, a far noisier level judged on its own).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping

from deployctl.bench.result import BenchResult, LevelResult, TrialResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.metrics import METRICS, Metric, set_aside_outliers, split_trials
from deployctl.judge.outcome import LevelState, JudgeOutcome
from deployctl.judge.pooling import Shared, shared_spreads
from deployctl.judge.sequential import SPENDING_RHO, decide, look_boundary
from deployctl.judge.stats import DEFAULT_RESTART, ChangeInterval, NoiseEstimate, RestartNoise, log_ratio_interval
from deployctl.judge.sweep import false_fail_per_test, sweep_correlation, sweep_shock, sweep_spreads
from deployctl.judge.wording import format_interval, format_pct, signed



# Worst first: how level states combine.
_SEVERITY = {LevelState.FAIL: 0, LevelState.INVALID: 1, LevelState.UNKNOWN: 2, LevelState.PASS: 3}


@dataclass(frozen=True)
class CheckResult:
    """One metric at one level."""

    metric: str
    state: LevelState
    limit_pct: float
    interval: ChangeInterval | None
    reason: str


@dataclass(frozen=True)
class LevelVerdict:
    concurrency: int
    role: str  # "critical" | "advisory"
    state: LevelState
    reason: str
    checks: tuple[CheckResult, ...] = ()
    baseline_trials: int = 0  # valid ones
    candidate_trials: int = 0  # valid ones
    candidate_trials_run: int = 0  # valid and invalid: what the budget counts
    more_trials: int = 0
    notes: tuple[str, ...] = ()  # secondary evidence, ignored trials


@dataclass(frozen=True)
class LevelNoise:
    """The trial-to-trial noise one level was judged with."""

    concurrency: int
    sigma: float  # within-run σ of the log trial values
    df: float  # effective degrees of freedom of the standard error
    pooled_df: int  # degrees of freedom pooled (this level, the sweep's other levels, the learned prior)
    prior_df: int  # of them learned on this host
    shared_df: int  # of them from the sweep's other levels


@dataclass(frozen=True)
class NoiseInForce:
    """The noise estimate the verdict rests on: within-run σ per level, the restart σ, and their sources."""

    restart_sigma: float  # σ of each server start's own offset (log), added twice to every level's variance
    restart_df: int | None  # None: the default, taken as known
    restart_source: str
    levels: tuple[LevelNoise, ...] = ()

    def describe(self) -> str:
        """One line for the operator: ``noise: within-run σ 1.8–2.2 % (…); restart σ 1.0 % a side (default …)``."""
        parts = []
        if self.levels:
            sigmas = sorted(lv.sigma for lv in self.levels)
            dfs = sorted(lv.df for lv in self.levels)
            span = (f"{100 * sigmas[0]:.1f} %" if sigmas[-1] - sigmas[0] < 5e-4
                    else f"{100 * sigmas[0]:.1f}–{100 * sigmas[-1]:.1f} %")
            learned = max(lv.prior_df for lv in self.levels)
            df_span = _df(dfs[0]) if dfs[-1] - dfs[0] < 0.05 else f"{_df(dfs[0])}–{_df(dfs[-1])}"
            parts.append(f"within-run σ {span} (effective df {df_span}"
                         + (f", {learned} df of it learned on this host" if learned else ", none learned yet") + ")")
        parts.append(f"restart σ {100 * self.restart_sigma:.1f} % a side ({self.restart_source})")
        return "noise: " + "; ".join(parts)


def _df(df: float) -> str:
    return "∞" if math.isinf(df) else f"{df:.1f}".removesuffix(".0")


@dataclass(frozen=True)
class DriftVerdict:
    """Whether the restored baseline still performs like it did before the promotion."""

    drift: bool
    reasons: tuple[str, ...]
    levels: tuple[LevelVerdict, ...] = ()


@dataclass(frozen=True)
class Verdict:
    outcome: JudgeOutcome
    levels: tuple[LevelVerdict, ...]
    reasons: tuple[str, ...]
    more_trials: dict[int, int] = field(default_factory=dict)  # concurrency → extra candidate trials
    notes: tuple[str, ...] = ()
    drift: DriftVerdict | None = None
    noise: NoiseInForce | None = None

    @property
    def final(self) -> bool:
        """False while the judge still asks for more trials."""
        return not self.more_trials

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["more_trials"] = {str(c): n for c, n in self.more_trials.items()}
        return data


def judge(
    baseline: BenchResult, candidate: BenchResult, policy: JudgePolicy,
    noise: Mapping[int, NoiseEstimate] | None = None, restart: RestartNoise | None = None,
) -> Verdict:
    """Compare the candidate's sweep with the baseline's under ``policy``.

    ``noise``: the learned within-run σ per level; ``restart``: the between-restart σ (the baseline and
    the candidate run on two server starts), ``DEFAULT_RESTART`` when the host has not learned one.
    """
    metric = METRICS[policy.metric]
    learned = noise or {}
    restart = (restart if restart is not None else DEFAULT_RESTART).in_test()
    spreads, shock = sweep_spreads(baseline, candidate, metric.name), sweep_shock(baseline, candidate, metric.name)
    shared = shared_spreads(spreads, shock=shock)
    concurrencies = [lv.concurrency for lv in baseline.levels]
    false_fail = (false_fail_per_test(policy, concurrencies, sweep_correlation(spreads, shock)),
                  false_fail_per_test(policy, concurrencies))
    levels = tuple(
        _judge_level(lv, candidate.level(lv.concurrency), metric, policy, learned.get(lv.concurrency),
                     shared.get(lv.concurrency), false_fail, restart)
        for lv in baseline.levels
    )
    notes = tuple(
        f"C={lv.concurrency}: measured on the candidate only, not judged (no baseline)"
        for lv in candidate.levels
        if baseline.level(lv.concurrency) is None
    )
    if not levels:
        return Verdict(JudgeOutcome.INVALID, (), ("the baseline has no levels: nothing to judge",), notes=notes)
    in_force = NoiseInForce(restart.sigma, restart.df, restart.source, tuple(
        LevelNoise(lv.concurrency, ch.interval.sigma, ch.interval.df,
                   ch.interval.n_baseline + ch.interval.n_candidate - 2 + ch.interval.shared_df + ch.interval.prior_df,
                   ch.interval.prior_df, ch.interval.shared_df)
        for lv in levels for ch in lv.checks[:1] if ch.interval is not None))
    verdict = _combine(levels, notes)
    return replace(verdict, noise=in_force, notes=verdict.notes + (in_force.describe(),))


def _combine(levels: tuple[LevelVerdict, ...], notes: tuple[str, ...]) -> Verdict:
    critical = [lv for lv in levels if lv.role == "critical"]
    advisory = [lv for lv in levels if lv.role != "critical"]
    states = {lv.state for lv in critical}
    more: dict[int, int] = {}
    if LevelState.FAIL in states:
        outcome = JudgeOutcome.FAIL
    elif LevelState.INVALID in states:
        outcome = JudgeOutcome.INVALID
    elif LevelState.UNKNOWN in states:
        outcome = JudgeOutcome.INCONCLUSIVE
        more = {lv.concurrency: lv.more_trials for lv in critical if lv.more_trials}
    else:
        outcome = JudgeOutcome.PASS
    ordered = sorted(critical, key=lambda lv: (_SEVERITY[lv.state], lv.concurrency))
    reasons = [_headline(outcome, critical, more)]
    reasons += [lv.reason for lv in ordered]
    reasons += [f"advisory {lv.reason}" for lv in sorted(advisory, key=lambda lv: lv.concurrency)]
    level_notes = tuple(n for lv in levels for n in lv.notes)
    return Verdict(outcome, levels, tuple(reasons), more, notes + level_notes)


def _headline(outcome: JudgeOutcome, critical: list[LevelVerdict], more: dict[int, int]) -> str:
    def at(state: LevelState) -> str:
        return ", ".join(f"C={lv.concurrency}" for lv in critical if lv.state == state)

    if not critical:
        return "PASS: every level is advisory, none decides"
    if outcome is JudgeOutcome.FAIL:
        return f"FAIL: {at(LevelState.FAIL)} regressed beyond the limit"
    if outcome is JudgeOutcome.INVALID:
        return f"INVALID: {at(LevelState.INVALID)} cannot be judged"
    if outcome is JudgeOutcome.INCONCLUSIVE and more:
        asked = ", ".join(f"C={c} +{n}" for c, n in sorted(more.items()))
        return f"INCONCLUSIVE so far: more candidate trials needed ({asked})"
    if outcome is JudgeOutcome.INCONCLUSIVE:
        return f"INCONCLUSIVE: {at(LevelState.UNKNOWN)} still unclear with the trial budget spent"
    return "PASS: no critical level regressed beyond its limit"


def _judge_level(
    base: LevelResult, cand: LevelResult | None, metric: Metric, policy: JudgePolicy, prior: NoiseEstimate | None,
    shared: Shared | None, false_fail: tuple[float, float], restart: RestartNoise | None = None,
) -> LevelVerdict:
    c = base.concurrency
    rule = policy.rule_for(c)
    limit = float(rule.limit_pct)  # rule_for fills it in from the policy
    b_ok, b_bad = split_trials(base.trials, metric)
    c_ok, c_bad = split_trials(cand.trials if cand else (), metric)
    run = len(c_ok) + len(c_bad)
    b_ok, b_far = set_aside_outliers(b_ok)
    c_ok, c_far = set_aside_outliers(c_ok)
    notes = tuple(f"C={c}: candidate trial {t.trial} not judged: {why}" for t, why in c_bad) + tuple(
        f"C={c}: a {side} trial at {value:.1f} set aside as an outlier ({format_pct(value / median - 1)} from the"
        f" median of its {n} trials)"
        for side, far in (("baseline", b_far), ("candidate", c_far))
        for value, median, n in far
    ) + ((shared.alone,) if shared is not None and shared.alone else ())
    common = dict(
        concurrency=c, role=rule.role, baseline_trials=len(b_ok), candidate_trials=len(c_ok),
        candidate_trials_run=run, notes=notes,
    )
    if not b_ok:
        return LevelVerdict(state=LevelState.INVALID, reason=f"C={c}: no valid baseline trial{_why(b_bad)}", **common)
    if run and not c_ok:
        return LevelVerdict(state=LevelState.INVALID, reason=f"C={c}: no valid candidate trial{_why(c_bad)}", **common)
    budget = max(0, policy.max_trials - run)
    if len(c_ok) < policy.min_trials:
        wanted = min(policy.min_trials - len(c_ok), budget)
        reason = f"C={c}: {len(c_ok)} valid candidate trial(s), the policy wants {policy.min_trials}"
        return _unknown(reason, wanted, common)
    checks = [_check(c, metric, limit, b_ok, c_ok, policy, false_fail[0], prior, shared, restart)]
    for name, pct in (("ttft_p99_s", policy.ttft_p99_limit_pct), ("itl_p99_s", policy.itl_p99_limit_pct)):
        if pct is not None and name != metric.name:
            check = _latency_check(c, METRICS[name], pct, base.trials, cand.trials if cand else (), policy,
                                   false_fail[1], restart)
            if check is not None:
                checks.append(check)
    state = min((ch.state for ch in checks), key=_SEVERITY.__getitem__)
    lines = [ch.reason for ch in checks]
    more = 0
    if state is LevelState.UNKNOWN:
        more = min(1, budget)
        tail = f"unclear after {len(c_ok)} trials, 1 more asked" if more else (
            f"still unclear after {len(c_ok)} trials (max_trials {policy.max_trials} reached)"
        )
        lines = [f"{line}; {tail}" if ch.state is LevelState.UNKNOWN else line for ch, line in zip(checks, lines)]
    evidence = _telemetry_note(c, base.trials, cand.trials if cand else ())
    return LevelVerdict(
        state=state,
        reason="; ".join(lines),
        checks=tuple(checks),
        more_trials=more,
        **{**common, "notes": notes + ((evidence,) if evidence else ())},
    )


def _unknown(reason: str, wanted: int, common: dict[str, Any]) -> LevelVerdict:
    tail = f", {wanted} more asked" if wanted else ", and max_trials is reached"
    return LevelVerdict(state=LevelState.UNKNOWN, reason=reason + tail, more_trials=wanted, **common)


def _why(bad: list[tuple[TrialResult, str]]) -> str:
    return (": " + "; ".join(f"trial {t.trial}: {why}" for t, why in bad)) if bad else ""


def _check(
    c: int, metric: Metric, limit_pct: float, base: list[float], cand: list[float], policy: JudgePolicy,
    false_fail: float, prior: NoiseEstimate | None, shared: Shared | None = None,
    restart: RestartNoise | None = None,
) -> CheckResult:
    interval = log_ratio_interval(base, cand, policy.confidence, prior=prior,
                                  shared=shared.spread if shared is not None else None,
                                  components=shared.components if shared is not None else (), restart=restart)
    label = f"C={c}" if metric.name == "output_tok_s" else f"C={c} {metric.label}"
    if interval is None:
        return CheckResult(
            metric.name, LevelState.UNKNOWN, limit_pct, None,
            f"{label}: one trial a side gives no estimate of the noise",
        )
    if metric.higher_is_better:
        regression, limit_log = -interval.log_change, -math.log1p(-min(limit_pct, 99.0) / 100)
        signed_limit = f"−{limit_pct:g} %"
    else:
        regression, limit_log = interval.log_change, math.log1p(limit_pct / 100)
        signed_limit = f"+{limit_pct:g} %"
    boundary = look_boundary(
        len(base), len(cand), policy.min_trials, policy.max_trials, interval.df,
        false_fail=false_fail, miss=policy.miss, rho=SPENDING_RHO,
    )
    failed, passed = decide(regression, interval.se, boundary, limit_log)
    interval = replace(interval, test=(
        f"{interval.test}; sequential look {boundary.look} of {boundary.looks} "
        f"(false fail {false_fail:.2g}{_split_note(policy, false_fail)}, miss {policy.miss:g}, spent over the looks)"
    ))
    state = LevelState.FAIL if failed else LevelState.PASS if passed else LevelState.UNKNOWN
    text = f"{label}: {format_interval(interval)}, limit {signed_limit}"
    if state is LevelState.FAIL:
        text += ": regressed beyond the limit"
    elif state is LevelState.PASS:
        # PASS rules out twice the limit, not the limit itself: say which, so a −4.8 % that passes is not
        # read as "proven better than −5 %".
        text += f": not beyond the limit ({signed(100 * math.expm1(2 * limit_log * (-1 if metric.higher_is_better else 1)))} % or worse ruled out)"
    return CheckResult(metric.name, state, limit_pct, interval, text)


def _latency_check(
    c: int,
    metric: Metric, limit_pct: float, base: Iterable[TrialResult], cand: Iterable[TrialResult],
    policy: JudgePolicy, false_fail: float, restart: RestartNoise | None = None,
) -> CheckResult | None:
    b_ok, _ = split_trials(base, metric)
    c_ok, _ = split_trials(cand, metric)
    if not b_ok or not c_ok:
        # ITL tails are left out when the client could not prove headroom: nothing to hold against.
        return None
    return _check(c, metric, limit_pct, b_ok, c_ok, policy, false_fail, None, restart=restart)


def _split_note(policy: JudgePolicy, false_fail: float) -> str:
    tests = policy.false_fail / false_fail
    return f" = {policy.false_fail:g} over {tests:.4g} tests" if tests > 1.01 else ""


def _telemetry_note(c: int, base: Iterable[TrialResult], cand: Iterable[TrialResult]) -> str | None:
    """GPU power and utilisation, both sides, when the change is large enough to be worth a look."""
    parts = []
    for attr, unit, label in (("gpu_power_w", " W", "GPU power"), ("gpu_util_pct", " %", "SM util")):
        b = _mean_telemetry(base, attr)
        a = _mean_telemetry(cand, attr)
        if b and a is not None and abs(a / b - 1) >= _EVIDENCE_CHANGE:
            parts.append(f"{label} {b:.0f}{unit} → {a:.0f}{unit} ({format_pct(a / b - 1)})")
    if not parts:
        return None
    return f"C={c}: " + ", ".join(parts) + " (secondary evidence, not judged)"


# Power and utilisation move by a few % between runs; a fifth is the kind of change that explained the
# incidents (250 W → 125 W after the bad patch).
_EVIDENCE_CHANGE = 0.2


def _mean_telemetry(trials: Iterable[TrialResult], attr: str) -> float | None:
    values = [
        getattr(t.telemetry, attr)
        for t in trials
        if t.valid and t.telemetry is not None and getattr(t.telemetry, attr) is not None
    ]
    return sum(values) / len(values) if values else None


def render_verdict(verdict: Verdict) -> str:
    """The verdict as lines for a terminal or the ledger."""
    lines = [verdict.reasons[0]] + [f"  {r}" for r in verdict.reasons[1:]]
    lines += [f"  note: {n}" for n in verdict.notes]
    return "\n".join(lines)

