"""Finish what a dead controller started, before doing anything else on that deployment.

A promote whose process died (SIGKILL, OOM, a reboot of the operator's SSH session) leaves an unfinished
release in the ledger, with the machine's state saved before its last action. The next deployctl command
on that deployment, holding the deployment's lock (so the dead one is certainly not running), resumes it
with ``machine.resume_after_crash``: nothing to do if no change had been made yet, finish a keep that
was under way, otherwise roll back to the known-good unit and verify it. It then says what it did.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.live.protocols import Adapters
from deployctl.live.runner import Runner
from deployctl.promote import machine as m
from deployctl.promote.evidence import Evidence, Plan
from deployctl.promote.records import Release

log = logging.getLogger("deployctl")


def crash_reason(release: Release, phase: m.Phase, verb: str) -> str:
    who = f"pid {release.pid}" if release.pid else "unknown pid"
    return f"the controller ({who}) stopped during {phase.value}; recovered by `deployctl {verb}`"


async def recover(ledger: Ledger, deployment: str, adapters: Adapters, plan_for: Callable[[Release], Plan],
                  verb: str) -> list[str]:
    """Resume every unfinished release of ``deployment``; return one line per release for the operator.

    The caller holds the deployment's lock, so an unfinished release cannot belong to a live controller.
    """
    said = []
    for release in ledger.unfinished(deployment):
        state = m.State.from_dict(release.state) if release.state else m.start()
        reason = crash_reason(release, state.phase, verb)
        resumed = m.resume_after_crash(state, reason)
        ledger.record(release.id, state.phase.value, "note", "recovery", {"reason": reason})
        if resumed.terminal:
            ledger.save_state(release.id, resumed.to_dict())
            ledger.finish(release.id, result=resumed.result.value if resumed.result else "aborted",
                          verdict=None, reasons=list(resumed.reasons))
            said.append(f"recovered release {release.id}: {reason}; no change had been made")
            continue
        evidence = Evidence(baseline=_stored(ledger, release.id, "baseline"),
                            candidate=_stored(ledger, release.id, "candidate"))
        runner = Runner(ledger, adapters, plan_for(release), release.id, previous_release_id=release.previous_id,
                        evidence=evidence)
        out = await runner.run(resumed)
        if out.state.phase is m.Phase.ROLLBACK_FAILED:
            said.append(f"recovered release {release.id}: {reason}; ROLLBACK FAILED: "
                        + "; ".join(out.state.reasons[-2:]))
        elif out.state.result is m.Result.KEPT:
            said.append(f"recovered release {release.id}: {reason}; finished keeping {release.profile}")
        else:
            said.append(f"recovered release {release.id}: {reason}; rolled back to the known-good unit and verified it")
    return said


def _stored(ledger: Ledger, release_id: int, role: str) -> BenchResult | None:
    found = [b for b in ledger.benches(release_id) if b.role == role]
    return found[-1].bench if found else None


def recovery_plan(ledger: Ledger, release: Release, known_good: Plan) -> Plan:
    """The plan a resumed release runs with: its candidate, against the known-good it was tried on.

    ``known_good`` is the site's plan for the unit on disk now (``Site.known_good_plan``, built by
    ``Site.plan_for``): its deployment, URL, policy and host stay. The release's own record says which
    hash the known-good had, which is what a rollback must restore.
    """
    previous = ledger.get(release.previous_id) if release.previous_id else None
    text = previous.unit_text if previous and not previous.redacted else known_good.known_good_text
    return replace(known_good, profile=release.profile or "candidate", unit_name=release.unit_name,
                   candidate_text=release.unit_text, candidate_hash=release.unit_hash, known_good_text=text,
                   known_good_hash=previous.unit_hash if previous else known_good.known_good_hash)
