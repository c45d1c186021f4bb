"""What the long verbs (promote, rollback) share to run in a transient unit with a dead-man's switch."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
from pathlib import Path

from deployctl.adapters.lock import is_alive
from deployctl.console.inventory_args import inventory_path
from deployctl.console.remote import ORIGIN_ENV
from deployctl.console.upload import lasting_copy, owned
from deployctl.decisions.dead_man import MARGIN_S, check_s, stall_s
from deployctl.errors import Busy
from deployctl.operations.dead_man import DeadMan
from deployctl.operations.operation import OperationRecord, follow, launch, new_operation_id, worker_service
from deployctl.operations.site import Site


IN_UNIT = "--in-unit"
ABORT_ON_INTERRUPT = "--abort-on-interrupt"


def add_in_unit_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(IN_UNIT, action="store_true", dest="in_unit",
                        help="run on the host inside a transient systemd unit that outlives this terminal and"
                             " follow it (Ctrl-C: detach or abort; `deployctl attach` follows it again)")
    add_abort_on_interrupt_argument(parser)


def add_abort_on_interrupt_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(ABORT_ON_INTERRUPT, action="store_true", dest="abort_on_interrupt",
                        help="while following an operation in its unit (--in-unit, -H, attach) without a terminal,"
                             " Ctrl-C aborts it (rolls back) and follows the rollback, instead of detaching (exit 30)")


def _absolute(args: argparse.Namespace, argv: list[str], site: Site) -> list[str]:
    """The verb's own arguments, with the inventory and state directory made absolute for the unit."""
    kept = [a for a in argv if a not in (IN_UNIT, ABORT_ON_INTERRUPT)]  # the follower's, not the worker's
    return [*kept, "-i", str(Path(inventory_path(args)).resolve()), "--state-dir", str(site.state_dir.resolve())]


def run_in_unit(args: argparse.Namespace, verb: str, site: Site) -> int:
    """Start ``deployctl VERB …`` as ``deployctl-VERB-DEPLOYMENT.service``; follow it; its exit code."""
    argv = _absolute(args, list(getattr(args, "_argv", sys.argv[1:])), site)
    stop_timeout = site.policy.gates.startup_timeout_s + MARGIN_S  # SIGTERM rolls back: let the restart finish
    upload = owned(args)
    op_id = new_operation_id(verb)
    service = worker_service(verb, site.name, argv, os.environ, os.getcwd(), stop_timeout,
                             OperationRecord.result_path(site.state_dir, site.name, op_id),
                             remove_after=str(upload.directory) if upload else None)
    holder = site.lock().holder()
    if holder is not None and is_alive(holder):  # refused here, before a unit (and its record) exists
        raise Busy(f"{site.name} is busy: {holder.describe()} holds its lock",
                   hint=f"wait for it, or `deployctl attach {site.name}` to follow it")

    async def go() -> int:
        record = await launch(site.endpoint, site.state_dir, verb, site.name, service, op_id)
        if upload:
            upload.hand_over()  # the unit removes it when it stops; until it started, this process did
        print(f"{verb} runs in {record.unit} as operation {record.id} (Ctrl-C: detach or abort;"
              f" `deployctl attach {site.name}` follows it again)", file=sys.stderr)
        return await follow(site.endpoint, record, abort_on_interrupt=args.abort_on_interrupt)

    return asyncio.run(go())


def dead_man(args: argparse.Namespace, site: Site) -> DeadMan:
    """The switch for this deployment: on expiry, ``deployctl recover`` with the same inventory and state."""
    recover = [sys.executable, "-m", "deployctl", "recover", "-d", site.name,
               "-i", lasting_copy(args, site.state_dir, site.name), "--state-dir", str(site.state_dir.resolve())]
    return DeadMan(site.endpoint, site.name, recover, os.environ, os.getcwd(), site.state_dir,
                   check_s=check_s(site.policy), stall_s=stall_s(site.policy))


def inventory_note(args: argparse.Namespace) -> str:
    """What the ledger says about the inventory a promote used: its sha256 and where it came from."""
    path = Path(inventory_path(args)).resolve()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    came_from = os.environ.get(ORIGIN_ENV)  # set on the host by `deployctl -H` from the laptop
    return f"inventory sha256:{digest} " + (f"from {came_from}" if came_from else f"at {path}")
