"""The canary's ``on_degraded: rollback``: try the release the degraded live one replaced, keep it only if
it measures better now.

Not a verb itself (no ``NAME``), so the CLI's discovery skips it. The trial is the promote runner on a
plan of the earlier release's unit (as ``deployctl rollback --to`` builds it), recorded as a release of
kind ``canary-rollback`` replacing the live one, started at INSTALL with the watch's measurement of the
degraded live release as its baseline: install as a trial (the dead-man's switch armed), restart, ready,
startup gates, benchmark at the watch's levels, judged by the same judge under the rule of
``deployctl.judge.improvement`` (better now, not merely not worse); kept, or the live release restored
and verified, as a rejected promote is.
"""

from __future__ import annotations

import os
from dataclasses import replace

from deployctl.adapters.ledger import Ledger
from deployctl.commands._release_verbs import limits, who
from deployctl.commands.rollback import text_of
from deployctl.live.bindings import live_adapters
from deployctl.live.canary import ROLLBACK_KIND, TRIED, WatchReport
from deployctl.live.protocols import Guard
from deployctl.live.runner import Runner
from deployctl.live.site import Site
from deployctl.promote import machine as m
from deployctl.promote.evidence import Evidence, PromoteOutcome
from deployctl.promote.records import Release


def watch_site(site: Site) -> Site:
    """The site with the bench levels cut to the watch's: the trial is judged against the watch only."""
    levels = site.policy.canary.levels
    if not levels:
        return site
    bench = site.policy.bench.model_copy(update={"concurrency": list(levels)})
    return replace(site, policy=site.policy.model_copy(update={"bench": bench}))


async def try_earlier(site: Site, report: WatchReport, target: Release, guard: Guard | None) -> PromoteOutcome:
    """Judge ``target`` against the degraded live release just measured in ``report``; keep it if better now."""
    assert report.result is not None  # decide_rollback attempts only with a measurement
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
            # Kept only when proven better: an inconclusive judge keeps the live release, whatever the policy says.
            start = replace(limits(site.policy, preflight=False), keep_when_inconclusive=False)
            return await runner.run(m.start(start, unchanged=plan.unchanged, measured=True))
