"""The promote's evidence as the core's own types: the plan, what each step found, and the outcome.

The runner fills these; the report, the ledger and ``--json`` read them. They are serialised only at
those edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import Policy
from deployctl.judge.outcome import LevelState, JudgeOutcome
from deployctl.judge.reuse import BaselineFingerprint, ReuseAccount
from deployctl.outputgate.record import Measured, ReferenceSet
from deployctl.outputgate.verdict import OutputVerdict
from deployctl.decisions import machine as m
from deployctl.decisions.records import StoredBench
from deployctl.startup.parser import StartupReport
from deployctl.units.profilediff import ProfileDiff

if TYPE_CHECKING:  # an annotation only: judging over server starts (scipy) is no part of reading evidence back
    from deployctl.judge.starts import StartsVerdict


# The ledger's role of the candidate's later server starts (``machine.SecondCandidateStart``: C2, C3).
SECOND_START_ROLE = "candidate-restart"


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
class ServerFacts:
    """What of today's server and host a baseline's fingerprint needs beyond the plan; None: not known."""

    sglang_version: str | None = None  # as the server states it (GET /server_info)
    gpu_model: str | None = None
    gpu_driver: str | None = None
    power_limit_w: float | None = None
    clocks_policy: str | None = None


def version_key(stated: str | None, report: StartupReport | None) -> str | None:
    """The SGLang version a measurement is keyed on (reuse, the canary's reference): as the server states
    it (``/server_info``), else as its startup log states it, else the range the log's cues leave; None
    only when nothing says anything, and None never matches."""
    if stated:
        return stated
    if report is None:
        return None
    return report.sglang_version or report.sglang_version_range


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
    outcome: JudgeOutcome
    reasons: tuple[str, ...] = ()
    more_trials: tuple[tuple[int, int], ...] = ()
    levels: tuple[LevelRow, ...] = ()
    record: Mapping[str, Any] = field(default_factory=dict)  # the judge's serialised verdict, stored as is
    # The rollback's verification plan (concurrency, trials) should this verdict roll back: a FAIL that a
    # restart offset could explain, a PASS it could hide a regression behind (``starts.pass_robust``: then an
    # INCONCLUSIVE), or an INCONCLUSIVE, is then decided over server starts.
    over_starts: tuple[tuple[int, int], ...] = ()
    starts: int = 2  # server starts a side that decision measures (``starts.starts_a_side``)


@dataclass(frozen=True)
class GateResult:
    passed: bool
    failures: tuple[str, ...] = ()


@dataclass(frozen=True)
class DriftResult:
    drifted: bool
    reasons: tuple[str, ...] = ()
    # The drift may explain the judged verdict (the A-B-A reading, ``deployctl.judge.aba``): the promote is
    # then inconclusive, neither rejected nor passed on it.
    in_doubt: bool = False


@dataclass(frozen=True)
class PreflightResult:
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchTime:
    """Where a promote's benchmark seconds went, and what reusing a baseline saved (counted, not guessed)."""

    baseline_s: float = 0.0  # a fresh baseline's trials
    confirmation_s: float = 0.0  # the confirmation trials of a stored baseline (spent even when it disagreed)
    candidate_s: float = 0.0
    verify_s: float = 0.0
    reuse: ReuseAccount | None = None

    @property
    def total_s(self) -> float:
        return self.baseline_s + self.confirmation_s + self.candidate_s + self.verify_s

    def describe(self) -> str:
        parts = [f"{name} {s:.0f} s" for name, s in (("baseline", self.baseline_s),
                 ("confirmation", self.confirmation_s), ("candidate", self.candidate_s),
                 ("verification", self.verify_s)) if s > 0]
        return f"benchmark time {self.total_s:.0f} s" + (f" ({', '.join(parts)})" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        r = self.reuse
        return {"total_s": self.total_s, "baseline_s": self.baseline_s, "confirmation_s": self.confirmation_s,
                "candidate_s": self.candidate_s, "verify_s": self.verify_s,
                "reuse": None if r is None else {
                    "reused_from": r.reused_from, "age_s": r.age_s, "confirmation_trials": r.confirmation_trials,
                    "baseline_trials": r.baseline_trials, "trial_s": r.trial_s, "saved_s": r.saved_s}}


@dataclass(frozen=True)
class TrialCount:
    """The trials a promote ran today to decide, against the fixed design of ``max_trials`` baseline and
    candidate trials at every level — the figure the judge's sequential design saves on. A verdict decided
    over server starts counts the candidate's second start and the restored baseline's verification too
    (they are part of that decision, as in the calibration's cost); a plain rollback's verification is not
    (the fixed design verifies its rollbacks as well)."""

    baseline: int  # a fresh baseline's trials (0 when a stored one was reused)
    confirmation: int  # one a critical level when a stored baseline was checked
    candidate: int
    levels: int
    max_trials: int
    second_start: int = 0  # the candidate's later server starts (C2, C3)
    verification: int = 0  # the restored baseline's, when the verdict was decided over server starts (B2, B3)

    @property
    def run(self) -> int:
        return self.baseline + self.confirmation + self.candidate + self.second_start + self.verification

    @property
    def fixed(self) -> int:
        return 2 * self.max_trials * self.levels

    def describe(self) -> str:
        parts = ", ".join(f"{name} {n}" for name, n in (
            ("baseline", self.baseline), ("confirmation", self.confirmation), ("candidate", self.candidate),
            ("candidate's later starts", self.second_start), ("verification over starts", self.verification)) if n)
        return (f"trials {self.run} ({parts}) of the {self.fixed} a fixed {self.max_trials} + {self.max_trials} "
                f"design runs at these {self.levels} levels: {100 * self.run / self.fixed:.0f} %")

    def to_dict(self) -> dict[str, int]:
        return {"baseline": self.baseline, "confirmation": self.confirmation, "candidate": self.candidate,
                "second_start": self.second_start, "verification": self.verification, "fixed_design": self.fixed}


@dataclass
class Evidence:
    baseline: BenchResult | None = None
    baseline_reused_from: int | None = None  # the release whose baseline measurement was reused
    fingerprint: BaselineFingerprint | None = None  # today's, as the baseline is stored with
    stored_baseline: StoredBench | None = None  # the stored one under confirmation (then reused)
    reuse: ReuseAccount | None = None
    confirmation_trials: int = 0  # run to check a stored baseline, whether it agreed or not
    fresh_because: tuple[str, ...] = ()  # why no stored baseline was reused
    candidate: BenchResult | None = None
    # The candidate's later server starts (C2, C3), in order, when asked for; empty: none measured.
    candidate_again: list[BenchResult] = field(default_factory=list)
    verify: BenchResult | None = None
    verify_again: list[BenchResult] = field(default_factory=list)  # the restored baseline restarted in place (B3)
    baseline_startup: StartupReport | None = None
    candidate_startup: StartupReport | None = None
    start_failure: StartOutcome | None = None
    startup_diff: tuple[str, ...] = ()
    gate_failures: tuple[str, ...] = ()
    judge: JudgeResult | None = None
    drift: DriftResult | None = None
    starts: StartsVerdict | None = None  # the rolled-back verdict decided over server starts
    preflight: PreflightResult | None = None
    outputs_reference: ReferenceSet | None = None  # the baseline's answers the output gate compares with
    outputs_floor: Measured | None = None  # the baseline server scoring its own answers: the A/A noise
    output: OutputVerdict | None = None
    # "startup_wait" and "traffic" (not the controller's own time), "own:PHASE" (the controller's share);
    # "bench:ROLE" splits the traffic by what it measured (baseline, confirmation, candidate, verify).
    timings: dict[str, float] = field(default_factory=dict)

    def add_time(self, key: str, seconds: float) -> None:
        self.timings[key] = self.timings.get(key, 0.0) + seconds

    @property
    def bench_time(self) -> BenchTime:
        t = self.timings
        return BenchTime(t.get("bench:baseline", 0.0), t.get("bench:confirmation", 0.0),
                         t.get("bench:candidate", 0.0), t.get("bench:verify", 0.0), self.reuse)

    def trials(self, max_trials: int) -> TrialCount | None:
        """What was run today against the fixed design; None before the candidate was benchmarked."""
        if self.candidate is None or self.baseline is None:
            return None
        fresh = 0 if self.baseline_reused_from is not None else _trials(self.baseline)
        again = sum(_trials(r) for r in self.candidate_again)
        verified = (sum(_trials(r) for r in (self.verify, *self.verify_again))
                    if self.verify is not None and self.starts is not None else 0)
        return TrialCount(fresh, self.confirmation_trials, _trials(self.candidate), len(self.baseline.levels),
                          max_trials, again, verified)

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
        m.MeasureBaseline: lambda: f"measure the live release of {name} (or find a stored measurement of it)",
        m.ConfirmBaseline: lambda: "confirm the stored baseline: one trial per critical level",
        m.InstallTrial: lambda: f"install {plan.profile} as a trial of {name}",
        m.RestartCandidate: lambda: f"restart {name} on the candidate and wait until ready",
        m.CheckStartupGates: lambda: "check the startup gates",
        m.BenchCandidate: lambda: "benchmark the candidate",
        m.JudgeCandidate: lambda: "judge candidate against baseline",
        m.CheckOutputs: lambda: "output gate: the candidate answers the probe prompts and scores the baseline's answers",
        m.SecondCandidateStart: lambda: f"restart {name} on the candidate again (server start "
                                        f"{action.start}) and measure every critical level: a slower start could "  # type: ignore[union-attr]
                                        "explain its verdict",
        m.KeepCandidate: lambda: f"keep {plan.profile}: persist {name}",
        m.RestoreBaseline: lambda: f"roll back: restore the known-good {name} and restart it",
        m.VerifyBaseline: lambda: _verify_words(action),  # type: ignore[arg-type]
    }[type(action)]()


def _verify_words(action: m.VerifyBaseline) -> str:
    if not action.over_starts:
        return "verify the restored baseline (health + short benchmark + drift check)"
    plan = ", ".join(f"C={c} ×{n}" for c, n in action.over_starts)
    again = ", restart it in place and measure it again" if action.starts > 2 else ""
    return (f"verify the restored baseline on its new server start ({plan}){again}, then judge the candidate over "
            f"{'both' if action.starts == 2 else 'all its'} baseline starts")


def _trials(result: BenchResult) -> int:
    return sum(len(lv.trials) for lv in result.levels)
