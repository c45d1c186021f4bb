"""deployctl diff: what changes between two profiles of a deployment."""

from __future__ import annotations

import argparse
import difflib
import sys

from deployctl.commands._inventory import (
    add_inventory_argument,
    load_inventory_from_args,
    use_colour,
)
from deployctl.inventory.model import resolve_profile
from deployctl.units.profilediff import diff_profiles, format_profile_diff
from deployctl.units.render import render_unit

NAME = "diff"
HELP = "show the flags and environment that differ between two profiles"
DESCRIPTION = """\
Compare profile A with profile B of DEPLOYMENT after inheritance: flags added (+), removed (-) and
changed (~), then the environment. --unit shows a unified diff of the two rendered units instead.

examples:
  deployctl diff glm5 baseline candidate -i inventory/example.yaml
      glm5: baseline -> candidate
      flags:
        + --enable-flashinfer-allreduce-fusion
  deployctl diff qwen35 baseline candidate --unit
"""

_COLOURS = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("deployment", metavar="DEPLOYMENT")
    parser.add_argument("a", metavar="A", help="the profile to compare from (e.g. baseline)")
    parser.add_argument("b", metavar="B", help="the profile to compare to (e.g. candidate)")
    parser.add_argument("--unit", action="store_true", help="unified diff of the rendered unit files")
    add_inventory_argument(parser)


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    if args.unit:
        a = render_unit(inv, args.deployment, args.a, default_python=sys.executable)
        b = render_unit(inv, args.deployment, args.b, default_python=sys.executable)
        lines = list(difflib.unified_diff(
            a.text.splitlines(), b.text.splitlines(),
            fromfile=f"{a.name} ({args.a})", tofile=f"{b.name} ({args.b})", lineterm="",
        ))
    else:
        diff = diff_profiles(resolve_profile(inv, args.deployment, args.a), resolve_profile(inv, args.deployment, args.b))
        lines = [f"{args.deployment}: {args.a} -> {args.b}", *format_profile_diff(diff)]
    colour = use_colour()
    for line in lines:
        mark = line.strip()[:1]
        if colour and mark in _COLOURS and not line.startswith(("+++", "---")):
            line = f"{_COLOURS[mark]}{line}\033[0m"
        print(line)
    return 0
