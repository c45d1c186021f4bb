"""The promote runner: act → record → advance, until the machine says it is over.

It does each action of the machine (``deployctl.decisions.machine``) through the protocols of
``deployctl.live.protocols`` (``Units``, ``Bench``, ``Judge``, ``Preflight``, ``Startup``): tests script
them, ``deployctl.live.bindings`` binds them to systemd, the journal and the load client. It writes to the
ledger itself: before every action the machine's state and the action's intent, after it the outcome and
the evidence. The plan, the lock and the release row come from the verb before the runner starts. A
controller killed at any point leaves enough for ``deployctl.flows.recover`` to roll back or finish.

An abort (``deployctl abort`` sends SIGTERM; Ctrl-C) cancels the action in flight, unless it is already
the rollback, and feeds ``Interrupted`` to the machine, which then rolls back.

A ledger that stops taking writes (disk full, I/O error, damaged, locked too long) ends the machine: the
intent of the next step cannot be recorded, so no further step may run. If the host was touched, the
runner rolls back without the ledger (remove the trial, reload, restart: no disk space needed) and exits
12 naming the ledger's fault; the release stays unfinished, so the next command closes its record.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any, Awaitable, Callable, NoReturn

from deployctl.adapters.ledger import LedgerError
from deployctl.errors import DeployctlError, RollbackFailed
from deployctl.judge.outcome import JudgeOutcome
from deployctl.live.baseline_steps import BaselineSteps
from deployctl.live.verify_steps import VerifySteps
from deployctl.outputgate.probes import shipped
from deployctl.outputgate.verdict import decide
from deployctl.decisions import machine as m
from deployctl.decisions.decided import VERDICT_EVENT, Decided
from deployctl.decisions.evidence import JudgeResult, PromoteOutcome, bench_key, describe_action

log = logging.getLogger("deployctl")


# --- the loop --------------------------------------------------------------------------------------


class Runner(BaselineSteps, VerifySteps):
    """The promote's loop; the handlers of the baseline's steps and of the way back live in
    ``BaselineSteps`` and ``VerifySteps``, what they share in ``StepContext``."""

    def request_abort(self, reason: str) -> None:
        self.abort_reason = reason
        self.abort.set()

    async def run(self, state: m.State) -> PromoteOutcome:
        started = self.a.clock()
        try:
            state = await self._steps(state)
        except LedgerError as exc:
            await self._back_without_ledger(state if self._last is None else self._last, exc)
        return PromoteOutcome(self.release_id, state, self.plan, self.evidence, self.a.clock() - started)

    async def _steps(self, state: m.State) -> m.State:
        while (action := m.next_action(state)) is not None:
            self._last = state
            self.ledger.save_state(self.release_id, state.to_dict())
            self.ledger.record(self.release_id, state.phase.value, "intent", type(action).__name__, {"action": repr(action)})
            self.a.progress.step(state.phase, describe_action(action, self.plan))
            if self.a.guard is not None:  # each step is progress: the dead-man's lease runs on
                self.a.guard.renew()
            t0, outside0 = self.a.clock(), self.evidence.outside_s
            outcome = await self._act_unless_aborted(state, action)
            if state.phase is self.crash_after:
                os.kill(os.getpid(), signal.SIGKILL)
            # Per phase, the controller's own share: the phase's time less startup waits and traffic in it.
            own = (self.a.clock() - t0) - (self.evidence.outside_s - outside0)
            self.evidence.add_time(f"own:{state.phase.value}", own)
            self.ledger.record(self.release_id, state.phase.value, "outcome", type(outcome).__name__, _detail(outcome))
            state = m.advance(state, outcome)
            self._last = state
        self.ledger.save_state(self.release_id, state.to_dict())
        self._record_bench_time(state)
        self._finish(state)
        if self.a.guard is not None:  # kept or rolled back: nothing left for the switch to do
            await self.a.guard.disarm()
        return state

    async def _back_without_ledger(self, state: m.State, exc: LedgerError) -> NoReturn:
        """The ledger failed in ``state``: put the known-good unit back if the host was touched, then stop.

        The dead-man's switch stays armed: when it fires, ``deployctl recover`` closes the release's record."""
        if state.terminal or not state.touched:
            raise exc  # nothing of the candidate runs (or the outcome is final): exit 5, the hint says what to fix
        log.error("the ledger failed during %s: %s; rolling back without it", state.phase.value, exc.message)
        self.a.progress.step(m.Phase.ROLLBACK, "rolling back without the ledger: " + exc.message)
        try:
            where = await self.a.units.restore(self.plan.unit_name, self.plan.known_good_text,
                                               self.plan.known_good_hash)
            outcome = await self._start(fresh=True, record=False)
            back = (f"rolled back to the known-good unit ({where}; ready in {outcome.wait_s:.1f} s)" if outcome.ready
                    else f"the known-good unit did not come back ({outcome.kind}): {outcome.message}")
        except DeployctlError as err:
            back = f"the rollback failed too: {err.message}"
        raise RollbackFailed(
            f"the ledger failed during {state.phase.value} ({exc.message}); {back}; release {self.release_id}"
            " could not be recorded",
            hint=f"{exc.hint}; then any deployctl command on this deployment (e.g. `deployctl status`) closes the"
                 " release's record",
        ) from exc

    def _record_bench_time(self, state: m.State) -> None:
        """The benchmark seconds and what reuse saved, as a note the ledger keeps (``deployctl show``)."""
        time = self.evidence.bench_time
        if time.total_s <= 0 and not self.evidence.fresh_because:
            return
        trials = self.evidence.trials(self.plan.policy.judge.max_trials)
        said = [time.describe()] + ([trials.describe()] if trials else []) + \
            ([time.reuse.describe()] if time.reuse else []) + \
            [f"fresh baseline: {why}" for why in self.evidence.fresh_because if time.reuse is None]
        self.ledger.record(self.release_id, state.phase.value, "note", "benchmark",
                           {**time.to_dict(), "fresh_because": list(self.evidence.fresh_because),
                            "trials": trials.to_dict() if trials else None, "reason": "; ".join(said)})

    def _finish(self, state: m.State) -> None:
        verdict = self.evidence.judge.outcome.value if self.evidence.judge else None
        if self.evidence.gate_failures:
            verdict = "FAIL (startup gate)"
        elif self.evidence.starts is not None:
            starts = m.starts_word(2 + len(self.evidence.verify_again))
            verdict = f"{self.evidence.starts.outcome.value} (over {starts} baseline starts)"
        self.ledger.finish(self.release_id, result=state.result.value if state.result else "unknown",
                           verdict=verdict, reasons=list(state.reasons))

    async def _act_unless_aborted(self, state: m.State, action: m.Action) -> m.Outcome:
        if self.abort.is_set() and state.phase not in (m.Phase.ROLLBACK, m.Phase.VERIFY):
            return m.Interrupted(self.abort_reason)
        if state.phase in (m.Phase.ROLLBACK, m.Phase.VERIFY, m.Phase.KEEP):
            return await self._act(action)  # never cut the way back (or the keep) short
        task = asyncio.ensure_future(self._act(action))
        aborted = asyncio.ensure_future(self.abort.wait())
        done, _ = await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            aborted.cancel()
            return task.result()
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # the action's own end no longer matters
            pass
        return m.Interrupted(self.abort_reason)

    async def _act(self, action: m.Action) -> m.Outcome:
        handler = HANDLERS[type(action)]
        try:
            return await handler(self, action)
        except LedgerError:
            raise  # the record of this step is lost: no further step may run (``run`` rolls back)
        except DeployctlError as exc:
            reason = exc.message + (f" ({exc.hint})" if exc.hint else "")
            log.warning("%s failed: %s", type(action).__name__, reason)
            return _failure(action, reason)
        except Exception as exc:  # a bug must not leave the candidate running: fail the step, roll back
            log.exception("%s hit an unexpected error", type(action).__name__)
            return _failure(action, f"unexpected error in {type(action).__name__}: {exc!r} (a deployctl bug; please report it)")

    # --- one handler per action ---------------------------------------------------------------------

    async def _do_RunPreflight(self, action: m.RunPreflight) -> m.Outcome:
        result = await self.a.preflight.check(self.plan)
        self.evidence.preflight = result
        if result.errors:
            return m.Failed(tuple(f"pre-flight: {e}" for e in result.errors))
        return m.Succeeded()

    async def _do_InstallTrial(self, action: m.InstallTrial) -> m.Outcome:
        problem = await self._reference_outputs(fresh=False)  # a promote that began here (the canary's)
        if problem:
            return m.Failed((problem,))
        where = await self.a.units.install_trial(self.plan.unit_name, self.plan.candidate_text)
        armed = await self.a.guard.arm(self.release_id) if self.a.guard is not None else None
        return m.Succeeded((f"installed {self.plan.profile} as a trial: {where}",) + ((armed,) if armed else ()))

    async def _do_RestartCandidate(self, action: m.RestartCandidate) -> m.Outcome:
        outcome = await self._start(fresh=False)
        self.evidence.candidate_startup = outcome.startup
        self.ledger.save_startup(self.release_id, "candidate", outcome.startup)
        if outcome.startup is not None:
            self.evidence.startup_diff = self.a.startup.diff(self.evidence.baseline_startup, outcome.startup, self.plan)
        if outcome.ready:
            return m.Succeeded((f"restarted {self.plan.unit_name} on {self.plan.profile}: ready in {outcome.wait_s:.1f} s",))
        self.evidence.start_failure = outcome
        return m.Failed((f"the candidate did not come up ({outcome.kind}): {outcome.message}",))

    async def _do_CheckStartupGates(self, action: m.CheckStartupGates) -> m.Outcome:
        assert self.evidence.candidate_startup is not None  # RESTART succeeded only with a ready report
        gates = self.a.judge.gates(self.evidence.baseline_startup, self.evidence.candidate_startup)
        if gates.passed:
            return m.Succeeded()
        self.evidence.gate_failures = gates.failures
        return m.Failed(tuple(f"startup gate: {f}" for f in gates.failures))

    async def _do_BenchCandidate(self, action: m.BenchCandidate) -> m.Outcome:
        if action.more_trials:
            levels = [c for c, _ in action.more_trials]
            extra = await self._traffic(self.plan.url, levels, dict(action.more_trials), "candidate")
            assert self.evidence.candidate is not None
            result = self.a.bench.merge(self.evidence.candidate, extra)
        else:
            result = await self._traffic(self.plan.url, None, self.plan.policy.judge.min_trials, "candidate")
        self.evidence.candidate = result
        startup = self.evidence.candidate_startup
        self.ledger.save_bench(self.release_id, "candidate", result, unit_hash=self.plan.candidate_hash,
                               bench_key=bench_key(self.plan.policy), host=self.plan.host,
                               sglang_version=startup.sglang_version if startup else None)
        return m.Succeeded()

    async def _do_JudgeCandidate(self, action: m.JudgeCandidate) -> m.Outcome:
        assert self.evidence.baseline is not None and self.evidence.candidate is not None
        noise = self._learned_noise()
        verdict = self.a.judge.judge(self.evidence.baseline, self.evidence.candidate, noise,
                                     restart=self._learned_restart(noise))
        self.evidence.judge = verdict
        # What was decided and under what, for the reports to show as it was (not recomputed under a policy
        # or a noise estimate of a later day): the last of these notes is the verdict the promote acted on.
        stored = Decided(verdict.outcome.value, self.plan.policy.judge.model_dump(mode="json"),
                         {str(c): n.to_dict() for c, n in noise.items()}, verdict.record or _rows_record(verdict))
        self.ledger.record(self.release_id, m.Phase.JUDGE.value, "note", VERDICT_EVENT, stored.to_detail())
        return m.Judged(verdict.outcome, verdict.reasons, verdict.more_trials, verdict.over_starts, verdict.starts)

    async def _do_CheckOutputs(self, action: m.CheckOutputs) -> m.Outcome:
        reference, floor = self.evidence.outputs_reference, self.evidence.outputs_floor
        if reference is None or floor is None or self.a.outputs is None:
            return m.OutputsChecked(JudgeOutcome.INCONCLUSIVE, ("output gate: the baseline's answers are not at hand "
                                                           "(a resumed promote); the baseline is kept",))
        policy = self.plan.policy.gates.output
        t0 = self.a.clock()
        try:
            measured = await self.a.outputs.measure(self.plan.url, policy, reference, answers=True)
        finally:
            self._outside("outputs:candidate", self.a.clock() - t0)
        probes = shipped().subset(policy.probes)
        verdict = decide(policy, probes, reference.refs, floor.scores, measured.scores, measured.answers,
                         failed=measured.failed, requests=measured.requests)
        self.evidence.output = verdict
        self.ledger.record(self.release_id, m.Phase.OUTPUTS.value, "evidence", "outputs",
                           {**verdict.to_dict(), "reference_from": reference.reused_from,
                            "seconds": {"reference": reference.seconds, "floor": floor.seconds,
                                        "candidate": measured.seconds}})
        return m.OutputsChecked(verdict.outcome, verdict.reasons)

    async def _do_KeepCandidate(self, action: m.KeepCandidate) -> m.Outcome:
        where = await self.a.units.keep(self.plan.unit_name, self.plan.candidate_hash)
        self.ledger.mark_live(self.release_id)
        return m.Succeeded((f"kept {self.plan.profile}: {where}",))


# Which handler does each action of the machine: a table, not a name built at run time, so that grep finds
# the caller of every handler; tests/unit/test_runner_handlers.py checks that every type of ``m.Action`` has one.
HANDLERS: dict[type, Callable[[Runner, Any], Awaitable[m.Outcome]]] = {
    m.RunPreflight: Runner._do_RunPreflight,
    m.MeasureBaseline: Runner._do_MeasureBaseline,
    m.ConfirmBaseline: Runner._do_ConfirmBaseline,
    m.InstallTrial: Runner._do_InstallTrial,
    m.RestartCandidate: Runner._do_RestartCandidate,
    m.CheckStartupGates: Runner._do_CheckStartupGates,
    m.BenchCandidate: Runner._do_BenchCandidate,
    m.JudgeCandidate: Runner._do_JudgeCandidate,
    m.CheckOutputs: Runner._do_CheckOutputs,
    m.SecondCandidateStart: Runner._do_SecondCandidateStart,
    m.KeepCandidate: Runner._do_KeepCandidate,
    m.RestoreBaseline: Runner._do_RestoreBaseline,
    m.VerifyBaseline: Runner._do_VerifyBaseline,
}


def _failure(action: m.Action, reason: str) -> m.Outcome:
    """A failed action, as the outcome its phase expects."""
    if isinstance(action, m.VerifyBaseline):
        return m.Verified(False, reasons=(reason,))
    if isinstance(action, m.JudgeCandidate):
        return m.Judged(JudgeOutcome.INVALID, (reason,))
    if isinstance(action, m.CheckOutputs):
        return m.OutputsChecked(JudgeOutcome.INVALID, (f"output gate: {reason}",))
    return m.Failed((reason,))


def _rows_record(verdict: JudgeResult) -> dict[str, Any]:
    """A verdict's record from its rows, for a judge that gives no serialised form of its own."""
    return {"outcome": verdict.outcome.value, "reasons": list(verdict.reasons),
            "levels": [{"concurrency": r.concurrency, "state": r.verdict_text, "reason": r.reason} for r in verdict.levels]}


def _detail(outcome: m.Outcome) -> dict[str, Any]:
    return {k: v for k, v in vars(outcome).items()}
