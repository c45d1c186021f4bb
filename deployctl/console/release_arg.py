"""How `show` and `report` name a release: its id (`show 12`), or -d DEPLOYMENT for that deployment's
newest (`show -d glm5`), or both (`report -d glm5 12`: the id, checked against the deployment)."""

from __future__ import annotations

import argparse

from deployctl.adapters.ledger import Ledger
from deployctl.console.options import complete_deployments, complete_releases
from deployctl.decisions.records import Release
from deployctl.errors import InputError, UsageError


def add_release_arguments(parser: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, *,
                          deployment_parser: argparse.ArgumentParser) -> None:
    parser.add_argument("release", metavar="RELEASE", type=int, nargs="?",
                        help="a release id from `deployctl history` (default with -d: its newest)"
                        ).completer = complete_releases  # type: ignore[attr-defined]
    deployment_parser.add_argument("-d", "--deployment", metavar="DEPLOYMENT", default=None,
                                   help="that deployment's newest release; with RELEASE, a check that it is of it"
                                   ).completer = complete_deployments  # type: ignore[attr-defined]


def named_release(args: argparse.Namespace, ledger: Ledger) -> Release:
    if args.release is None and args.deployment is None:
        raise UsageError("no release named", hint="a release id from `deployctl history`, or -d DEPLOYMENT for its newest")
    if args.release is None:
        newest = ledger.history(args.deployment, 1)
        if not newest:
            raise InputError(f"no release of deployment {args.deployment!r} in the ledger {ledger.path}",
                             hint="see `deployctl history` for the deployments recorded")
        return newest[0]
    release = ledger.get(args.release)
    if args.deployment is not None and release.deployment != args.deployment:
        raise InputError(f"release {release.id} is of {release.deployment}, not {args.deployment}",
                         hint=f"`deployctl history {args.deployment}` lists its releases")
    return release
