"""The promote's steps after the verdict that put the known-good unit back: the candidate's later server
starts (when the verdict is decided over server starts), the rollback, and the verification of the restored
baseline — against the baseline before the promote (drift), or over the starts of each side (two a side, three
on a one-level sweep: ``judge.starts.starts_a_side``)."""

from __future__ import annotations

from dataclasses import replace

from deployctl.bench.result import BenchResult
from deployctl.judge.outcome import JudgeOutcome
from deployctl.live.step_context import StepContext, unusable
from deployctl.decisions import machine as m
from deployctl.decisions.decided import VERDICT_EVENT, decided
from deployctl.decisions.evidence import SECOND_START_ROLE


class VerifySteps(StepContext):
    async def _do_SecondCandidateStart(self, action: m.SecondCandidateStart) -> m.Outcome:
        """The candidate restarted in place (same unit, a new server start) and measured on the plan: its C2
        (or C3), stored under its own bench_key so that no start's row stands for another's."""
        nth = f"a {_ORDINAL.get(action.start, str(action.start))} server start"
        outcome = await self._start(fresh=False)
        if not outcome.ready:
            return m.Failed((f"the candidate did not come back on {nth} ({outcome.kind}): {outcome.message}",))
        plan = dict(action.over_starts)
        result = await self._traffic(self.plan.url, sorted(plan), plan, "candidate")
        self.evidence.candidate_again.append(result)
        self.ledger.save_bench(self.release_id, SECOND_START_ROLE, result, unit_hash=self.plan.candidate_hash,
                               bench_key=_start_key(SECOND_START_ROLE, sorted(plan), action.start), host=self.plan.host)
        problem = unusable(result)
        if problem:
            return m.Failed((f"the candidate did not serve on {nth}: {problem}",))
        levels = ", ".join(f"C={c} ×{n}" for c, n in action.over_starts)
        return m.Succeeded((f"restarted {self.plan.unit_name} on {self.plan.profile} again ({nth}, "
                            f"ready in {outcome.wait_s:.1f} s) and measured {levels}",))

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
        problem = unusable(result)
        if problem:
            return m.Verified(False, reasons=(f"verification benchmark: {problem}",))
        if before is None:
            return m.Verified(True, reasons=("verified: healthy and serving (no earlier baseline to compare)",))
        if over_starts:
            assert candidate is not None
            after, said = [result], ()
            if action.starts > 2:
                third = await self._baseline_again(over_starts, levels)
                if isinstance(third, m.Verified):
                    return third
                after, said = ([result, third], ()) if isinstance(third, BenchResult) else ([result], (third,))
            verified = self._judge_over_starts(before, after, candidate)
            return replace(verified, reasons=verified.reasons + said)
        judged = self.evidence.judge.outcome if self.evidence.judge and not self.evidence.gate_failures else None
        drift = self.a.judge.drift(before, result, candidate, judged)
        self.evidence.drift = drift
        # A drift of throughput never explains changed answers: an output-gate rejection stands.
        wrong = self.evidence.output is not None and self.evidence.output.outcome is not JudgeOutcome.PASS
        return m.Verified(True, drift=drift.drifted, reasons=drift.reasons, in_doubt=drift.in_doubt and not wrong)

    async def _baseline_again(self, plan: dict[int, int], levels: list[int]) -> BenchResult | m.Verified | str:
        """The restored baseline restarted in place and measured again on the plan (B3): the sweep; or why it
        was not measured, the promote then judged on B1 and B2 as before three starts were asked; or, when the
        known-good unit does not come back even on a fresh start, the failed verification."""
        outcome = await self._start(fresh=False)
        if not outcome.ready:
            again = await self._start(fresh=True)
            if not again.ready:
                return m.Verified(False, reasons=(
                    f"the restored known-good unit did not come back after a restart in place to measure its third "
                    f"server start ({outcome.kind}: {outcome.message}), nor on a fresh start ({again.kind}: "
                    f"{again.message})",))
            return (f"judged on two baseline starts: the restored baseline did not come back on a third server "
                    f"start ({outcome.kind}: {outcome.message}); it did on a fresh start, not measured")
        result = await self._traffic(self.plan.url, levels, plan, "verify")
        self.ledger.save_bench(self.release_id, "verify", result, unit_hash=self.plan.known_good_hash or "",
                               bench_key=_start_key("verify", levels, 3), host=self.plan.host)
        problem = unusable(result)
        if problem:
            return f"judged on two baseline starts: the restored baseline's third server start did not serve: {problem}"
        self.evidence.verify_again.append(result)
        return result

    def _judge_over_starts(self, before: BenchResult, after: list[BenchResult], candidate: BenchResult) -> m.Verified:
        """The rolled-back verdict decided over the baseline's starts (B1, then B2 and B3 after the rollback)
        and the candidate's (C1 and those measured of C2, C3), stored with the verdict it decides.

        The over-starts test is the A-B-A reading here (the candidate against both baseline starts, the
        restart offset a random effect), so the drift check says only whether the baseline moved."""
        noise = self._learned_noise()
        again = self.evidence.candidate_again  # fewer than asked: a start was cut short (an abort, a crash)
        starts = self.a.judge.over_starts([before, *after], [candidate, *again], noise, self._learned_restart(noise))
        self.evidence.starts = starts
        stored = decided(self.ledger.events(self.release_id))
        if stored is not None:  # the last verdict note is the one the promote acted on: now with this
            self.ledger.record(self.release_id, m.Phase.VERIFY.value, "note", VERDICT_EVENT,
                               replace(stored, starts=starts.to_dict()).to_detail())
        drift = self.a.judge.drift(before, after[0])
        self.evidence.drift = drift
        return m.Verified(True, drift=drift.drifted, reasons=starts.reasons + drift.reasons, starts=starts.outcome,
                          baseline_starts=1 + len(after))


_ORDINAL = {2: "second", 3: "third"}


def _start_key(role: str, levels: list[int], start: int) -> str:
    """The bench_key of a later start's sweep: the second's as before three starts a side, the third's its own."""
    return f"{role}:{levels}" + (f":start {start}" if start > 2 else "")
