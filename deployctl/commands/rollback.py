"""deployctl rollback: put an earlier release back (by default the one the live release replaced)."""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass

from deployctl.adapters.ledger import Ledger
from deployctl.console.in_unit import add_in_unit_argument, dead_man, run_in_unit
from deployctl.console.release_verbs import (
    add_site_arguments,
    adopt_installed,
    locked,
    recover_outcomes,
    refuse_if_failed,
    say,
    site_from_args,
    who,
)
from deployctl.console.output import TerminalProgress, emit, emit_json
from deployctl.errors import InputError
from deployctl.live.protocols import Guard
from deployctl.operations.site import Site
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import PromoteOutcome
from deployctl.decisions.records import Release
from deployctl.units.stamp import unit_hash
from deployctl.decisions.report import outcome_json, outcome_lines

NAME = "rollback"
HELP = "put an earlier release back (default: the one the live release replaced)"
DESCRIPTION = """\
Reinstall an earlier release's unit (as a trial first), restart it, wait until it is ready (log line or
/health), then persist it. No baseline, gates or judge: a rollback is about getting back, fast. If the release asked for does not
come up, the unit that was live is restored (exit 10). A promote left unfinished by a dead controller
is recovered first: if that recovery rolled it back, nothing more is done (exit 0); if it finished keeping
the candidate (its verdict was PASS), the rollback asked for then puts back what it replaced; if it
could not bring the known-good unit back, exit 12.

With a target (--to or --to-unit-hash) it is idempotent: when that unit is what runs already, it changes
nothing and says so (exit 0), so a fleet tool can undo each host by its recorded unit as often as it
likes and the host ends on that unit. Without one, each call goes one release further back.

examples:
  deployctl rollback -d glm5            # back to what the live release replaced
  deployctl rollback glm5               # the same (the positional alias of -d)
  deployctl rollback -d glm5 --to 12    # back to release 12 (see `deployctl history -d glm5`)
  deployctl rollback -d glm5 --to-unit-hash 3f9c2a41b0d7   # back to the unit of that hash (`status` shows it)
"""

# A hash prefix this long is unique enough among one deployment's releases, and still short to type.
MIN_HASH_PREFIX = 12


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--to", metavar="RELEASE", type=int, default=None, help="the release id to put back")
    target.add_argument("--to-unit-hash", metavar="SHA256", default=None,
                        help=f"the release whose unit has this sha256 (or its first {MIN_HASH_PREFIX}+ hex digits; "
                             "`status --json` shows unit_hash): what a fleet tool recorded before its rollout")
    add_site_arguments(parser)
    add_in_unit_argument(parser)


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    if args.in_unit:
        return run_in_unit(args, NAME, site)
    target = Target(args.to, _hash_prefix(args.to_unit_hash))
    with locked(site, NAME):
        result = asyncio.run(_rollback(site, target, dead_man(args, site)))
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


@dataclass(frozen=True)
class Target:
    """What to put back: a release id, a unit hash (prefix), or neither (the release the live one replaced)."""

    release: int | None = None
    unit_hash: str | None = None

    @property
    def given(self) -> bool:
        return self.release is not None or self.unit_hash is not None


def _hash_prefix(text: str | None) -> str | None:
    if text is None:
        return None
    digest = text.strip().lower().removeprefix("sha256:")
    if len(digest) < MIN_HASH_PREFIX or len(digest) > 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InputError(f"--to-unit-hash {text!r}: not a sha256 (64 hex digits, or at least the first {MIN_HASH_PREFIX})",
                         hint="copy unit_hash from `deployctl status -d DEPLOYMENT --json`")
    return digest


async def _rollback(site: Site, to: Target, guard: Guard | None = None) -> PromoteOutcome | list[str]:
    # Here, not at the top: the real adapters and the runner bring aiohttp and the judge (numpy, scipy), which
    # `deployctl --help` and the verbs that import ``text_of`` would pay for at start-up (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters
    from deployctl.live.runner import Runner

    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, None, TerminalProgress(), guard=guard) as adapters:
            recovered = await recover_outcomes(ledger, site, adapters, NAME)
            say([r.line for r in recovered])
            refuse_if_failed(site, recovered)
            if not to.given and any(r.rolled_back for r in recovered):
                return ["the unfinished promote was rolled back to the known-good unit; nothing more to do"]
            live_id = adopt_installed(ledger, site)
            if live_id is None:
                raise InputError(f"{site.unit} is not installed: nothing to roll back")
            live = ledger.get(live_id)
            target = _target(ledger, site, live, to)
            if target.unit_hash == live.unit_hash:
                return [f"release {target.id} ({target.profile or 'unnamed'}, unit {target.unit_hash[:12]}) is what"
                        f" runs already (release {live.id}): nothing to do"]
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


def _target(ledger: Ledger, site: Site, live: Release, to: Target) -> Release:
    if to.release is not None:
        target = ledger.get(to.release)
        if target.deployment != site.name:
            raise InputError(f"release {to.release} belongs to {target.deployment}, not {site.name}")
        return target
    if to.unit_hash is not None:
        return _release_by_hash(ledger, site, live, to.unit_hash)
    if live.previous_id is None:
        raise InputError(f"release {live.id} is live and replaced nothing deployctl recorded",
                         hint=f"pick one with --to (see `deployctl history -d {site.name}`)")
    return ledger.get(live.previous_id)


def _release_by_hash(ledger: Ledger, site: Site, live: Release, prefix: str) -> Release:
    """The release of the unit with this hash (prefix); the live one first, so a repeated undo is a no-op."""
    if live.unit_hash.startswith(prefix):
        return live
    every = ledger.history(site.name, limit=-1)  # SQLite: no limit
    hashes = {r.unit_hash for r in every if r.unit_hash.startswith(prefix)}
    if not hashes:
        raise InputError(f"no release of {site.name} has a unit with hash {prefix[:12]}…: deployctl never installed"
                         " or adopted it here", hint=f"see `deployctl history -d {site.name}`, or use --to RELEASE")
    if len(hashes) > 1:
        raise InputError(f"the hash prefix {prefix} matches {len(hashes)} units of {site.name}",
                         hint="give more digits, or the whole sha256")
    found = ledger.release_with_hash(site.name, hashes.pop())
    assert found is not None
    return found


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
