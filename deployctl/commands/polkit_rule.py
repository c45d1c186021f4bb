"""deployctl polkit-rule: print the polkit rule that lets an operator group restart the inventory's units."""

from __future__ import annotations

import argparse
import sys

from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.output import emit_json
from deployctl.errors import InputError
from deployctl.units.polkit import polkit_rule


NAME = "polkit-rule"
HELP = "print the polkit rule for the inventory's units"
DESCRIPTION = """\
Print a polkit rule granting members of GROUP start/stop/restart/reset-failed on exactly the units of
the inventory's deployments (or of the ones named with -d), and nothing else: not daemon-reload (which
also authorises re-executing systemd), not other units, not transient units. Installing units and
promoting still need root. docs/systemd.md#polkit explains what remains.

examples:
  deployctl polkit-rule -i inventory/example.yaml > /etc/polkit-1/rules.d/50-deployctl.rules
  deployctl polkit-rule -d glm5 --group sglang-ops -i inventory/example.yaml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-d", "--deployment", action="append", metavar="DEPLOYMENT", default=None,
                        help="only this deployment's unit (repeatable; default: all)")
    parser.add_argument("--group", default="deployctl", help="the operators' group (default: deployctl)")


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    names = args.deployment or list(inv.deployments)
    units = [inv.deployment(name).unit for name in names]
    try:
        rule = polkit_rule(units, args.group)
    except ValueError as exc:
        raise InputError(str(exc), hint="the group must be a POSIX group name") from None
    if args.json:
        emit_json({"group": args.group, "units": sorted(set(units)), "rule": rule})
    else:
        sys.stdout.write(rule)
    return 0
