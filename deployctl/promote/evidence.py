"""The promote's evidence as the core's own types: the plan, what each step found, and the outcome.

The runner fills these; the report, the ledger and ``--json`` read them. They are serialised only at
those edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import Policy
from deployctl.judge.outcome import LevelState, Outcome
from deployctl.promote import machine as m
from deployctl.startup.parser import StartupReport
from deployctl.units.profilediff import ProfileDiff


@dataclass(frozen=True)
class Plan:
    """Everything decided before the first side effect (``--dry-run`` prints this)."""

    deployment: str
    profile: str
    unit_name: str
    candidate_text: str
    candidate_hash: str
    known_good_text: str | None
    known_good_hash: str | None
    url: str
    policy: Policy
    host: str | None = None
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    profile_diff: tuple[str, ...] = ()  # "+ --enable-flashinfer-allreduce-fusion", "~ mem-fraction-static 0.9 → 0.92"
    profile_diff_data: ProfileDiff | None = None  # the same, as data: startup facts are attributed to it

    @property
    def unchanged(self) -> bool:
        return self.known_good_hash == self.candidate_hash


@dataclass(frozen=True)
class StartOutcome:
    """How a restart ended: ready, or why not (``message`` is for the operator)."""

    ready: bool
    kind: str  # ready | crashed | timeout | failed
    message: str = ""
    last_lines: tuple[str, ...] = ()
    startup: StartupReport | None = None  # what the server said while starting
    wait_s: float = 0.0


@dataclass(frozen=True)
class LevelRow:
    concurrency: int
    baseline_tok_s: float | None
    candidate_tok_s: float | None
    change_pct: float | None
    verdict: LevelState | None  # None: not judged (a plain comparison of the means)
    reason: str = ""

    @property
    def verdict_text(self) -> str:
        return self.verdict.value if self.verdict else "—"


@dataclass(frozen=True)
class JudgeResult:
    outcome: Outcome
    reasons: tuple[str, ...] = ()
    more_trials: tuple[tuple[int, int], ...] = ()
    levels: tuple[LevelRow, ...] = ()


@dataclass(frozen=True)
class GateResult:
    passed: bool
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class DriftResult:
    drifted: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreflightResult:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass
class Evidence:
    baseline: BenchResult | None = None
    baseline_reused_from: int | None = None  # the release whose baseline measurement was reused
    candidate: BenchResult | None = None
    verify: BenchResult | None = None
    baseline_startup: StartupReport | None = None
    candidate_startup: StartupReport | None = None
    start_failure: StartOutcome | None = None
    startup_diff: tuple[str, ...] = ()
    gate_failures: tuple[str, ...] = ()
    judge: JudgeResult | None = None
    drift: DriftResult | None = None
    preflight: PreflightResult | None = None
    # "startup_wait" and "traffic" (not the controller's own time), "own:PHASE" (the controller's share).
    timings: dict[str, float] = field(default_factory=dict)

    def add_time(self, key: str, seconds: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + seconds

    @property
    def outside_s(self) -> float:
        return self.timings.get("startup_wait", 0.0) + self.timings.get("traffic", 0.0)


@dataclass(frozen=True)
class PromoteOutcome:
    release_id: int
    state: m.State
    plan: Plan
    evidence: Evidence
    wall_s: float

    @property
    def exit_code(self) -> int:
        return self.state.exit_code

    @property
    def overhead_s(self) -> float:
        """The controller's own time: everything but waiting for servers to start and benchmark traffic."""
        return self.wall_s - self.evidence.outside_s


def bench_key(policy: Policy) -> str:
    """What a baseline measurement measured, so only a like-for-like one is reused."""
    b = policy.bench
    return f"c={','.join(map(str, b.concurrency))};in={b.input_tokens};out={b.output_tokens};n={b.requests_per_level}"


def describe_action(action: m.Action, plan: Plan) -> str:
    name = plan.unit_name
    return {
        m.RunPreflight: lambda: "pre-flight checks",
        m.MeasureBaseline: lambda: f"measure the live release of {name}",
        m.InstallTrial: lambda: f"install {plan.profile} as a trial of {name}",
        m.RestartCandidate: lambda: f"restart {name} on the candidate and wait until ready",
        m.CheckStartupGates: lambda: "check the startup gates",
        m.BenchCandidate: lambda: "benchmark the candidate",
        m.JudgeCandidate: lambda: "judge candidate against baseline",
        m.KeepCandidate: lambda: f"keep {plan.profile}: persist {name}",
        m.RestoreBaseline: lambda: f"roll back: restore the known-good {name} and restart it",
        m.VerifyBaseline: lambda: "verify the restored baseline (health + short benchmark + drift check)",
    }[type(action)]()
