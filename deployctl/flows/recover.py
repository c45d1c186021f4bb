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

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass, replace
from typing import Callable

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.bench.result import BenchResult
from deployctl.console.release_verbs import locked, say
from deployctl.decisions import machine as m
from deployctl.decisions.dead_man import LeaseAction, judge_alive
from deployctl.decisions.evidence import SECOND_START_ROLE, Evidence, Plan
from deployctl.decisions.records import Release
from deployctl.errors import Busy, RollbackFailed
from deployctl.flows.abort import abort_request_path
from deployctl.live.protocols import Adapters, Progress
from deployctl.operations.dead_man import read_lease, stop_switch
from deployctl.operations.site import Site


log = logging.getLogger("deployctl")


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


def crash_reason(release: Release, phase: m.Phase, verb: str) -> str:
    who = f"pid {release.pid}" if release.pid else "unknown pid"
    return f"the controller ({who}) stopped during {phase.value}; recovered by `deployctl {verb}`"


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
        reason = crash_reason(release, state.phase, verb)
        resumed = m.resume_after_crash(state, reason)
        ledger.record(release.id, state.phase.value, "note", "recovery", {"reason": reason})
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


async def recover_outcomes(ledger: Ledger, site: Site, adapters: Adapters, verb: str) -> list[Recovered]:
    """Resume any promote of this deployment a dead controller left unfinished (the lock is held)."""
    if not ledger.unfinished(site.name):
        return []
    return await recover(ledger, site.name, adapters,
                         lambda release: recovery_plan(ledger, release, site.known_good_plan()), verb)



async def recover_first(ledger: Ledger, site: Site, adapters: Adapters, verb: str) -> list[str]:
    """Recover as ``recover_outcomes``; a recovery that could not bring the known-good back stops the verb
    with exit 12 (a promote must not start on a host whose rollback failed)."""
    recovered = await recover_outcomes(ledger, site, adapters, verb)
    refuse_if_failed(site, recovered)
    return [r.line for r in recovered]



async def refuse_after_failed_rollback(ledger: Ledger, site: Site, adapters: Adapters) -> None:
    """Exit 12 before a new promote when the last one ended in ROLLBACK_FAILED and the server still does not
    answer: trying a candidate against a known-good that is not running would judge nothing."""
    last = ledger.history(site.name, 1)
    if last and last[0].result == m.Result.ROLLBACK_FAILED.value and not await adapters.bench.healthy(site.url):
        raise RollbackFailed(f"release {last[0].id} ended in ROLLBACK FAILED and {site.url}/health still does not"
                             " answer: no promote starts on a host whose known-good unit is down",
                             hint=failed_recovery_hint(site.name))



def refuse_if_failed(site: Site, recovered: list[Recovered]) -> None:
    if any(r.failed for r in recovered):
        raise RollbackFailed("; ".join(r.line for r in recovered), hint=failed_recovery_hint(site.name))



def recover_now(site: Site, verb: str, progress: Progress | None = None) -> list[Recovered]:
    """For verbs outside this family (``status``): recover if a dead controller left work, else nothing.

    When another live process holds the lock, it is not dead: nothing to do.
    """
    if not (site.state_dir / LEDGER_FILE).exists():
        return []  # deployctl never promoted anything here (and a read-only caller must not create it)
    if not os.access(site.state_dir, os.W_OK):
        # A non-root operator can neither read the WAL ledger nor recover; status shows a leftover trial.
        return []
    with Ledger.open(site.state_dir) as ledger:
        if not ledger.unfinished(site.name):
            return []
        try:
            with locked(site, verb):
                return asyncio.run(_recover_with_adapters(ledger, site, verb, progress))
        except Busy:
            return []



def recover_held(site: Site, verb: str, progress: Progress | None = None) -> list[Recovered]:
    """``recover_now`` for a verb that already holds the deployment's lock (``restart``)."""
    if not (site.state_dir / LEDGER_FILE).exists():
        return []
    with Ledger.open(site.state_dir) as ledger:
        if not ledger.unfinished(site.name):
            return []
        return asyncio.run(_recover_with_adapters(ledger, site, verb, progress))



async def _recover_with_adapters(ledger: Ledger, site: Site, verb: str,
                                 progress: Progress | None) -> list[Recovered]:
    # Here, not at the top: the real adapters bring aiohttp and the judge (numpy, scipy), which the read-only
    # verbs that share this module (history, show, status with nothing to recover) never need
    # (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters

    async with live_adapters(site, None, progress) as adapters:
        return await recover_outcomes(ledger, site, adapters, verb)


def recover_or_check(site: Site, release_id: int | None) -> list[str]:
    """``deployctl recover``: resume every unfinished release; with ``release_id`` (the dead-man's timer), judge
    that release's controller by its lease when it still holds the lock."""
    if release_id is not None and _finished(site, release_id):
        # The switch's check after its promote ended (the disarm was lost, or the controller died after the
        # keep): nothing to guard, and no need to take the lock from whoever runs next.
        asyncio.run(stop_switch(site.endpoint, site.name))
        return [f"release {release_id} of {site.name} has finished; the dead-man's switch is stopped"]
    try:
        with locked(site, "recover"):
            said = asyncio.run(_recover(site)) or [f"{site.name}: no unfinished promote; nothing to recover"]
            if release_id is not None:  # the switch's check: nothing unfinished is left to guard
                asyncio.run(stop_switch(site.endpoint, site.name))
            return said
    except Busy:
        if release_id is None:
            raise
        return [_check_live_controller(site, release_id)]



def _finished(site: Site, release_id: int) -> bool:
    with Ledger.open(site.state_dir) as ledger:
        return all(r.id != release_id for r in ledger.unfinished(site.name))



async def _recover(site: Site) -> list[str]:
    with Ledger.open(site.state_dir) as ledger:
        if not ledger.unfinished(site.name):
            return []
        # Here, not at the top: the real adapters bring aiohttp and the judge (numpy, scipy), which `deployctl
        # --help` would pay for at start-up, and this verb only when there is something to recover (benchmarks/cli_startup.py).
        from deployctl.live.bindings import live_adapters

        async with live_adapters(site, None) as adapters:
            return await recover_first(ledger, site, adapters, "recover")



def _check_live_controller(site: Site, release_id: int) -> str:
    """The switch's check found the lock held: judge the controller by its lease, if it runs the release."""
    lock = site.lock()
    holder = lock.holder()
    with Ledger.open(site.state_dir) as ledger:
        release = next((r for r in ledger.unfinished(site.name) if r.id == release_id), None)
    if release is None:
        return f"release {release_id} of {site.name} has finished; nothing to recover"
    if holder is None or holder.pid != release.pid:
        raise Busy(f"{site.name} is locked by {holder.describe() if holder else 'someone'}, not by release"
                   f" {release_id}'s controller; nothing recovered",
                   hint=f"run `deployctl recover -d {site.name}` once it has finished")
    lease = read_lease(site.state_dir, site.name)
    verdict = judge_alive(lease if lease is not None and lease.pid == holder.pid else None, time.monotonic())
    if verdict is LeaseAction.WAIT:
        return f"{holder.describe()} is alive and making progress; nothing to do"
    assert lease is not None  # only a lease that stopped moving says TERMINATE or KILL
    idle = time.monotonic() - lease.renewed
    if verdict is LeaseAction.KILL:
        os.kill(holder.pid, signal.SIGKILL)
        return (f"{holder.describe()} made no progress for {idle:.0f} s and did not stop on SIGTERM: sent SIGKILL;"
                " the next check rolls back")
    abort_request_path(lock).write_text(f"the dead-man's switch expired: no progress for {idle:.0f} s"
                                        f" (dead_man_s {lease.stall_s:g})")
    os.kill(holder.pid, signal.SIGTERM)
    say([f"{holder.describe()} made no progress for {idle:.0f} s: sent SIGTERM, it rolls back now"])
    return f"stopped {holder.describe()}"
