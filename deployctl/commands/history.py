"""deployctl history: the releases of a deployment, newest first, from the ledger."""

from __future__ import annotations

import argparse

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.commands._release_verbs import existing_state_dir
from deployctl.commands.options import add_deployment
from deployctl.commands.output import emit, emit_json
from deployctl.promote.report import history_lines

NAME = "history"
HELP = "list the releases (promotes, rollbacks, adoptions) recorded in the ledger"
DESCRIPTION = """\
One line per release, newest first: id, when, deployment, kind, profile, result, unit hash, who.
The live release is marked with *. `deployctl show ID` prints the whole evidence of one.

examples:
  deployctl history                 # every deployment on this host
  deployctl history -d glm5 -n 5
  deployctl history --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment(parser, help="only this deployment (default: every deployment)")
    parser.add_argument("-n", "--limit", type=int, default=20, help="how many releases (default 20)")


def run(args: argparse.Namespace) -> int:
    directory = existing_state_dir(args)
    releases = []
    if (directory / LEDGER_FILE).exists():  # a read-only verb never creates the ledger
        with Ledger.open(directory) as ledger:
            releases = ledger.history(args.deployment, args.limit)
    if args.json:
        emit_json([{k: v for k, v in r.to_dict().items() if k != "unit_text"} for r in releases])
    else:
        emit(history_lines(releases))
    return 0
