"""deployctl attach: follow a promote or rollback running (or finished) in its unit on this host."""

from __future__ import annotations

import argparse
import asyncio

from deployctl.commands._release_verbs import add_site_arguments, state_dir
from deployctl.errors import UsageError
from deployctl.live.operation import attach
from deployctl.live.restart import Endpoint

NAME = "attach"
HELP = "follow a promote or rollback started with --in-unit (or over -H) again, and get its exit code"
DESCRIPTION = """\
Print the log of DEPLOYMENT's last operation that ran in a transient unit (`promote --in-unit`, or any
promote over `deployctl -H`) from its first line, follow it while it runs, and exit with its exit code.
Ctrl-C detaches again (exit 30). An operation whose process was killed ends with exit 31: the ledger
(`deployctl history`) says how it was recovered.

examples:
  deployctl attach -d glm5
  deployctl -H gpu-node-3 attach glm5
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_site_arguments(parser, help="the deployment whose operation to follow")


def run(args: argparse.Namespace) -> int:
    if not args.deployment:
        raise UsageError("which deployment's operation?", hint="deployctl attach -d DEPLOYMENT")
    return asyncio.run(attach(Endpoint.from_env(), state_dir(args), args.deployment))
