"""deployctl render: print (or write) the systemd unit of one deployment profile."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from deployctl.commands._inventory import (
    add_inventory_argument,
    load_inventory_from_args,
)
from deployctl.errors import InputError
from deployctl.units.render import render_unit

NAME = "render"
HELP = "print the systemd unit of a deployment profile"
DESCRIPTION = """\
Render the unit deployctl would install for DEPLOYMENT with profile P (default: baseline):
Type=exec, one Environment= per variable, ExecStart with the interpreter and every flag, and
X-Deployctl-Deployment/Profile/Hash for traceability. Nothing is installed.
Simulated hosts without python: run the simulator with this deployctl's own interpreter.

examples:
  deployctl render glm5 --profile baseline -i inventory/example.yaml
  deployctl render glm5 --profile candidate -o /tmp/units/   # writes /tmp/units/sglang-glm5.service
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("deployment", metavar="DEPLOYMENT")
    parser.add_argument("--profile", "-p", default="baseline", metavar="P", help="profile (default: baseline)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write here instead of stdout (a directory gets the unit's own file name)")
    add_inventory_argument(parser)


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    unit = render_unit(inv, args.deployment, args.profile, default_python=sys.executable)
    if args.output is None:
        sys.stdout.write(unit.text)
        return 0
    target = Path(args.output)
    if target.is_dir():
        target = target / unit.name
    try:
        target.write_text(unit.text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror}") from None
    print(f"wrote {target} ({args.deployment}, profile {args.profile}, hash {unit.sha256[:12]})", file=sys.stderr)
    return 0
