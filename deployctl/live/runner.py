"""The promote runner: act → record → advance, until the machine says it is over.

It does each action of the machine (``deployctl.promote.machine``) through the protocols of
``deployctl.live.protocols`` (``Units``, ``Bench``, ``Judge``, ``Preflight``, ``Startup``): tests script
them, ``deployctl.live.bindings`` binds them to systemd, the journal and the load client. It writes to the
ledger itself: before every action the machine's state and the action's intent, after it the outcome and
the evidence. The plan, the lock and the release row come from the verb before the runner starts. A
controller killed at any point leaves enough for ``deployctl.live.recovery`` to roll back or finish.

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
from dataclasses import replace
from typing import Any, Mapping, NoReturn, Sequence

from deployctl.adapters.ledger import Ledger, LedgerError
from deployctl.bench.result import BenchResult
from deployctl.errors import DeployctlError, RollbackFailed
from deployctl.judge.noise import (
    baseline_plan, baseline_top_up, describe_baseline, first_stage_trials, learn_history, learn_restart, restart_pair,
)
from deployctl.judge.outcome import Outcome as Verdict
from deployctl.judge.reuse import (
    BaselineFingerprint,
    ReuseAccount,
    confirm_levels,
    reuse_decision,
    trial_seconds,
)
from deployctl.judge.stats import NoiseEstimate, RestartNoise
from deployctl.live.protocols import Adapters
from deployctl.promote import machine as m
from deployctl.promote.decided import VERDICT_EVENT, Decided, decided
from deployctl.promote.evidence import (
    SECOND_START_ROLE,
    Evidence,
    JudgeResult,
    Plan,
    PromoteOutcome,
    StartOutcome,
    bench_key,
    describe_action,
    version_key,
)
from deployctl.outputgate.probes import shipped
from deployctl.outputgate.record import ReferenceSet, reference_key
from deployctl.outputgate.verdict import decide
from deployctl.promote.records import StoredBench

log = logging.getLogger("deployctl")


# --- the loop --------------------------------------------------------------------------------------


class Runner:
    def __init__(
        self,
        ledger: Ledger,
        adapters: Adapters,
        plan: Plan,
        release_id: int,
        *,
        previous_release_id: int | None = None,
        abort: asyncio.Event | None = None,
        baseline_max_age_s: float = 3600.0,
        evidence: Evidence | None = None,
        crash_after: m.Phase | None = None,
    ) -> None:
        self.ledger = ledger
        self.a = adapters
        self.plan = plan
        self.release_id = release_id
        self.previous_release_id = previous_release_id
        self.abort = abort or asyncio.Event()
        self.abort_reason = "aborted by the operator"
        self.baseline_max_age_s = baseline_max_age_s
        self.evidence = evidence or Evidence()
        self._last: m.State | None = None  # the state whose step is under way, for a rollback without the ledger
        # Fault injection for the crash tests (``DEPLOYCTL_CRASH_AFTER``): SIGKILL itself once this phase's
        # action is done and before its outcome is recorded, the worst moment for recovery.
        self.crash_after = crash_after

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
            outcome = await self._start(fresh=True)
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
            verdict = f"{self.evidence.starts.outcome.value} (over two baseline starts)"
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
        handler = getattr(self, "_do_" + type(action).__name__)
        try:
            return await handler(action)
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

    async def _do_MeasureBaseline(self, action: m.MeasureBaseline) -> m.Outcome:
        report = await self.a.startup.live_report(self.plan.unit_name)
        self.evidence.baseline_startup = report
        self.ledger.save_startup(self.release_id, "baseline", report)
        facts = await self.a.host.server_facts(self.plan.url)
        fingerprint = BaselineFingerprint(
            unit_hash=self.plan.known_good_hash or "", sweep=bench_key(self.plan.policy), host=self.plan.host,
            sglang_version=version_key(facts.sglang_version, report), gpu_model=facts.gpu_model,
            gpu_driver=facts.gpu_driver, power_limit_w=facts.power_limit_w, clocks_policy=facts.clocks_policy,
        )
        self.evidence.fingerprint = fingerprint
        problem = await self._reference_outputs(fresh=action.fresh)
        if problem:
            return m.Failed((problem,))
        if not action.fresh:
            stored = self._reusable(fingerprint)
            if stored is not None:
                self.evidence.stored_baseline = stored
                return m.BaselineStored(stored.release_id)
        # Sized in rounds, all before the candidate is installed (the baseline cannot be extended after):
        # the spread so far, pooled over the levels with the learned noise, asks for one more trial at a
        # level or not; each round's trials sharpen the next plan.
        judge, learned = self.plan.policy.judge, self._learned_noise()
        restart = self._learned_restart(learned)
        first = first_stage_trials(judge, self.plan.policy.bench.concurrency, learned)
        result = await self._traffic(self.plan.url, None, first, "baseline")
        problem = _unusable(result)
        if problem:
            return m.Failed((f"the live release did not benchmark cleanly ({problem}); fix it before promoting",))
        more: dict[int, int] = {}
        for _ in range(judge.max_trials):  # bounded even if a round brings back no trial
            asked = baseline_top_up(judge, result, learned, restart)
            if not asked:
                break
            extra = await self._traffic(self.plan.url, sorted(asked), asked, "baseline")
            result = self.a.bench.merge(result, extra)
            more = {c: more.get(c, 0) + asked.get(c, 0) for c in {*more, *asked}}
        self.evidence.baseline = result
        # The column keeps what the startup log states (the canary's reference is looked up by it); the
        # fingerprint keeps the key reuse decides on.
        self.ledger.save_bench(self.release_id, "baseline", result, unit_hash=fingerprint.unit_hash,
                               bench_key=fingerprint.sweep, host=self.plan.host,
                               sglang_version=report.sglang_version if report else None, fingerprint=fingerprint)
        return m.Succeeded((f"{describe_baseline(first, more)}; restart σ {100 * restart.sigma:.1f} % a side "
                            f"({restart.source})",))

    def _reusable(self, today: BaselineFingerprint) -> StoredBench | None:
        """The stored baseline that may stand in for today's, else None with the reasons in the evidence."""
        if self.baseline_max_age_s <= 0:
            self.evidence.fresh_because = ("a fresh baseline was asked for (--fresh-baseline)",)
            return None
        stored = self.ledger.stored_baseline(unit_hash=today.unit_hash, bench_key=today.sweep, host=self.plan.host)
        if stored is None:
            self.evidence.fresh_because = ("no stored baseline of this unit and sweep on this host",)
            return None
        if stored.fingerprint is None:
            self.evidence.fresh_because = (f"the baseline of release {stored.release_id} was stored without "
                                           "a fingerprint (by an older deployctl)",)
            return None
        decision = reuse_decision(stored.fingerprint, stored.at, today, self.ledger.now(), self.baseline_max_age_s)
        if not decision.reusable:
            self.evidence.fresh_because = decision.reasons
            return None
        return stored

    async def _do_ConfirmBaseline(self, action: m.ConfirmBaseline) -> m.Outcome:
        stored = self.evidence.stored_baseline
        if stored is None or stored.release_id != action.reused_from:  # a resumed promote: nothing at hand
            return m.Confirmed(False, (f"the stored baseline of release {action.reused_from} is not at hand",))
        judge = self.plan.policy.judge
        levels = [c for c in self.plan.policy.bench.concurrency if judge.rule_for(c).role == "critical"] \
            or list(self.plan.policy.bench.concurrency)
        trial = await self._traffic(self.plan.url, levels, 1, "confirmation")
        self.evidence.confirmation_trials += len(levels)
        problem = _unusable(trial)
        if problem:
            return m.Failed((f"the live release did not benchmark cleanly ({problem}); fix it before promoting",))
        noise = self._learned_noise()
        base = stored.bench
        checks = confirm_levels(base, trial, levels, judge.metric, noise)
        if not all(check.agrees for check in checks.values()):
            self.evidence.stored_baseline = None
            self.evidence.fresh_because = tuple(f"C={c}: {check.reason}" for c, check in checks.items()
                                                if not check.agrees)
            return m.Confirmed(False, (f"the stored baseline of release {stored.release_id} no longer describes "
                                       "the server: " + "; ".join(self.evidence.fresh_because) +
                                       "; measuring a fresh one",))
        baseline = self.a.bench.merge(base, trial)
        self.evidence.baseline = baseline
        self.evidence.baseline_reused_from = stored.release_id
        self.evidence.reuse = ReuseAccount(
            reused_from=stored.release_id, age_s=self.ledger.now() - stored.at, confirmation_trials=len(levels),
            baseline_trials=sum(baseline_plan(judge, baseline, noise, self._learned_restart(noise)).values()),
            trial_s=trial_seconds(trial),
        )
        today = self.evidence.fingerprint
        self.ledger.save_bench(self.release_id, "baseline", baseline, unit_hash=stored.unit_hash,
                               bench_key=stored.bench_key, host=self.plan.host,
                               sglang_version=self.evidence.baseline_startup.sglang_version
                               if self.evidence.baseline_startup else None, fingerprint=today,
                               reused_from=stored.release_id)
        return m.Confirmed(True, (self.evidence.reuse.describe(),))

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
        return m.Judged(verdict.outcome, verdict.reasons, verdict.more_trials, verdict.over_starts)

    async def _do_CheckOutputs(self, action: m.CheckOutputs) -> m.Outcome:
        reference, floor = self.evidence.outputs_reference, self.evidence.outputs_floor
        if reference is None or floor is None or self.a.outputs is None:
            return m.OutputsChecked(Verdict.INCONCLUSIVE, ("output gate: the baseline's answers are not at hand "
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

    async def _reference_outputs(self, *, fresh: bool) -> str | None:
        """The baseline's answers and its A/A floor, while the known-good release still runs: a stored set
        with the same key (unit, host, SGLang version, GPU, probes, decoding) re-scored today (the floor,
        which also confirms it), else measured now and stored. None, or why the gate cannot run."""
        last = self._last
        if self.a.outputs is None or last is None or not last.limits.output_gate \
                or self.evidence.outputs_reference is not None:
            return None
        policy, fp = self.plan.policy.gates.output, self.evidence.fingerprint
        probes = shipped().subset(policy.probes)
        key = reference_key(unit_hash=self.plan.known_good_hash or "", host=self.plan.host,
                            sglang_version=fp.sglang_version if fp else None, gpu_model=fp.gpu_model if fp else None,
                            probe_version=probes.version, max_new_tokens=policy.max_new_tokens, top_k=policy.top_k)
        t0 = self.a.clock()
        try:
            reference = None
            if not fresh and self.baseline_max_age_s > 0:
                stored = self.ledger.stored_outputs(key, max_age_s=self.baseline_max_age_s)
                if stored is not None:
                    reference = ReferenceSet.from_dict(stored[1], reused_from=stored[0])
            if reference is not None:
                floor = await self.a.outputs.measure(self.plan.url, policy, reference, answers=False)
                unchanged = decide(policy, probes, reference.refs, floor.scores, floor.scores, {})
                if unchanged.floor.mean_kl * policy.floor_margin > policy.max_mean_kl or floor.failed:
                    reference = None  # it no longer describes the server: measure a fresh one
            if reference is None:
                reference = await self.a.outputs.reference(self.plan.url, policy, key)
                if not reference.refs:
                    return (f"output gate: the live release answered none of {reference.requests} probe prompts "
                            "with log-probabilities; fix it, or pass --skip-output-gate for a model that cannot")
                floor = await self.a.outputs.measure(self.plan.url, policy, reference, answers=False)
                self.ledger.record(self.release_id, m.Phase.BASELINE.value, "evidence", "outputs-reference",
                                   reference.to_dict())
        finally:
            self._outside("outputs:baseline", self.a.clock() - t0)
        self.evidence.outputs_reference, self.evidence.outputs_floor = reference, floor
        return None

    def _outside(self, key: str, seconds: float) -> None:
        self.evidence.add_time("traffic", seconds)
        self.evidence.add_time(key, seconds)

    async def _do_SecondCandidateStart(self, action: m.SecondCandidateStart) -> m.Outcome:
        """The candidate restarted in place (same unit, a new server start) and measured on the plan: its C2."""
        outcome = await self._start(fresh=False)
        if not outcome.ready:
            return m.Failed((f"the candidate did not come back on a second server start ({outcome.kind}): "
                             f"{outcome.message}",))
        plan = dict(action.over_starts)
        result = await self._traffic(self.plan.url, sorted(plan), plan, "candidate")
        self.evidence.candidate_again = result
        self.ledger.save_bench(self.release_id, SECOND_START_ROLE, result, unit_hash=self.plan.candidate_hash,
                               bench_key=f"{SECOND_START_ROLE}:{sorted(plan)}", host=self.plan.host)
        problem = _unusable(result)
        if problem:
            return m.Failed((f"the candidate did not serve on a second server start: {problem}",))
        levels = ", ".join(f"C={c} ×{n}" for c, n in action.over_starts)
        return m.Succeeded((f"restarted {self.plan.unit_name} on {self.plan.profile} again (a second server start, "
                            f"ready in {outcome.wait_s:.1f} s) and measured {levels}",))

    async def _do_KeepCandidate(self, action: m.KeepCandidate) -> m.Outcome:
        where = await self.a.units.keep(self.plan.unit_name, self.plan.candidate_hash)
        self.ledger.mark_live(self.release_id)
        return m.Succeeded((f"kept {self.plan.profile}: {where}",))

    async def _do_RestoreBaseline(self, action: m.RestoreBaseline) -> m.Outcome:
        where = await self.a.units.restore(self.plan.unit_name, self.plan.known_good_text, self.plan.known_good_hash)
        outcome = await self._start(fresh=action.attempt > 0)
        if not outcome.ready:
            return m.Failed((f"the known-good unit did not come back ({outcome.kind}): {outcome.message}",))
        if self.previous_release_id is not None:
            self.ledger.mark_live(self.previous_release_id)
        return m.Succeeded((f"rolled back: {where}; {self.plan.unit_name} ready in {outcome.wait_s:.1f} s",))

    async def _do_VerifyBaseline(self, action: m.VerifyBaseline) -> m.Outcome:
        if not await self.a.bench.healthy(self.plan.url):
            return m.Verified(False, reasons=(f"{self.plan.url}/health does not answer 200 after the rollback",))
        before, candidate = self.evidence.baseline, self.evidence.candidate
        # Over two starts only with both sweeps at hand (a resumed promote has them from the ledger).
        over_starts = dict(action.over_starts) if before is not None and candidate is not None else {}
        levels = sorted(over_starts) or self.plan.policy.verify_concurrency
        result = await self._traffic(self.plan.url, levels, over_starts or 1, "verify")
        self.evidence.verify = result
        # The same unit on a new server start: with the baseline, a restart pair (``Ledger.restart_pairs``).
        self.ledger.save_bench(self.release_id, "verify", result, unit_hash=self.plan.known_good_hash or "",
                               bench_key=f"verify:{levels}", host=self.plan.host)
        problem = _unusable(result)
        if problem:
            return m.Verified(False, reasons=(f"verification benchmark: {problem}",))
        if before is None:
            return m.Verified(True, reasons=("verified: healthy and serving (no earlier baseline to compare)",))
        if over_starts:
            assert candidate is not None
            return self._judge_over_starts(before, result, candidate)
        judged = self.evidence.judge.outcome if self.evidence.judge and not self.evidence.gate_failures else None
        drift = self.a.judge.drift(before, result, candidate, judged)
        self.evidence.drift = drift
        # A drift of throughput never explains changed answers: an output-gate rejection stands.
        wrong = self.evidence.output is not None and self.evidence.output.outcome is not Verdict.PASS
        return m.Verified(True, drift=drift.drifted, reasons=drift.reasons, in_doubt=drift.in_doubt and not wrong)

    def _judge_over_starts(self, before: BenchResult, after: BenchResult, candidate: BenchResult) -> m.Verified:
        """The rolled-back verdict decided over the baseline's two starts and the candidate's one or two,
        stored with the verdict it decides.

        The over-starts test is the A-B-A reading here (the candidate against both baseline starts, the
        restart offset a random effect), so the drift check says only whether the baseline moved."""
        noise = self._learned_noise()
        again = self.evidence.candidate_again  # None: the second start was cut short (an abort, a crash)
        starts = self.a.judge.over_starts([before, after], [candidate, again] if again is not None else [candidate],
                                          noise, self._learned_restart(noise))
        self.evidence.starts = starts
        stored = decided(self.ledger.events(self.release_id))
        if stored is not None:  # the last verdict note is the one the promote acted on: now with this
            self.ledger.record(self.release_id, m.Phase.VERIFY.value, "note", VERDICT_EVENT,
                               replace(stored, starts=starts.to_dict()).to_detail())
        drift = self.a.judge.drift(before, after)
        self.evidence.drift = drift
        return m.Verified(True, drift=drift.drifted, reasons=starts.reasons + drift.reasons, starts=starts.outcome)

    # --- helpers ------------------------------------------------------------------------------------

    async def _start(self, *, fresh: bool) -> StartOutcome:
        timeout = self.plan.policy.gates.startup_timeout_s
        outcome = await self.a.units.restart_and_wait(self.plan.unit_name, timeout, fresh_start=fresh)
        self.evidence.add_time("startup_wait", outcome.wait_s)
        return outcome

    def _learned_noise(self) -> dict[int, NoiseEstimate]:
        """The host's trial-to-trial σ per level, from the ledger's earlier measurements of unchanged releases."""
        # The stored baseline under confirmation (then reused) is pooled by the check itself: not twice.
        stored = self.evidence.stored_baseline
        exclude = (self.release_id,) + ((stored.release_id,) if stored is not None else ())
        stored = self.ledger.aa_benches(deployment=self.plan.deployment, host=self.plan.host,
                                        bench_key=bench_key(self.plan.policy), exclude_releases=exclude)
        return learn_history((b.bench for b in stored), self.plan.policy.judge.metric)

    def _learned_restart(self, learned: Mapping[int, NoiseEstimate]) -> RestartNoise:
        """The host's between-restart σ, from the ledger's measurements of one unit on two starts (the
        default until there are any): the baseline and the candidate run on two server starts."""
        stored = self.evidence.stored_baseline
        exclude = (self.release_id,) + ((stored.release_id,) if stored is not None else ())
        rows = self.ledger.restart_pairs(deployment=self.plan.deployment, host=self.plan.host,
                                         bench_key=bench_key(self.plan.policy), exclude_releases=exclude)
        metric = self.plan.policy.judge.metric
        pairs = [pair for row in rows
                 if (pair := restart_pair(row.before.bench, row.after.bench, metric, learned, row.source))]
        return learn_restart(pairs)

    async def _traffic(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int,
                       role: str) -> BenchResult:
        t0 = self.a.clock()
        try:
            return await self.a.bench.sweep(url, levels, trials)
        finally:
            took = self.a.clock() - t0
            self.evidence.add_time("traffic", took)
            self.evidence.add_time(f"bench:{role}", took)


def _failure(action: m.Action, reason: str) -> m.Outcome:
    """A failed action, as the outcome its phase expects."""
    if isinstance(action, m.VerifyBaseline):
        return m.Verified(False, reasons=(reason,))
    if isinstance(action, m.JudgeCandidate):
        return m.Judged(Verdict.INVALID, (reason,))
    if isinstance(action, m.CheckOutputs):
        return m.OutputsChecked(Verdict.INVALID, (f"output gate: {reason}",))
    return m.Failed((reason,))


def _unusable(result: BenchResult) -> str | None:
    """Why a sweep cannot serve as evidence at all (every request failed), else None."""
    ok = sum(t.requests_ok for lv in result.levels for t in lv.trials)
    failed = sum(t.requests_failed for lv in result.levels for t in lv.trials)
    if ok == 0:
        errors: dict[str, int] = {}
        for lv in result.levels:
            for t in lv.trials:
                for k, v in t.failures.items():
                    errors[k] = errors.get(k, 0) + v
        top = ", ".join(f"{k} ×{v}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1])[:3])
        return f"all {failed} requests failed" + (f": {top}" if top else "")
    return None


def _rows_record(verdict: JudgeResult) -> dict[str, Any]:
    """A verdict's record from its rows, for a judge that gives no serialised form of its own."""
    return {"outcome": verdict.outcome.value, "reasons": list(verdict.reasons),
            "levels": [{"concurrency": r.concurrency, "state": r.verdict_text, "reason": r.reason} for r in verdict.levels]}


def _detail(outcome: m.Outcome) -> dict[str, Any]:
    return {k: v for k, v in vars(outcome).items()}
