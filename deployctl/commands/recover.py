"""deployctl recover: finish or roll back a promote whose controller died; what the dead-man's switch runs."""

from __future__ import annotations

import argparse

from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import add_site_arguments, site_from_args
from deployctl.flows.recover import recover_or_check


NAME = "recover"
HELP = "roll back (or finish keeping) a promote whose controller died; the dead-man's switch runs it"
DESCRIPTION = """\
Resume every unfinished release of DEPLOYMENT: nothing to do if no change had been made, finish a keep
that was under way, otherwise restore the known-good unit and verify it. The ledger records that
`deployctl recover` did it. A live controller holds the lock: recover exits 4, unless --release names
the release that controller runs (the dead-man's timer does): then it checks the controller's lease, and
one with no progress for the policy's dead_man_s gets SIGTERM (it rolls back itself), SIGKILL after twice
that.

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
    said = recover_or_check(site_from_args(args), args.release)
    if args.json:
        emit_json({"said": said})
    else:
        emit(said)
    return 0
