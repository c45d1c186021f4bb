"""deployctl rollback: put an earlier release back (by default the one the live release replaced)."""

from __future__ import annotations

import argparse
import asyncio

from deployctl.console.in_unit import add_in_unit_argument, dead_man, run_in_unit
from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import add_site_arguments, locked, site_from_args
from deployctl.decisions.report import outcome_json, outcome_lines
from deployctl.flows.rollback import MIN_HASH_PREFIX, Target, hash_prefix, rollback


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
    target = Target(args.to, hash_prefix(args.to_unit_hash))
    with locked(site, NAME):
        result = asyncio.run(rollback(site, target, dead_man(args, site)))
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
