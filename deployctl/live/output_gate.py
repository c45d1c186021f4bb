"""The output gate's live side: sends the probe prompts to a server (``deployctl.adapters.sglang_logprobs``)
and hands the answers to the pure verdict (``deployctl.outputgate.verdict``)."""

from __future__ import annotations

import aiohttp

from deployctl.adapters.sglang_logprobs import LogprobClient, gather_limited
from deployctl.inventory.policy import OutputGatePolicy
from deployctl.outputgate.compare import Reference
from deployctl.outputgate.probes import ProbeSet, shipped
from deployctl.outputgate.record import Measured, ReferenceSet


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
