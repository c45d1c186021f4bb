"""The output gate's live side: sends the probe prompts to a server (``deployctl.adapters.sglang_logprobs``)
and hands the answers to the pure verdict (``deployctl.outputgate.verdict``)."""

from __future__ import annotations

import aiohttp

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.sglang_logprobs import LogprobClient, gather_limited
from deployctl.inventory.policy import OutputGatePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.watch import CheckVerdict, Health
from deployctl.live.protocols import Outputs
from deployctl.operations.site import Site
from deployctl.outputgate.compare import Reference
from deployctl.outputgate.probes import ProbeSet, shipped
from deployctl.outputgate.record import Measured, ReferenceSet, scores_from_dict, scores_to_dict
from deployctl.outputgate.verdict import decide
from deployctl.decisions.records import Release

WATCH_REFERENCE = "outputs-watch-reference"  # a live release's answers at its first watch
_HEALTH = {JudgeOutcome.PASS: Health.OK, JudgeOutcome.FAIL: Health.DEGRADED}


def probe_set(policy: OutputGatePolicy) -> ProbeSet:
    return shipped().subset(policy.probes)


class LiveOutputs:
    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key

    async def reference(self, url: str, policy: OutputGatePolicy, key: str) -> ReferenceSet:
        """The server's greedy answers to the probes, with their top-k log-probabilities."""
        probes = probe_set(policy)
        async with aiohttp.ClientSession() as session:
            client = LogprobClient(session, url, api_key=self.api_key)
            results, failed, seconds = await gather_limited(
                [lambda p=p: client.greedy(p, policy.max_new_tokens, policy.top_k) for p in probes.probes],
                policy.concurrency)
        refs = {r.probe_id: r for r in results if r is not None}
        return ReferenceSet(key, probes.version, refs, failed, len(probes.probes), seconds)

    async def measure(self, url: str, policy: OutputGatePolicy, refs: ReferenceSet, *, answers: bool) -> Measured:
        """The server's scores of the references (teacher forcing) and, with ``answers``, its own greedy
        answers to the same prompts."""
        probes = {p.id: p for p in probe_set(policy).probes}
        wanted: list[Reference] = [r for i, r in refs.refs.items() if i in probes]
        async with aiohttp.ClientSession() as session:
            client = LogprobClient(session, url, api_key=self.api_key)
            jobs = [lambda r=r: client.score(r, policy.top_k) for r in wanted]
            if answers:
                jobs += [lambda r=r: client.answer(probes[r.probe_id], policy.max_new_tokens) for r in wanted]
            results, failed, seconds = await gather_limited(jobs, policy.concurrency)
        n = len(wanted)
        scores = {r.probe_id: s for r, s in zip(wanted, results[:n]) if s is not None}
        said = {r.probe_id: a for r, a in zip(wanted, results[n:]) if a is not None}
        return Measured(scores, said, failed, len(jobs), seconds)  # type: ignore[arg-type]


class OutputWatch:
    """The canary's look at what the live release says (``deployctl.flows.canary_watch.WatchCheck``): a subset of
    the probes (``gates.output.watch_probes``); the release's answers at its first watch are its reference
    (with their A/A floor); later watches score them and answer again: changed answers are degraded."""

    name = "outputs"

    def __init__(self, ledger: Ledger, outputs: Outputs) -> None:
        self.ledger, self.outputs = ledger, outputs

    async def __call__(self, site: Site, live: Release) -> CheckVerdict:
        gate = site.policy.gates.output
        policy = gate.model_copy(update={"probes": gate.watch_probes})
        probes = probe_set(policy)
        key = f"release={live.id};probes={probes.version};new={policy.max_new_tokens};k={policy.top_k}"
        stored = self.ledger.stored_outputs(key, max_age_s=1e12, name=WATCH_REFERENCE)
        if stored is None:
            reference = await self.outputs.reference(site.url, policy, key)
            if not reference.refs:
                return CheckVerdict(Health.UNCLEAR, (f"none of {reference.requests} probe prompts was answered "
                                                     "with log-probabilities",))
            floor = await self.outputs.measure(site.url, policy, reference, answers=False)
            self.ledger.record(live.id, "canary", "evidence", WATCH_REFERENCE,
                               {**reference.to_dict(), "floor": scores_to_dict(floor.scores)})
            return CheckVerdict(Health.OK)  # the first watch: these answers are the reference from now on
        reference = ReferenceSet.from_dict(stored[1], reused_from=stored[0])
        measured = await self.outputs.measure(site.url, policy, reference, answers=True)
        verdict = decide(policy, probes, reference.refs, scores_from_dict(stored[1]["floor"]), measured.scores,
                         measured.answers, failed=measured.failed, requests=measured.requests)
        self.ledger.record(live.id, "canary", "evidence", "outputs", verdict.to_dict())
        health = _HEALTH.get(verdict.outcome, Health.UNCLEAR)
        return CheckVerdict(health, () if health is Health.OK else verdict.reasons)


def watch_checks(ledger: Ledger, site: Site, outputs: Outputs | None) -> list[OutputWatch]:
    """The canary watch's output check, unless the policy turns it off."""
    gate = site.policy.gates.output
    return [OutputWatch(ledger, outputs)] if outputs is not None and gate.enabled and gate.watch_probes else []
