"""deployctl recover: finish or roll back a promote whose controller died; what the dead-man's switch runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time

from deployctl.adapters.ledger import Ledger, LedgerError
from deployctl.commands._release_verbs import add_site_arguments, locked, recover_first, say, site_from_args
from deployctl.commands.output import emit, emit_json
from deployctl.commands.promote import abort_request_path
from deployctl.errors import Busy
from deployctl.live.dead_man import read_lease, record_action, stop_switch
from deployctl.live.site import Site
from deployctl.promote.dead_man import FOUND_GONE, Verdict, judge_alive, stop_said
from deployctl.promote.records import Release

NAME = "recover"
HELP = "roll back (or finish keeping) a promote whose controller died; the dead-man's switch runs it"
DESCRIPTION = """\
Resume every unfinished release of DEPLOYMENT: nothing to do if no change had been made, finish a keep
that was under way, otherwise restore the known-good unit and verify it. The ledger records that
`deployctl recover` did it. A live controller holds the lock: recover exits 4, unless --release names
the release that controller runs (the dead-man's timer does): then it checks the controller's lease, and
one with no progress for the policy's dead_man_s gets SIGTERM (it rolls back itself), SIGKILL after twice
that. What the switch did, and why, is a "dead-man" step of the release in the ledger, and the reason of
the recovery that follows says it (`deployctl show`, `deployctl status`).

A promote arms a repeating transient timer (deployctl-deadman-DEPLOYMENT.timer) that runs this verb with
--release every dead_man_check_s seconds until the promote keeps or rolls back: a dead controller's
candidate is rolled back at the next check.

examples:
  deployctl recover -d glm5
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser)
    parser.add_argument("--release", metavar="ID", type=int, default=None,
                        help="the release the switch guards: if its controller is alive but stuck, stop it")


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    if args.release is not None and _finished(site, args.release):
        # The switch's check after its promote ended (the disarm was lost, or the controller died after the
        # keep): nothing to guard, and no need to take the lock from whoever runs next.
        asyncio.run(stop_switch(site.endpoint, site.name))
        said = [f"release {args.release} of {site.name} has finished; the dead-man's switch is stopped"]
    else:
        said = _recover_or_check(site, args.release)
    if args.json:
        emit_json({"said": said})
    else:
        emit(said)
    return 0


def _recover_or_check(site: Site, release_id: int | None) -> list[str]:
    try:
        with locked(site, NAME):
            said = asyncio.run(_recover(site, release_id)) or \
                [f"{site.name}: no unfinished promote; nothing to recover"]
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


async def _recover(site: Site, guarded: int | None) -> list[str]:
    """Recover what is unfinished; ``guarded``: the release the dead-man's switch checks, whose controller is
    gone since the lock was free (its ledger says the switch found it so)."""
    with Ledger.open(site.state_dir) as ledger:
        unfinished = ledger.unfinished(site.name)
        if not unfinished:
            return []
        for release in unfinished:
            if release.id == guarded:
                record_action(ledger, release, FOUND_GONE, None)
        # Here, not at the top: the real adapters bring aiohttp and the judge (numpy, scipy), which `deployctl
        # --help` would pay for at start-up, and this verb only when there is something to recover (benchmarks/cli_startup.py).
        from deployctl.live.bindings import live_adapters

        async with live_adapters(site, None) as adapters:
            return await recover_first(ledger, site, adapters, NAME)


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
    if verdict is Verdict.WAIT:
        return f"{holder.describe()} is alive and making progress; nothing to do"
    assert lease is not None  # only a lease that stopped moving says TERMINATE or KILL
    idle = time.monotonic() - lease.renewed
    if verdict is Verdict.KILL:
        os.kill(holder.pid, signal.SIGKILL)
        _record(site, release, stop_said(verdict, idle, lease.stall_s), "SIGKILL")
        return (f"{holder.describe()} made no progress for {idle:.0f} s and did not stop on SIGTERM: sent SIGKILL;"
                " the next check rolls back")
    abort_request_path(lock).write_text(f"the dead-man's switch expired: no progress for {idle:.0f} s"
                                        f" (dead_man_s {lease.stall_s:g})")
    os.kill(holder.pid, signal.SIGTERM)
    _record(site, release, stop_said(verdict, idle, lease.stall_s), "SIGTERM")
    say([f"{holder.describe()} made no progress for {idle:.0f} s: sent SIGTERM, it rolls back now"])
    return f"stopped {holder.describe()}"


def _record(site: Site, release: Release, said: str, sent: str) -> None:
    """The signal is sent first: a ledger that cannot be written must not keep a stuck controller alive."""
    try:
        with Ledger.open(site.state_dir) as ledger:
            record_action(ledger, release, said, sent)
    except LedgerError as exc:
        say([f"could not record in the ledger that the dead-man's switch sent {sent}: {exc.message}"])
