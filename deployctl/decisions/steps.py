"""What the promote machine asks the runner to do (actions) and what the runner tells it happened (outcomes):
plain values, so every path of a promote is a sequence of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from deployctl.judge.outcome import JudgeOutcome


@dataclass(frozen=True)
class RunPreflight:
    pass


@dataclass(frozen=True)
class MeasureBaseline:
    """Benchmark the live release, or find a stored measurement whose fingerprint matches today's server
    (``BaselineStored``); ``fresh``: measure it now (the confirmation trial disagreed, or the operator asked)."""

    fresh: bool = False


@dataclass(frozen=True)
class ConfirmBaseline:
    """One trial per critical level of the live release, against the stored baseline of ``reused_from``."""

    reused_from: int


@dataclass(frozen=True)
class InstallTrial:
    pass


@dataclass(frozen=True)
class RestartCandidate:
    pass


@dataclass(frozen=True)
class CheckStartupGates:
    pass


@dataclass(frozen=True)
class BenchCandidate:
    round: int
    more_trials: tuple[tuple[int, int], ...] = ()  # empty: the first, full sweep


@dataclass(frozen=True)
class JudgeCandidate:
    pass


@dataclass(frozen=True)
class CheckOutputs:
    """The output gate: the candidate answers the probes and scores the baseline's answers."""


@dataclass(frozen=True)
class SecondCandidateStart:
    """Restart the candidate in place (a new server start: C2, then C3 where three starts a side are asked) and
    measure ``over_starts`` on it, before the rollback: the verdict is then decided over the candidate's starts
    and the baseline's. ``start``: which of the candidate's starts this is (2 or 3)."""

    over_starts: tuple[tuple[int, int], ...]
    start: int = 2


@dataclass(frozen=True)
class KeepCandidate:
    pass


@dataclass(frozen=True)
class RestoreBaseline:
    attempt: int


@dataclass(frozen=True)
class VerifyBaseline:
    """Health, a benchmark of the restored baseline on its new server start, the drift check. ``over_starts``:
    (concurrency, trials) to measure instead of one trial at ``verify_concurrency``, and then decide the
    judged verdict over the server starts (a FAIL a slow server start could explain, or INCONCLUSIVE).
    ``starts``: the baseline's starts a side that decision asks for; 3: after B2 the restored unit is restarted
    in place and measured again on the same plan (B3)."""

    over_starts: tuple[tuple[int, int], ...] = ()
    starts: int = 2


Action = Union[
    RunPreflight, MeasureBaseline, ConfirmBaseline, InstallTrial, RestartCandidate, CheckStartupGates,
    BenchCandidate, JudgeCandidate, CheckOutputs, SecondCandidateStart, KeepCandidate, RestoreBaseline, VerifyBaseline,
]


# --- outcomes: what happened ----------------------------------------------------------------------


@dataclass(frozen=True)
class Succeeded:
    """The action did what it should (install, keep, restore, benchmark, baseline, preflight)."""

    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failed:
    """The action did not do what it should; the reasons say why, in the operator's words."""

    reasons: tuple[str, ...]


@dataclass(frozen=True)
class BaselineStored:
    """A stored baseline of release ``release_id`` matches today's fingerprint: confirm it before reusing it."""

    release_id: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Confirmed:
    """The confirmation trials agree with the stored baseline (reuse it), or not (measure a fresh one)."""

    agrees: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Judged:
    outcome: JudgeOutcome
    reasons: tuple[str, ...] = ()
    more_trials: tuple[tuple[int, int], ...] = ()
    # The plan of the candidate's second start and the rollback's verification when a rollback on this verdict
    # is to be decided over server starts (``deployctl.judge.starts``): a FAIL that a restart offset could
    # explain, an INCONCLUSIVE (a PASS that is not robust to it comes as one: ``starts.recheck_pass``).
    over_starts: tuple[tuple[int, int], ...] = ()
    starts: int = 2  # server starts a side that decision measures (``judge.starts.starts_a_side``)


@dataclass(frozen=True)
class OutputsChecked:
    """The output gate's verdict: PASS, FAIL ("output changed: …"), INCONCLUSIVE or INVALID (not measured)."""

    outcome: JudgeOutcome
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verified:
    ok: bool
    drift: bool = False
    reasons: tuple[str, ...] = ()
    in_doubt: bool = False  # the drift may explain the judged verdict (A-B-A): the result is inconclusive
    starts: JudgeOutcome | None = None  # the verdict over server starts (FAIL or INCONCLUSIVE), when asked for
    baseline_starts: int = 2  # the baseline's starts that verdict was judged over (B1, B2, and B3 if measured)


@dataclass(frozen=True)
class Interrupted:
    """The operator (``deployctl abort``, Ctrl-C) or the controller's own death stopped the promote."""

    reason: str


Outcome = Union[Succeeded, Failed, BaselineStored, Confirmed, Judged, OutputsChecked, Verified, Interrupted]
