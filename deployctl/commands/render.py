"""deployctl render: print (or write) the systemd unit of one deployment profile."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from deployctl.console.inventory_args import deployment_name, load_inventory_from_args
from deployctl.console.options import add_deployment_and_profile
from deployctl.console.output import emit_json
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
  deployctl render -d glm5 --profile baseline -i inventory/example.yaml
  deployctl render -d glm5 --profile candidate -o /tmp/units/   # writes /tmp/units/sglang-glm5.service
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment_and_profile(parser, default="baseline", help="profile (default: baseline)")
    parser.add_argument("-o", "--output", metavar="FILE",
                        help="write here instead of stdout (a directory, or a path ending in /, gets the unit's "
                             "own file name)")


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    name = deployment_name(inv, args)
    unit = render_unit(inv, name, args.profile, default_python=sys.executable)
    target = None if args.output is None else _target(args.output, unit.name)
    if target is not None:
        try:
            target.write_text(unit.text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {target}: {exc.strerror}") from None
        print(f"wrote {target} ({name}, profile {args.profile}, hash {unit.sha256[:12]})", file=sys.stderr)
    if args.json:
        emit_json({"deployment": name, "profile": args.profile, "unit": unit.name, "sha256": unit.sha256,
                   "written": None if target is None else str(target), "text": unit.text})
    elif target is None:
        sys.stdout.write(unit.text)
    return 0


def _target(output: str, unit_name: str) -> Path:
    """A directory, or a path that ends in '/', gets the unit's own name (the directory is made)."""
    target = Path(output)
    if output.endswith(("/", os.sep)) or target.is_dir():
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make the directory {target}: {exc.strerror}") from None
        return target / unit_name
    return target
