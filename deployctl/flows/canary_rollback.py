"""The canary's ``on_degraded: rollback``: try the release the degraded live one replaced, keep it only if
it measures better now.

The trial is the promote runner on a plan of the earlier release's unit (as ``deployctl rollback --to`` builds
it), recorded as a release of kind ``canary-rollback`` replacing the live one, started at INSTALL with the
watch's measurement of the degraded live release as its baseline: install as a trial (the dead-man's switch
armed), restart, ready, startup gates, benchmark at the watch's levels, judged by the same judge under the
rule of ``deployctl.judge.improvement`` (better now, not merely not worse); kept, or the live release restored
and verified, as a rejected promote is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.release_verbs import limits, who
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import Evidence, PromoteOutcome
from deployctl.decisions.records import Release
from deployctl.errors import ExitCode
from deployctl.flows.abort import abort_on_signals
from deployctl.flows.canary_watch import ROLLBACK_KIND, TRIED, WatchReport
from deployctl.flows.rollback import text_of
from deployctl.live.protocols import Guard
from deployctl.operations.site import Site


def watch_site(site: Site) -> Site:
    """The site with the bench levels cut to the watch's: the trial is judged against the watch only."""
    levels = site.policy.canary.levels
    if not levels:
        return site
    bench = site.policy.bench.model_copy(update={"concurrency": list(levels)})
    return replace(site, policy=site.policy.model_copy(update={"bench": bench}))


async def try_earlier(site: Site, report: WatchReport, target: Release, lock: DeploymentLock,
                      guard: Guard | None) -> PromoteOutcome:
    """Judge ``target`` against the degraded live release just measured in ``report``; keep it if better now."""
    assert report.result is not None  # decide_rollback attempts only with a measurement
    # Here, not at the top: the real adapters and the runner bring aiohttp and the judge (numpy, scipy), which
    # `deployctl --help` would pay for through the canary verb (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters
    from deployctl.live.runner import Runner

    live = report.release
    site = watch_site(site)
    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, None, preflight=False, guard=guard, improvement=True) as adapters:
            known = site.unit_files().known_good(site.unit)
            assert known is not None  # the watch found the live release installed
            plan = site.plan_for(f"release {target.id} ({target.profile or 'unnamed'})", text_of(site, target),
                                 known.text, candidate_hash=target.unit_hash)
            release_id = ledger.begin_release(
                deployment=site.name, kind=ROLLBACK_KIND, profile=target.profile, unit_name=site.unit,
                unit_text=plan.candidate_text, unit_hash=plan.candidate_hash, who=who(), host=site.host,
                pid=os.getpid(), previous_id=live.id,
            )
            ledger.record(release_id, "canary", "note", TRIED, {
                "sglang_version": report.version, "degraded_release": live.id, "earlier_release": target.id,
                "reason": f"release {live.id} is degraded; trying release {target.id}, kept only if better now"})
            evidence = Evidence(baseline=report.result, baseline_startup=await adapters.startup.live_report(site.unit))
            runner = Runner(ledger, adapters, plan, release_id, previous_release_id=live.id, evidence=evidence)
            abort_on_signals(runner, lock, "rollback trial")
            # Kept only when proven better: an inconclusive judge keeps the live release, whatever the policy says.
            start = replace(limits(site.policy, preflight=False), keep_when_inconclusive=False)
            return await runner.run(m.start(start, unchanged=plan.unchanged, measured=True))


@dataclass(frozen=True)
class RollbackTry:
    """A degraded release's trial of the release before it, for the journal and the webhook."""

    degraded_release: int
    earlier_release: int
    trial_release: int  # the canary-rollback release in the ledger: live now if kept
    result: str  # the trial's result: kept, rejected, inconclusive, rollback_failed, aborted

    def journal_fields(self) -> dict[str, str]:
        return {"DEPLOYCTL_ROLLBACK_TO": str(self.earlier_release), "DEPLOYCTL_ROLLBACK_RESULT": self.result,
                "DEPLOYCTL_ROLLBACK_RELEASE": str(self.trial_release)}


def concluded(name: str, live_id: int, target: Release, outcome: PromoteOutcome) -> tuple[RollbackTry, int | None, list[str]]:
    """The trial in the run's words and exit code: 22 rolled back, 12 the degraded release did not come
    back, 130 interrupted; None keeps the watch's 20 ("degraded, no better release")."""
    result = outcome.state.result
    tried = RollbackTry(live_id, target.id, outcome.release_id, result.value if result else "unknown")
    earlier = f"release {target.id} ({target.profile or 'unnamed'})"
    code: int | None = None
    if result is m.Result.KEPT:
        code = ExitCode.CANARY_ROLLED_BACK
        judged = outcome.evidence.judge.reasons[0] if outcome.evidence.judge else ""
        head = f"{name}: rolled back to {earlier}: it measures better now (release {outcome.release_id} is live): {judged}"
    elif result is m.Result.ROLLBACK_FAILED:
        code = ExitCode.ROLLBACK_FAILED
        head = (f"{name}: trying {earlier} failed and the degraded release {live_id} did not come back: manual "
                f"action needed (release {outcome.release_id})")
    elif result is m.Result.ABORTED:
        code = ExitCode.INTERRUPTED
        head = f"{name}: the trial of {earlier} was interrupted; the degraded release {live_id} is back"
    else:
        head = (f"{name}: degraded, no better release: {earlier} was {tried.result} (release {outcome.release_id});"
                f" the degraded release {live_id} is back and stays live")
    return tried, code, [head, *(f"  {r}" for r in outcome.state.reasons)]
