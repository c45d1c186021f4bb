"""deployctl history: the releases of a deployment, newest first, from the ledger."""

from __future__ import annotations

import argparse

from deployctl.adapters.ledger import LEDGER_FILE, Ledger
from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.options import add_deployment
from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import existing_state_dir
from deployctl.decisions.report import history_lines
from deployctl.errors import DeployctlError, InputError


NAME = "history"
HELP = "list the releases (promotes, rollbacks, adoptions) recorded in the ledger"
DESCRIPTION = """\
One line per release, newest first: id, when, deployment, kind, profile, result, unit hash, who.
The live release is marked with *. `deployctl show ID` prints the whole evidence of one.

--json lists the same releases with what a script needs (id, deployment, kind, profile, result,
verdict, reasons, unit, who, times, live); --full adds the stored flags, environment, startup facts and
state of each (`deployctl show ID --json` is one release whole). A deployment neither the inventory nor
the ledger knows is an error (exit 2); one with no release yet is an empty list.

examples:
  deployctl history                 # every deployment on this host
  deployctl history glm5 -n 5       # (-n: how many, as in git log; in `status` it is journal lines, as in journalctl)
  deployctl history --json
"""
# What --json keeps of a release without --full (the ledger's large fields stay out: 141 KB for 5 releases).
SLIM = ("id", "deployment", "kind", "profile", "result", "verdict", "reasons", "unit_name", "unit_hash", "who",
        "host", "started_at", "finished_at", "phase", "previous_id", "live")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment(parser, help="only this deployment (default: every deployment)")
    parser.add_argument("-n", "--limit", type=int, default=20, help="how many releases (default 20)")
    parser.add_argument("--full", action="store_true", help="with --json: every stored field of each release")


def run(args: argparse.Namespace) -> int:
    directory = existing_state_dir(args)
    releases = []
    if (directory / LEDGER_FILE).exists():  # a read-only verb never creates the ledger
        with Ledger.open(directory) as ledger:
            releases = ledger.history(args.deployment, args.limit)
            if args.deployment and not releases:
                _known_or_fail(args, {r.deployment for r in ledger.history(None, 10_000)})
    elif args.deployment:
        _known_or_fail(args, set())
    if args.json:
        keep = None if args.full else SLIM
        emit_json([{k: v for k, v in r.to_dict().items() if k != "unit_text" and (keep is None or k in keep)}
                   for r in releases])
    else:
        emit(history_lines(releases))
    return 0


def _known_or_fail(args: argparse.Namespace, in_ledger: set[str]) -> None:
    """No release of -d NAME: fine when the inventory or the ledger knows NAME, a typo otherwise."""
    try:
        in_inventory = set(load_inventory_from_args(args).deployments)
    except DeployctlError:  # no inventory here (a laptop, a ledger copied from a host): the ledger decides
        in_inventory = set()
    if args.deployment not in in_inventory | in_ledger:
        known = ", ".join(sorted(in_inventory | in_ledger)) or "none"
        raise InputError(f"no deployment {args.deployment!r} in the inventory or the ledger (known: {known})",
                         hint="deployctl history (every deployment), or check the name")
