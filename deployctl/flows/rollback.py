"""The rollback flow, in one place: which earlier release goes back (``--to`` RELEASE, ``--to-unit-hash``, or the
one the live release replaced), its unit text (re-rendered when the ledger keeps it redacted), and the promote
runner with nothing to judge (``Limits(evaluate=False)``): install, restart, verify. The ``rollback`` verb
parses and prints; the canary's rollback trial builds its plan with ``text_of``."""

from __future__ import annotations

import os
from dataclasses import dataclass

from deployctl.adapters.ledger import Ledger
from deployctl.console.output import TerminalProgress
from deployctl.console.release_verbs import adopt_installed, say, who
from deployctl.flows.recover import recover_outcomes, refuse_if_failed
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import PromoteOutcome
from deployctl.decisions.records import Release
from deployctl.errors import InputError
from deployctl.live.protocols import Guard
from deployctl.operations.site import Site
from deployctl.units.stamp import unit_hash


# A hash prefix this long is unique enough among one deployment's releases, and still short to type.
MIN_HASH_PREFIX = 12


@dataclass(frozen=True)
class Target:
    """What to put back: a release id, a unit hash (prefix), or neither (the release the live one replaced)."""

    release: int | None = None
    unit_hash: str | None = None

    @property
    def given(self) -> bool:
        return self.release is not None or self.unit_hash is not None


def hash_prefix(text: str | None) -> str | None:
    if text is None:
        return None
    digest = text.strip().lower().removeprefix("sha256:")
    if len(digest) < MIN_HASH_PREFIX or len(digest) > 64 or any(c not in "0123456789abcdef" for c in digest):
        raise InputError(f"--to-unit-hash {text!r}: not a sha256 (64 hex digits, or at least the first {MIN_HASH_PREFIX})",
                         hint="copy unit_hash from `deployctl status -d DEPLOYMENT --json`")
    return digest


async def rollback(site: Site, to: Target, guard: Guard | None = None) -> PromoteOutcome | list[str]:
    """Put ``to`` back under a held lock, after recovering what a dead controller left; the lines to say instead
    when there is nothing to do."""
    # Here, not at the top: the real adapters and the runner bring aiohttp and the judge (numpy, scipy), which
    # `deployctl --help` and the verbs that import ``text_of`` would pay for at start-up (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters
    from deployctl.live.runner import Runner

    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, None, TerminalProgress(), guard=guard) as adapters:
            recovered = await recover_outcomes(ledger, site, adapters, "rollback")
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
