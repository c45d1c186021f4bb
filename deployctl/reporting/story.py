"""What one report shows, gathered from a release's records: the runs, the judge's intervals, the phases."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from statistics import fmean
from typing import Any, Mapping, Sequence

from deployctl.bench.result import BenchResult, TrialResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.stats import ChangeInterval
from deployctl.judge.metrics import METRICS
from deployctl.decisions.decided import Decided, decided
from deployctl.decisions.records import Event, Release, StoredBench


@dataclass(frozen=True)
class PhaseSpan:
    phase: str
    start_s: float  # seconds since the release started
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class LevelInterval:
    concurrency: int
    state: str  # the judge's level state: PASS | FAIL | UNKNOWN | INVALID
    limit_pct: float
    interval: ChangeInterval | None


@dataclass(frozen=True)
class Run:
    """One benchmark sweep under a name the reader knows (baseline, candidate, verify, a bench)."""

    role: str
    result: BenchResult
    reused_from: int | None = None  # the release that measured it, when not this one


@dataclass(frozen=True)
class Story:
    release: Release | None
    runs: tuple[Run, ...]
    phases: tuple[PhaseSpan, ...] = ()
    intervals: tuple[LevelInterval, ...] = ()
    judge_metric: str = "output_tok_s"
    judge_confidence: float | None = None
    # Where the verdicts and intervals come from, in the reader's words: as decided and stored with the
    # release (with the policy and noise then in force), or recomputed (asked for, or nothing was stored).
    verdict_source: str = ""
    decided: Decided | None = None  # the stored verdict, when there is one
    outputs: dict[str, Any] | None = None  # the output gate's verdict (its ``outputs`` event), when it ran

    def run(self, role: str) -> Run | None:
        return next((r for r in self.runs if r.role == role), None)


def release_story(
    release: Release,
    benches: Sequence[StoredBench],
    events: Sequence[Event],
    *,
    reused_baseline: StoredBench | None = None,
    policy: JudgePolicy | None = None,
    policy_said: str = "the default judge policy",
    recompute: bool = False,
) -> Story:
    """The story of a promote (or rollback): its sweeps, the judge's interval per level, its phases.

    ``reused_baseline`` is the baseline measurement another release took, when this one reused it.
    The verdicts and intervals are the ones stored with the release (``deployctl.decisions.decided``): what
    was decided, under the policy and noise then in force. With ``recompute`` — or for a release stored
    without them — the judge runs again on the stored trials under ``policy`` (``policy_said`` names it).
    The output gate's verdict comes with it when the gate ran.
    """
    story = _release_story(release, benches, events, reused_baseline=reused_baseline, policy=policy,
                           policy_said=policy_said, recompute=recompute)
    gate = next((e.detail for e in reversed(events) if e.kind == "evidence" and e.name == "outputs"), None)
    return replace(story, outputs=gate)


def _release_story(
    release: Release,
    benches: Sequence[StoredBench],
    events: Sequence[Event],
    *,
    reused_baseline: StoredBench | None,
    policy: JudgePolicy | None,
    policy_said: str,
    recompute: bool,
) -> Story:
    runs: list[Run] = []
    for role in ("baseline", "candidate", "verify"):
        # A role saved twice (extra candidate trials are merged before saving) counts by its latest row.
        rows = [b for b in benches if b.role == role]
        if rows:
            runs.append(Run(role, BenchResult.from_dict(rows[-1].result)))
        elif role == "baseline" and reused_baseline is not None:
            runs.append(Run(role, BenchResult.from_dict(reused_baseline.result), reused_baseline.release_id))
    runs.sort(key=lambda r: ("baseline", "candidate", "verify").index(r.role))
    policy = policy or JudgePolicy()
    story = Story(release, tuple(runs), phase_spans(events, release.started_at, release.finished_at),
                  judge_metric=policy.metric, judge_confidence=policy.confidence)
    base, cand = story.run("baseline"), story.run("candidate")
    stored = decided(events)
    if stored is not None and not recompute:
        metric = str(stored.policy.get("metric", policy.metric))
        confidence = stored.policy.get("confidence")
        return Story(release, story.runs, story.phases, _stored_intervals(stored, metric), metric,
                     float(confidence) if confidence is not None else None,
                     f"verdicts as decided at the time, stored with the release; {stored.policy_line()}; "
                     f"{stored.noise_line()}" + (f"; {line}" if (line := stored.starts_line()) else ""), stored)
    if base and cand:
        # Here, not at the top: a story told from its stored verdicts (`deployctl show`) judges nothing and
        # needs no numpy or scipy (benchmarks/cli_startup.py).
        from deployctl.judge.verdict import judge

        verdict = judge(base.result, cand.result, policy)
        intervals = []
        for lv in verdict.levels:
            check = next((c for c in lv.checks if c.metric == policy.metric), None)
            intervals.append(LevelInterval(lv.concurrency, lv.state.value, policy.rule_for(lv.concurrency).limit_pct or 0.0,
                                           check.interval if check else None))
        if stored is not None:
            why = (f"RECOMPUTED (--recompute) under {policy_said}, without the noise learned then; at the time the "
                   f"judge decided {stored.outcome} ({stored.policy_line()})")
        else:
            why = (f"recomputed under {policy_said}: no verdict was stored with this release (recorded by an "
                   "older deployctl); the promote may have decided under another policy or noise estimate")
        story = Story(release, story.runs, story.phases, tuple(intervals), policy.metric, policy.confidence, why,
                      stored)
    return story


def _stored_intervals(stored: Decided, metric: str) -> tuple[LevelInterval, ...]:
    out = []
    for lv in stored.verdict.get("levels") or ():
        checks = lv.get("checks") or ()
        check = next((c for c in checks if c.get("metric") == metric), None)
        out.append(LevelInterval(int(lv["concurrency"]), str(lv.get("state", "?")),
                                 float((check or {}).get("limit_pct") or 0.0), _interval((check or {}).get("interval"))))
    return tuple(out)


def _interval(data: Mapping[str, Any] | None) -> ChangeInterval | None:
    if not data:
        return None
    known = {f.name for f in fields(ChangeInterval)}
    try:
        return ChangeInterval(**{k: v for k, v in data.items() if k in known})
    except TypeError:  # a field this deployctl needs is missing from an older or newer record
        return None


def bench_story(result: BenchResult, role: str = "this run") -> Story:
    return Story(None, (Run(role, result),))


def phase_spans(events: Sequence[Event], started_at: float, finished_at: float | None) -> tuple[PhaseSpan, ...]:
    """Where the minutes went: each phase from its first event to the next phase's first event."""
    firsts: list[tuple[str, float]] = []
    for e in events:
        if not firsts or firsts[-1][0] != e.phase:
            firsts.append((e.phase, e.at))
    if not firsts:
        return ()
    end = finished_at if finished_at is not None else events[-1].at
    bounds = [at for _, at in firsts[1:]] + [max(end, events[-1].at)]
    return tuple(PhaseSpan(p.lower(), at - started_at, b - started_at) for (p, at), b in zip(firsts, bounds))


def set_aside_trials(runs: Mapping[str, BenchResult]) -> list[str]:
    """Each invalid trial of the sweeps (by role) and why the judge set it aside (it never counts them)."""
    return [f"{role} C={t.concurrency} trial {t.trial}: {t.invalid_reason}" for role, run in runs.items()
            for lv in run.levels for t in lv.trials if not t.valid]


def trial_values(trials: Sequence[TrialResult], metric: str = "output_tok_s") -> list[float]:
    value = METRICS[metric].value
    return [v for t in trials if t.valid and (v := value(t)) is not None]


def per_request_tok_s(trials: Sequence[TrialResult]) -> list[float]:
    """Each successful request's decode speed, (n − 1) / (e2e − ttft), as the bench defines it."""
    out = []
    for t in trials:
        for s in t.samples:
            if s.ok and s.ttft_s is not None and s.output_tokens > 1 and s.e2e_s > s.ttft_s:
                out.append((s.output_tokens - 1) / (s.e2e_s - s.ttft_s))
    return out


def mean_or_none(values: Sequence[float]) -> float | None:
    return fmean(values) if values else None
