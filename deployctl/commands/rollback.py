"""deployctl rollback: put an earlier release back (by default the one the live release replaced)."""

from __future__ import annotations

import argparse
import asyncio
import os

from deployctl.adapters.ledger import Ledger
from deployctl.commands._operation import add_in_unit_argument, dead_man, run_in_unit
from deployctl.commands._release_verbs import (
    add_site_arguments,
    adopt_installed,
    locked,
    recover_outcomes,
    refuse_if_failed,
    say,
    site_from_args,
    who,
)
from deployctl.commands.output import TerminalProgress, emit, emit_json
from deployctl.errors import InputError
from deployctl.live.bindings import live_adapters
from deployctl.live.protocols import Guard
from deployctl.live.runner import Runner
from deployctl.live.site import Site
from deployctl.promote import machine as m
from deployctl.promote.evidence import PromoteOutcome
from deployctl.promote.records import Release
from deployctl.units.stamp import unit_hash
from deployctl.promote.report import outcome_json, outcome_lines

NAME = "rollback"
HELP = "put an earlier release back (default: the one the live release replaced)"
DESCRIPTION = """\
Reinstall an earlier release's unit (as a trial first), restart it, wait until it is ready (log line or
/health), then persist it. No baseline, gates or judge: a rollback is about getting back, fast. If the release asked for does not
come up, the unit that was live is restored (exit 10). A promote left unfinished by a dead controller
is recovered first: if that recovery rolled it back, nothing more is done (exit 0); if it finished keeping
the candidate (its verdict was PASS), the rollback asked for then puts back what it replaced; if it
could not bring the known-good unit back, exit 12.

examples:
  deployctl rollback -d glm5            # back to what the live release replaced
  deployctl rollback glm5               # the same (the positional alias of -d)
  deployctl rollback -d glm5 --to 12    # back to release 12 (see `deployctl history -d glm5`)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", metavar="RELEASE", type=int, default=None, help="the release id to put back")
    add_site_arguments(parser)
    add_in_unit_argument(parser)


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    if args.in_unit:
        return run_in_unit(args, NAME, site)
    with locked(site, NAME):
        result = asyncio.run(_rollback(site, args.to, dead_man(args, site)))
    if isinstance(result, list):
        if args.json:
            emit_json({"result": "nothing", "said": result})
        else:
            emit(result)
        return 0
    if args.json:
        emit_json(outcome_json(result))
    else:
        emit(outcome_lines(result, heading=f"rollback {site.name} to {result.plan.profile}"))
    return result.exit_code


async def _rollback(site: Site, to: int | None, guard: Guard | None = None) -> PromoteOutcome | list[str]:
    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, None, TerminalProgress(), guard=guard) as adapters:
            recovered = await recover_outcomes(ledger, site, adapters, NAME)
            say([r.line for r in recovered])
            refuse_if_failed(site, recovered)
            if to is None and any(r.rolled_back for r in recovered):
                return ["the unfinished promote was rolled back to the known-good unit; nothing more to do"]
            live_id = adopt_installed(ledger, site)
            if live_id is None:
                raise InputError(f"{site.unit} is not installed: nothing to roll back")
            live = ledger.get(live_id)
            target = _target(ledger, site, live, to)
            if target.unit_hash == live.unit_hash:
                return [f"release {target.id} is what runs already (release {live.id}): nothing to do"]
            known = site.unit_files().known_good(site.unit)
            assert known is not None
            plan = site.plan_for(f"release {target.id} ({target.profile or 'unnamed'})", text_of(site, target),
                                 known.text, candidate_hash=target.unit_hash)
            release_id = ledger.begin_release(
                deployment=site.name, kind="rollback", profile=target.profile, unit_name=site.unit,
                unit_text=plan.candidate_text, unit_hash=plan.candidate_hash, who=who(), host=site.host,
                pid=os.getpid(), previous_id=live_id,
            )
            runner = Runner(ledger, adapters, plan, release_id, previous_release_id=live_id)
            return await runner.run(m.start(m.Limits(evaluate=False), unchanged=plan.unchanged))


def _target(ledger: Ledger, site: Site, live: Release, to: int | None) -> Release:
    if to is not None:
        target = ledger.get(to)
        if target.deployment != site.name:
            raise InputError(f"release {to} belongs to {target.deployment}, not {site.name}")
        return target
    if live.previous_id is None:
        raise InputError(f"release {live.id} is live and replaced nothing deployctl recorded",
                         hint=f"pick one with --to (see `deployctl history -d {site.name}`)")
    return ledger.get(live.previous_id)


def text_of(site: Site, release: Release) -> str:
    """The release's unit text; a redacted one is re-rendered from the inventory if that gives the same hash."""
    if not release.redacted:
        return release.unit_text
    for text in (_rendered(site, release.profile), site.unit_files().previous(site.unit)):
        if text and unit_hash(text) == release.unit_hash:
            return text
    raise InputError(
        f"release {release.id}'s unit held secrets, so the ledger keeps it redacted, and neither the inventory's"
        f" {release.profile!r} profile nor the unit backup renders the same unit any more",
        hint="move secrets to the deployment's environment_file, or reinstall that configuration with `deployctl promote`",
    )


def _rendered(site: Site, profile: str | None) -> str | None:
    if not profile or profile not in site.deployment.profiles:
        return None
    return site.render(profile).text
