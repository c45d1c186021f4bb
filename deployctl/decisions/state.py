"""The promote's state as the ledger stores it: the phase, the result once known, what was done, and the
limits the machine decides with. ``State`` round-trips through JSON (``to_dict``/``from_dict``) so the
ledger can store it before each side effect and recovery can pick it up after the controller died.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from deployctl.errors import ExitCode


class Phase(str, Enum):
    PREFLIGHT = "PREFLIGHT"
    BASELINE = "BASELINE"
    CONFIRM = "CONFIRM"
    INSTALL = "INSTALL"
    RESTART = "RESTART"
    STARTUP = "STARTUP"
    BENCH = "BENCH"
    JUDGE = "JUDGE"
    OUTPUTS = "OUTPUTS"
    SECOND_START = "SECOND_START"  # the candidate restarted in place and measured again (C2, C3), before the rollback
    KEEP = "KEEP"
    ROLLBACK = "ROLLBACK"
    VERIFY = "VERIFY"
    DONE = "DONE"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"


TERMINAL = frozenset({Phase.DONE, Phase.ROLLBACK_FAILED})
# The phase column of the progress lines and of `deployctl show`'s steps: as wide as the longest name.
PHASE_WIDTH = max(len(p.value) for p in Phase)
# Phases in which the host may already run (or have on disk) something other than the known-good unit.
_TOUCHED = frozenset({Phase.INSTALL, Phase.RESTART, Phase.STARTUP, Phase.BENCH, Phase.JUDGE, Phase.OUTPUTS,
                       Phase.SECOND_START, Phase.KEEP})


class Result(str, Enum):
    KEPT = "kept"
    PASSED = "passed"  # a bisect trial that passed: judged, never kept, rolled back
    UNCHANGED = "unchanged"
    REJECTED = "rejected"
    INCONCLUSIVE = "inconclusive"
    REFUSED = "refused"
    ABORTED = "aborted"
    ROLLBACK_FAILED = "rollback_failed"

    @property
    def exit_code(self) -> int:
        return _EXIT[self]


_EXIT = {
    Result.KEPT: ExitCode.OK,
    Result.PASSED: ExitCode.OK,
    Result.UNCHANGED: ExitCode.OK,
    Result.REJECTED: ExitCode.REJECTED,
    Result.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
    Result.REFUSED: ExitCode.PREFLIGHT_REFUSED,
    Result.ABORTED: ExitCode.INTERRUPTED,
    Result.ROLLBACK_FAILED: ExitCode.ROLLBACK_FAILED,
}


@dataclass(frozen=True)
class Limits:
    """The parts of the policy the machine itself decides with."""

    bench_rounds: int = 4  # candidate benchmark rounds: the first, plus the judge's requests for more trials
    rollback_attempts: int = 2
    keep_when_inconclusive: bool = False
    preflight: bool = True
    # False for a rollback to an earlier release: no baseline, gates, benchmark or judge — install,
    # restart, keep if it comes up, else restore what was live.
    evaluate: bool = True
    # False for a bisect's intermediate profile: judged like a candidate, then always rolled back.
    keep: bool = True
    # The output gate (deployctl.outputgate) between a passing verdict and KEEP; off: --skip-output-gate,
    # gates.output.enabled false, or a caller that cannot (a scripted test).
    output_gate: bool = False
    output_first: bool = False  # the gate right after the startup gates, before the benchmark


@dataclass(frozen=True)
class State:
    phase: Phase = Phase.PREFLIGHT
    limits: Limits = field(default_factory=Limits)
    result: Result | None = None  # decided as soon as it is known; final once the phase is terminal
    reasons: tuple[str, ...] = ()
    done: tuple[str, ...] = ()  # what was done to the host, in the operator's words
    bench_round: int = 0
    more_trials: tuple[tuple[int, int], ...] = ()  # (concurrency, extra trials) the judge asked for
    rollback_attempt: int = 0
    drift: bool = False
    fresh_baseline: bool = False  # measure the baseline now: a stored one's confirmation trials disagreed
    reused_from: int | None = None  # the release whose stored baseline is being confirmed or was reused
    # The verdict is decided over server starts: the candidate's second start and the rollback's verification
    # measure this plan (concurrency, trials).
    over_starts: tuple[tuple[int, int], ...] = ()
    # Server starts a side that decision measures (``judge.starts.starts_a_side``: 3 on a one-level sweep), and
    # the candidate's starts measured so far (its first, C1, then each SECOND_START). A state saved before
    # these existed decides over two starts a side, as it did then.
    starts: int = 2
    candidate_starts: int = 1

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @property
    def touched(self) -> bool:
        """True when the host may not be on the known-good configuration any more."""
        return self.phase in _TOUCHED or self.phase in (Phase.ROLLBACK, Phase.VERIFY, Phase.ROLLBACK_FAILED)

    @property
    def exit_code(self) -> int:
        return self.result.exit_code if self.result else ExitCode.BUG

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["phase"] = self.phase.value
        data["result"] = self.result.value if self.result else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "State":
        return cls(
            # A state saved by 0.1 before its first step was PLAN: nothing had been done, as in PREFLIGHT.
            phase=Phase.PREFLIGHT if data["phase"] == "PLAN" else Phase(data["phase"]),
            limits=Limits(**data.get("limits", {})),
            result=Result(data["result"]) if data.get("result") else None,
            reasons=tuple(data.get("reasons", ())),
            done=tuple(data.get("done", ())),
            bench_round=int(data.get("bench_round", 0)),
            more_trials=tuple((int(c), int(n)) for c, n in data.get("more_trials", ())),
            rollback_attempt=int(data.get("rollback_attempt", 0)),
            drift=bool(data.get("drift", False)),
            fresh_baseline=bool(data.get("fresh_baseline", False)),
            reused_from=int(data["reused_from"]) if data.get("reused_from") is not None else None,
            over_starts=tuple((int(c), int(n)) for c, n in data.get("over_starts", ())),
            starts=int(data.get("starts", 2)),
            candidate_starts=int(data.get("candidate_starts", 1)),
        )
