"""deployctl attach: follow a promote or rollback running (or finished) in its unit on this host."""

from __future__ import annotations

import argparse
import asyncio

from deployctl.console.in_unit import add_abort_on_interrupt_argument
from deployctl.console.release_verbs import add_site_arguments, state_dir
from deployctl.errors import UsageError
from deployctl.operations.operation import attach
from deployctl.operations.restart import Endpoint


NAME = "attach"
HELP = "follow a promote or rollback started with --in-unit (or over -H) again, and get its exit code"
DESCRIPTION = """\
Print the log of DEPLOYMENT's operation that runs in a transient unit (`promote --in-unit`, or any
promote over `deployctl -H`) from its first line, follow it while it runs, and exit with its exit code.
Without --id: the one running, else the newest one not refused as busy (another caller's refused
`rollback` does not hide your promote).
Ctrl-C asks: detach again (exit 30) or abort (roll back, followed to its end); without a terminal
it detaches, or aborts with --abort-on-interrupt. An operation whose process was killed ends with exit 31: the ledger
(`deployctl history`) says how it was recovered.

examples:
  deployctl attach -d glm5
  deployctl -H gpu-node-3 attach glm5
  deployctl attach glm5 --id 20261202T010203-promote
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser, help="the deployment whose operation to follow")
    add_abort_on_interrupt_argument(parser)
    parser.add_argument("--abort", action="store_true",
                        help="abort the running operation now (it rolls back) and follow it from here to its end")
    parser.add_argument("--id", metavar="ID", default=None, dest="operation",
                        help="the operation to follow (its id, as the launch printed it, or a prefix); default: the"
                             " one running, else the newest that was not refused as busy")


def run(args: argparse.Namespace) -> int:
    if not args.deployment:
        raise UsageError("which deployment's operation?", hint="deployctl attach -d DEPLOYMENT")
    return asyncio.run(attach(Endpoint.from_env(), state_dir(args), args.deployment, args.operation,
                              abort_on_interrupt=args.abort_on_interrupt, abort_now=args.abort))
