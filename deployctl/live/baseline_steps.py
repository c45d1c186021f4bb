"""The promote's baseline steps, while the known-good release still runs: measure it in rounds (or reuse
a stored measurement once a confirmation trial agrees), and the baseline's answers for the output gate."""

from __future__ import annotations

from deployctl.judge.noise import baseline_plan, baseline_top_up, describe_baseline, first_stage_trials
from deployctl.judge.reuse import (
    BaselineFingerprint,
    ReuseAccount,
    confirm_levels,
    reuse_decision,
    trial_seconds,
)
from deployctl.live.step_context import StepContext, unusable
from deployctl.outputgate.probes import shipped
from deployctl.outputgate.record import ReferenceSet, reference_key
from deployctl.outputgate.verdict import decide
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import bench_key, version_key
from deployctl.decisions.records import StoredBench


class BaselineSteps(StepContext):
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
        problem = unusable(result)
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
        problem = unusable(trial)
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
