"""deployctl recover: finish or roll back a promote whose controller died; what the dead-man's switch runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal

from deployctl.adapters.ledger import Ledger
from deployctl.commands._release_verbs import add_site_arguments, locked, recover_first, say, site_from_args
from deployctl.commands.output import emit, emit_json
from deployctl.commands.promote import abort_request_path
from deployctl.errors import Busy
from deployctl.live.bindings import live_adapters
from deployctl.live.site import Site

NAME = "recover"
HELP = "roll back (or finish keeping) a promote whose controller died; the dead-man's switch runs it"
DESCRIPTION = """\
Resume every unfinished release of DEPLOYMENT: nothing to do if no change had been made, finish a keep
that was under way, otherwise restore the known-good unit and verify it. The ledger records that
`deployctl recover` did it. A live controller holds the lock: recover exits 4, unless --release names
the release that controller runs (the dead-man's timer does): it is past its bound and gets SIGTERM,
which makes it roll back itself.

A promote arms a transient timer (deployctl-deadman-DEPLOYMENT.timer) that runs this verb when the
controller neither keeps nor rolls back within the policy's dead_man_s.

examples:
  deployctl recover -d glm5
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser)
    parser.add_argument("--release", metavar="ID", type=int, default=None,
                        help="the release the switch guards: if its controller is alive, SIGTERM it (roll back)")


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    try:
        with locked(site, NAME):
            said = asyncio.run(_recover(site)) or [f"{site.name}: no unfinished promote; nothing to recover"]
    except Busy:
        if args.release is None:
            raise
        said = [_stop_live_controller(site, args.release)]
    if args.json:
        emit_json({"said": said})
    else:
        emit(said)
    return 0


async def _recover(site: Site) -> list[str]:
    with Ledger.open(site.state_dir) as ledger:
        if not ledger.unfinished(site.name):
            return []
        async with live_adapters(site, None) as adapters:
            return await recover_first(ledger, site, adapters, NAME)


def _stop_live_controller(site: Site, release_id: int) -> str:
    """The switch expired on a controller that is alive: stop it, if it still runs the release guarded."""
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
    abort_request_path(lock).write_text("the dead-man's switch expired: no keep or rollback in time")
    os.kill(holder.pid, signal.SIGTERM)
    say([f"{holder.describe()} is alive past the dead-man's bound: sent SIGTERM, it rolls back now"])
    return f"stopped {holder.describe()}"
