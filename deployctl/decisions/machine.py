"""The promote state machine, pure: no I/O, no clock, no environment.

    PREFLIGHT → BASELINE ⇄ CONFIRM
                   └──────────┴─▶ INSTALL → RESTART → STARTUP → BENCH ⇄ JUDGE → OUTPUTS → KEEP → DONE
                              │          │         │        │      │        │        │
                              └──────────┴─────────┴────────┴──────┴────────┴────────┴─▶ ROLLBACK → VERIFY → DONE
                                                                                 │          │
                                                                                 └──────────┴─▶ ROLLBACK_FAILED

OUTPUTS (the output gate, ``limits.output_gate``) follows a passing verdict: fast but wrong is never kept;
with ``limits.output_first`` it runs between STARTUP and BENCH instead (a wrong candidate skips the sweep).
A FAIL a slower server start could explain, or a final INCONCLUSIVE (``Judged.over_starts``, a plan), is
decided over server starts: JUDGE → SECOND_START (the candidate restarted in place and measured again; twice,
C2 and C3, on a one-level sweep) → ROLLBACK → VERIFY (the restored baseline measured on its new start, B2, and
there restarted in place and measured again, B3) → DONE, rejected or inconclusive.

The plan is made before the machine starts (the ledger records the candidate before the first step);
``start(limits, unchanged=…)`` begins where that plan leads: done at once when nothing changes, at
INSTALL for a rollback to an earlier release (or a candidate whose baseline was measured before), else
at PREFLIGHT (or BASELINE without pre-flight).
``next_action(state)`` says what to do next (``None`` once terminal); the runner does it and feeds the
outcome to ``advance(state, outcome)``. Every path, including "the rollback fails", is a sequence of
plain values (``deployctl.decisions.steps``), so tests drive it with scripted outcomes. The state
(``deployctl.decisions.state``) round-trips through JSON so the ledger can store it before each side effect
and ``resume_after_crash`` can pick it up after the controller died.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from deployctl.judge.outcome import JudgeOutcome
from deployctl.decisions.state import TERMINAL, Limits, Phase, Result, State
from deployctl.decisions.steps import (
    Action,
    BaselineStored,
    BenchCandidate,
    CheckOutputs,
    CheckStartupGates,
    ConfirmBaseline,
    Confirmed,
    Failed,
    InstallTrial,
    Interrupted,
    Judged,
    JudgeCandidate,
    KeepCandidate,
    MeasureBaseline,
    Outcome,
    OutputsChecked,
    RestartCandidate,
    RestoreBaseline,
    RunPreflight,
    SecondCandidateStart,
    Succeeded,
    Verified,
    VerifyBaseline,
)

# The vocabulary lives in state.py and steps.py; callers read it here as ``machine.X``.
__all__ = [
    "TERMINAL", "Action", "BaselineStored", "BenchCandidate", "CheckOutputs", "CheckStartupGates", "ConfirmBaseline", "Confirmed",
    "Failed", "InstallTrial", "Interrupted", "JudgeCandidate",
    "Judged", "KeepCandidate", "Limits", "MeasureBaseline", "Outcome", "OutputsChecked", "Phase", "RestartCandidate", "RestoreBaseline",
    "Result", "RunPreflight", "SecondCandidateStart", "State", "Succeeded", "Verified", "VerifyBaseline", "advance", "next_action",
    "resume_after_crash", "start", "starts_word",
]


_ACTIONS = {
    Phase.PREFLIGHT: lambda s: RunPreflight(),
    Phase.BASELINE: lambda s: MeasureBaseline(fresh=s.fresh_baseline),
    Phase.CONFIRM: lambda s: ConfirmBaseline(reused_from=s.reused_from or 0),
    Phase.INSTALL: lambda s: InstallTrial(),
    Phase.RESTART: lambda s: RestartCandidate(),
    Phase.STARTUP: lambda s: CheckStartupGates(),
    Phase.BENCH: lambda s: BenchCandidate(round=s.bench_round, more_trials=s.more_trials),
    Phase.JUDGE: lambda s: JudgeCandidate(),
    Phase.OUTPUTS: lambda s: CheckOutputs(),
    Phase.SECOND_START: lambda s: SecondCandidateStart(over_starts=s.over_starts, start=s.candidate_starts + 1),
    Phase.KEEP: lambda s: KeepCandidate(),
    Phase.ROLLBACK: lambda s: RestoreBaseline(attempt=s.rollback_attempt),
    Phase.VERIFY: lambda s: VerifyBaseline(over_starts=s.over_starts, starts=s.starts if s.over_starts else 2),
}


def start(limits: Limits = Limits(), *, unchanged: bool = False, measured: bool = False) -> State:
    """The first state of a promote whose plan says whether the candidate changes anything.

    ``measured``: the baseline is already in the evidence (the canary's watch of a degraded live release,
    measured just now), so the promote begins at INSTALL and still benchmarks and judges the candidate."""
    if unchanged:
        return State(phase=Phase.DONE, limits=limits, result=Result.UNCHANGED,
                     reasons=("the candidate renders to the unit already installed",))
    if not limits.evaluate or measured:
        return State(phase=Phase.INSTALL, limits=limits)
    return State(phase=Phase.PREFLIGHT if limits.preflight else Phase.BASELINE, limits=limits)


def next_action(state: State) -> Action | None:
    """The one thing to do next, or None when the promote is over."""
    if state.terminal:
        return None
    return _ACTIONS[state.phase](state)


def advance(state: State, outcome: Outcome) -> State:
    """The state after ``outcome`` of ``next_action(state)``. Unexpected outcomes are bugs: ValueError."""
    if state.terminal:
        raise ValueError(f"the promote is over ({state.phase.value}); nothing can follow {outcome!r}")
    if isinstance(outcome, Interrupted):
        return _interrupted(state, outcome.reason)
    step = _STEPS[state.phase]
    return step(state, outcome)


def resume_after_crash(state: State, reason: str) -> State:
    """Where to pick up a promote whose controller died in ``state``: roll back, or finish the keep."""
    if state.terminal:
        return state
    if state.phase is Phase.KEEP:
        # The verdict was PASS and keeping is idempotent: finish what was started.
        return replace(state, reasons=state.reasons + (reason,))
    if state.phase in (Phase.SECOND_START, Phase.ROLLBACK, Phase.VERIFY):
        # The verdict was reached (and the plan to decide it over starts stands): roll back and verify it, over
        # the candidate's starts measured so far (recovery loads them from the ledger).
        return replace(state, phase=Phase.ROLLBACK, rollback_attempt=0, reasons=state.reasons + (reason,))
    return _interrupted(state, reason)


# --- transitions ----------------------------------------------------------------------------------


def _expect(outcome: Outcome, *kinds: type, phase: Phase) -> None:
    if not isinstance(outcome, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"{phase.value} expects {names}, got {outcome!r}")


def _rollback(state: State, result: Result, reasons: tuple[str, ...]) -> State:
    return replace(state, phase=Phase.ROLLBACK, result=result, reasons=state.reasons + reasons, rollback_attempt=0)


def _finish(state: State, result: Result, reasons: tuple[str, ...] = ()) -> State:
    return replace(state, phase=Phase.DONE, result=result, reasons=state.reasons + reasons)


def _interrupted(state: State, reason: str) -> State:
    if state.phase in (Phase.ROLLBACK, Phase.VERIFY):
        # Already on the way back to the known-good: finishing that is what an abort asks for.
        return replace(state, reasons=state.reasons + (reason,))
    if state.phase is Phase.SECOND_START:
        # The verdict stands; the candidate's start under way is cut short: decided on the ones measured.
        return replace(state, phase=Phase.ROLLBACK, rollback_attempt=0, reasons=state.reasons + (reason,))
    if state.touched:
        return _rollback(state, Result.ABORTED, (reason,))
    return _finish(state, Result.ABORTED, (reason, "nothing on the host was changed"))


def _restart(state: State, outcome: Outcome) -> State:
    _expect(outcome, Succeeded, Failed, phase=state.phase)
    if isinstance(outcome, Failed):
        return _reject(state, outcome.reasons)
    if not state.limits.evaluate:
        return replace(state, phase=Phase.KEEP, result=Result.KEPT, done=state.done + outcome.notes)
    return replace(state, phase=Phase.STARTUP, done=state.done + outcome.notes)


Step = Callable[[State, Outcome], State]


def _simple(ok_phase: Phase, fail: Callable[[State, tuple[str, ...]], State]) -> Step:
    def step(state: State, outcome: Outcome) -> State:
        _expect(outcome, Succeeded, Failed, phase=state.phase)
        if isinstance(outcome, Failed):
            return fail(state, outcome.reasons)
        return replace(state, phase=ok_phase, done=state.done + outcome.notes)

    return step


def _refuse(state: State, reasons: tuple[str, ...]) -> State:
    return _finish(state, Result.REFUSED, reasons + ("nothing on the host was changed",))


def _reject(state: State, reasons: tuple[str, ...]) -> State:
    return _rollback(state, Result.REJECTED, reasons)


def _baseline(state: State, outcome: Outcome) -> State:
    _expect(outcome, Succeeded, Failed, BaselineStored, phase=state.phase)
    if isinstance(outcome, BaselineStored):
        if state.fresh_baseline:
            raise ValueError("a fresh baseline was asked for, not a stored one")
        return replace(state, phase=Phase.CONFIRM, reused_from=outcome.release_id, done=state.done + outcome.notes)
    return _simple(Phase.INSTALL, _refuse)(replace(state, reused_from=None), outcome)


def _confirm(state: State, outcome: Outcome) -> State:
    """Agreeing, the stored baseline stands in for today's; disagreeing, a fresh one is measured."""
    _expect(outcome, Confirmed, Failed, phase=state.phase)
    if isinstance(outcome, Failed):
        return _refuse(state, outcome.reasons)
    assert isinstance(outcome, Confirmed)
    if outcome.agrees:  # the reasons (what was reused, what it saved) are the evidence's, in the ledger's event
        return replace(state, phase=Phase.INSTALL)
    return replace(state, phase=Phase.BASELINE, fresh_baseline=True, reasons=state.reasons + outcome.reasons)


def _bench(state: State, outcome: Outcome) -> State:
    _expect(outcome, Succeeded, Failed, phase=state.phase)
    if isinstance(outcome, Failed):
        return _reject(state, outcome.reasons)
    return replace(state, phase=Phase.JUDGE, bench_round=state.bench_round + 1, more_trials=())


def _judge(state: State, outcome: Outcome) -> State:
    _expect(outcome, Judged, phase=state.phase)
    assert isinstance(outcome, Judged)
    verdict = outcome.outcome
    if verdict is JudgeOutcome.PASS:
        return _pass(state, outcome.reasons)
    if verdict is JudgeOutcome.FAIL:
        return _second_start(_reject(state, outcome.reasons), outcome.over_starts, outcome.starts)
    if verdict is JudgeOutcome.INVALID:
        return _reject(state, outcome.reasons)
    if verdict is not JudgeOutcome.INCONCLUSIVE:
        raise ValueError(f"unknown verdict {outcome.outcome!r}")
    if outcome.more_trials and state.bench_round < state.limits.bench_rounds:
        return replace(state, phase=Phase.BENCH, more_trials=outcome.more_trials)
    # Out of rounds while the judge still asks for trials, or no trial left to ask on this start (every unclear
    # level at max_trials, or a PASS a restart offset could explain): the operator reads which.
    budget = (f"still inconclusive after {state.bench_round} benchmark round(s)" if outcome.more_trials
              else "inconclusive with no trial left to ask on this server start")
    if state.limits.keep_when_inconclusive and state.limits.keep:
        return _pass(state, outcome.reasons + (f"{budget}; the policy keeps the candidate",))
    # A bisect trial (``keep`` off) is never passed on an INCONCLUSIVE, whatever the policy keeps: the search
    # would clear the changes it tried on no evidence.
    then = "the policy keeps the baseline" if state.limits.keep else "a bisect trial: neither passed nor failed"
    kept = _rollback(state, Result.INCONCLUSIVE, outcome.reasons + (f"{budget}; {then}",))
    return _second_start(kept, outcome.over_starts, outcome.starts)


def _second_start(rolling_back: State, plan: tuple[tuple[int, int], ...], starts: int) -> State:
    """A rollback on a verdict to decide over server starts begins with the candidate's second start."""
    if not plan:
        return rolling_back
    return replace(rolling_back, phase=Phase.SECOND_START, over_starts=plan, starts=starts, candidate_starts=1)


def _candidate_again(state: State, outcome: Outcome) -> State:
    """The candidate's next start: measured → the next one, or, once it has its ``starts``, roll back (the
    verification measures the same plan); not back up, or not serving (on C2 or C3) → rejected on its own
    failure, and nothing left to decide over starts."""
    _expect(outcome, Succeeded, Failed, phase=state.phase)
    if isinstance(outcome, Failed):
        return replace(state, phase=Phase.ROLLBACK, result=Result.REJECTED, over_starts=(),
                       reasons=state.reasons + outcome.reasons)
    measured = state.candidate_starts + 1
    return replace(state, phase=Phase.SECOND_START if measured < state.starts else Phase.ROLLBACK,
                   candidate_starts=measured, done=state.done + outcome.notes)


def _startup(state: State, outcome: Outcome) -> State:
    first = state.limits.output_gate and state.limits.output_first
    return _simple(Phase.OUTPUTS if first else Phase.BENCH, _reject)(state, outcome)


def _pass(state: State, reasons: tuple[str, ...]) -> State:
    if state.limits.output_gate and not state.limits.output_first:
        return replace(state, phase=Phase.OUTPUTS, reasons=state.reasons + reasons)
    return _passed(state, reasons)


def _outputs(state: State, outcome: Outcome) -> State:
    """The output gate after a passing verdict: only PASS goes on; an undecided gate never keeps."""
    _expect(outcome, OutputsChecked, phase=state.phase)
    assert isinstance(outcome, OutputsChecked)
    if outcome.outcome is JudgeOutcome.PASS:
        if state.bench_round == 0:  # the gate ran first: the benchmark is next
            return replace(state, phase=Phase.BENCH, reasons=state.reasons + outcome.reasons)
        return _passed(state, outcome.reasons)
    if outcome.outcome is JudgeOutcome.INCONCLUSIVE:
        return _rollback(state, Result.INCONCLUSIVE, outcome.reasons + ("the output gate keeps the baseline",))
    return _reject(state, outcome.reasons)


def _passed(state: State, reasons: tuple[str, ...]) -> State:
    if not state.limits.keep:
        return _rollback(state, Result.PASSED, reasons + ("a bisect trial: passed, not kept",))
    return replace(state, phase=Phase.KEEP, result=Result.KEPT, reasons=state.reasons + reasons)


def _keep(state: State, outcome: Outcome) -> State:
    _expect(outcome, Succeeded, Failed, phase=state.phase)
    if isinstance(outcome, Failed):
        return _rollback(state, Result.REJECTED, ("the candidate passed but could not be kept",) + outcome.reasons)
    return replace(state, phase=Phase.DONE, done=state.done + outcome.notes)


def _restore(state: State, outcome: Outcome) -> State:
    _expect(outcome, Succeeded, Failed, phase=state.phase)
    if isinstance(outcome, Succeeded):
        return replace(state, phase=Phase.VERIFY, done=state.done + outcome.notes)
    attempt = state.rollback_attempt + 1
    if attempt < state.limits.rollback_attempts:
        return replace(state, rollback_attempt=attempt, reasons=state.reasons + outcome.reasons)
    return replace(
        state,
        phase=Phase.ROLLBACK_FAILED,
        result=Result.ROLLBACK_FAILED,
        reasons=state.reasons + outcome.reasons + (f"the known-good unit did not come back after {attempt} attempt(s)",),
    )


def _verify(state: State, outcome: Outcome) -> State:
    _expect(outcome, Verified, phase=state.phase)
    assert isinstance(outcome, Verified)
    if not outcome.ok:
        return replace(
            state,
            phase=Phase.ROLLBACK_FAILED,
            result=Result.ROLLBACK_FAILED,
            reasons=state.reasons + outcome.reasons + ("the restored known-good unit failed its verification",),
        )
    if outcome.starts is not None:
        return _over_starts(state, outcome, outcome.starts)
    if outcome.drift and outcome.in_doubt and state.result in (Result.REJECTED, Result.PASSED):
        # The environment moved and the A-B-A reading cannot pin the verdict on the candidate: neither
        # rejected nor passed on it. The known-good unit runs either way.
        return replace(state, phase=Phase.DONE, drift=True, result=Result.INCONCLUSIVE,
                       reasons=state.reasons + outcome.reasons + (
                           f"inconclusive, not {state.result.value}: the environment drifted during the promote; "
                           "run it again when the host is steady",))
    return replace(state, phase=Phase.DONE, drift=outcome.drift, reasons=state.reasons + outcome.reasons)


def _over_starts(state: State, outcome: Verified, starts: JudgeOutcome) -> State:
    """The rolled-back verdict decided over server starts: the baseline's two or three (before the promote,
    after the rollback, restarted in place there), the candidate's one to three (restarted before the rollback).

    A FAIL over both starts rejects (a stage-1 INCONCLUSIVE too: more evidence decided it), unless the
    restored baseline drifted beyond the limit: the environment may then explain it. Anything else is
    INCONCLUSIVE: never rejected on a FAIL that a slower server start could explain."""
    done = replace(state, phase=Phase.DONE, drift=outcome.drift, reasons=state.reasons + outcome.reasons)
    n = outcome.baseline_starts
    if starts is JudgeOutcome.FAIL and not outcome.drift:
        return replace(done, result=Result.REJECTED, reasons=done.reasons + (
            "rejected: worse beyond the limit against the baseline on "
            + ("both of its server starts" if n == 2 else f"all {starts_word(n)} of its server starts"),))
    if starts is JudgeOutcome.FAIL:
        why = ("inconclusive, not rejected: the restored baseline drifted beyond the limit, so the environment "
               "may explain the candidate's result; run it again when the host is steady")
    elif state.result is Result.REJECTED:
        why = ("inconclusive, not rejected: a slower server start could explain the FAIL (judged over "
               f"{starts_word(n)} baseline starts)")
    else:
        why = f"still inconclusive over {starts_word(n)} baseline starts: the baseline was kept"
    return replace(done, result=Result.INCONCLUSIVE, reasons=done.reasons + (why,))


def starts_word(n: int) -> str:
    """2 → "two": how the operator's lines count server starts."""
    return {1: "one", 2: "two", 3: "three"}.get(n, str(n))


_STEPS: dict[Phase, Step] = {
    Phase.PREFLIGHT: _simple(Phase.BASELINE, _refuse),
    Phase.BASELINE: _baseline,
    Phase.CONFIRM: _confirm,
    Phase.INSTALL: _simple(Phase.RESTART, _reject),
    Phase.RESTART: _restart,
    Phase.STARTUP: _startup,
    Phase.BENCH: _bench,
    Phase.JUDGE: _judge,
    Phase.OUTPUTS: _outputs,
    Phase.SECOND_START: _candidate_again,
    Phase.KEEP: _keep,
    Phase.ROLLBACK: _restore,
    Phase.VERIFY: _verify,
}
