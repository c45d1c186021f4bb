"""What one report shows, gathered from a release's records: the runs, the judge's intervals, the phases."""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Sequence

from deployctl.bench.result import BenchResult, TrialResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.stats import ChangeInterval
from deployctl.judge.verdict import METRICS, judge
from deployctl.promote.records import Event, Release, StoredBench


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

    def run(self, role: str) -> Run | None:
        return next((r for r in self.runs if r.role == role), None)


def release_story(
    release: Release,
    benches: Sequence[StoredBench],
    events: Sequence[Event],
    *,
    reused_baseline: StoredBench | None = None,
    policy: JudgePolicy | None = None,
) -> Story:
    """The story of a promote (or rollback): its sweeps, the judge's interval per level, its phases.

    ``reused_baseline`` is the baseline measurement another release took, when this one reused it.
    The intervals are the judge's own computation run again on the stored trials under ``policy``
    (the ledger keeps the verdict's words, not its numbers).
    """
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
    if base and cand:
        verdict = judge(base.result, cand.result, policy)
        intervals = []
        for lv in verdict.levels:
            check = next((c for c in lv.checks if c.metric == policy.metric), None)
            intervals.append(LevelInterval(lv.concurrency, lv.state.value, policy.rule_for(lv.concurrency).limit_pct or 0.0,
                                           check.interval if check else None))
        story = Story(release, story.runs, story.phases, tuple(intervals), policy.metric, policy.confidence)
    return story


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
