"""Finish what a dead controller started, before doing anything else on that deployment.

A promote whose process died (SIGKILL, OOM, a reboot of the operator's SSH session) leaves an unfinished
release in the ledger, with the machine's state saved before its last action. The next deployctl command
on that deployment, holding the deployment's lock (so the dead one is certainly not running), resumes it
with ``machine.resume_after_crash``: nothing to do if no change had been made yet, finish a keep that
was under way, otherwise roll back to the known-good unit and verify it. It then says what it did, and
each verb turns that into its exit code: a recovery that ended in ROLLBACK_FAILED is exit 12 whatever the
verb (``Recovered.failed``), and ``rollback`` still rolls back a candidate the recovery kept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.live.protocols import Adapters
from deployctl.promote import machine as m
from deployctl.promote.dead_man import NOTE, switch_story
from deployctl.promote.evidence import SECOND_START_ROLE, Evidence, Plan
from deployctl.promote.records import Release

log = logging.getLogger("deployctl")
RECOVERY = "recovery"  # the ledger note on a recovered release: why, and by whom (``crash_reason``)


@dataclass(frozen=True)
class Recovered:
    """What recovery did with one unfinished release."""

    release_id: int
    result: m.Result
    line: str  # for the operator

    @property
    def failed(self) -> bool:
        return self.result is m.Result.ROLLBACK_FAILED

    @property
    def kept(self) -> bool:
        return self.result is m.Result.KEPT

    @property
    def rolled_back(self) -> bool:
        return not self.failed and not self.kept and self.result is not m.Result.UNCHANGED


def failed_recovery_hint(deployment: str) -> str:
    return (f"the known-good unit is not serving: `deployctl status -d {deployment}` shows why; bring it back"
            f" (`deployctl restart -d {deployment} --profile KNOWN_GOOD`, or by hand) before the next promote")


def crash_reason(release: Release, phase: m.Phase, verb: str, switch: Sequence[str] = ()) -> str:
    """Why a release is recovered, and by whom; ``switch``: what the dead-man's switch did to its controller
    (its ledger notes, in order), so the reason says why a stalled one stopped, not only that it did."""
    who = f"pid {release.pid}" if release.pid else "unknown pid"
    acted = f"; {switch_story(switch)}" if switch else ""
    return f"the controller ({who}) stopped during {phase.value}{acted}; recovered by `deployctl {verb}`"


async def recover(ledger: Ledger, deployment: str, adapters: Adapters, plan_for: Callable[[Release], Plan],
                  verb: str) -> list[Recovered]:
    """Resume every unfinished release of ``deployment``; say what became of each.

    The caller holds the deployment's lock, so an unfinished release cannot belong to a live controller.
    """
    # Here, not at the top: the runner brings the judge (numpy, scipy), which `deployctl status` pays only
    # when there is something to recover (benchmarks/cli_startup.py).
    from deployctl.live.runner import Runner

    said = []
    for release in ledger.unfinished(deployment):
        state = m.State.from_dict(release.state) if release.state else m.start()
        switch = [e.detail["said"] for e in ledger.events(release.id) if e.name == NOTE and e.detail.get("said")]
        reason = crash_reason(release, state.phase, verb, switch)
        resumed = m.resume_after_crash(state, reason)
        ledger.record(release.id, state.phase.value, "note", RECOVERY, {"reason": reason})
        if resumed.terminal:
            said.append(_close(ledger, release, state, resumed, reason))
            continue
        evidence = Evidence(baseline=_stored(ledger, release.id, "baseline"),
                            candidate=_stored(ledger, release.id, "candidate"),
                            candidate_again=[b.bench for b in ledger.benches(release.id) if b.role == SECOND_START_ROLE])
        runner = Runner(ledger, adapters, plan_for(release), release.id, previous_release_id=release.previous_id,
                        evidence=evidence)
        out = await runner.run(resumed)
        result = out.state.result or m.Result.ABORTED
        if out.state.phase is m.Phase.ROLLBACK_FAILED:
            line = f"{reason}; ROLLBACK FAILED: " + "; ".join(out.state.reasons[-2:])
        elif result is m.Result.KEPT:
            line = f"{reason}; finished keeping {release.profile} (the verdict had been PASS)"
        else:
            line = f"{reason}; rolled back to the known-good unit and verified it"
        said.append(Recovered(release.id, result, f"recovered release {release.id}: {line}"))
    return said


def _close(ledger: Ledger, release: Release, saved: m.State, resumed: m.State, reason: str) -> Recovered:
    """Close the record of a release that needs no step: untouched, or already over when its controller died."""
    result = resumed.result or m.Result.ABORTED
    ledger.save_state(release.id, resumed.to_dict())
    ledger.finish(release.id, result=result.value, verdict=None, reasons=list(resumed.reasons))
    if not saved.terminal:
        what = "no change had been made"
    elif result is m.Result.ROLLBACK_FAILED:
        what = "it had already ended in ROLLBACK FAILED: " + "; ".join(saved.reasons[-2:])
    else:
        what = f"it had already ended ({result.value}); only its record was left open"
    return Recovered(release.id, m.Result.UNCHANGED if not saved.terminal else result,
                     f"recovered release {release.id}: {reason}; {what}")


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
