"""deployctl diff: what changes between two profiles of a deployment."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys

from deployctl.console.inventory_args import deployment_name, load_inventory_from_args, use_colour
from deployctl.console.options import add_deployment, complete_profiles, shift_deployment
from deployctl.console.output import emit_json
from deployctl.errors import ExitCode
from deployctl.inventory.model import resolve_profile
from deployctl.units.profilediff import diff_profiles, format_profile_diff
from deployctl.units.render import render_unit


NAME = "diff"
HELP = "show the flags and environment that differ between two profiles"
DESCRIPTION = """\
Compare profile A with profile B of DEPLOYMENT (-d, or the first of three positional arguments) after inheritance: flags added (+), removed (-) and
changed (~), then the environment. --unit shows a unified diff of the two rendered units instead.
Exit 0 when they are the same, 1 when they differ (as diff(1) and `git diff --exit-code`: `if deployctl
diff glm5 baseline candidate -q; then …`); a bug, which also exits 1, prints a traceback on stderr.

examples:
  deployctl diff -d glm5 baseline candidate -i inventory/example.yaml
      glm5: baseline -> candidate
      flags:
        + --enable-flashinfer-allreduce-fusion
  deployctl diff qwen35 baseline candidate --unit      # the positional alias of -d qwen35
"""

DIFFERENT = 1  # diff(1)'s "they differ" (deployctl's bugs exit 1 too, with a traceback on stderr)
_COLOURS = {"+": "\033[32m", "-": "\033[31m", "~": "\033[33m"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment(parser, alias=False, help="the deployment (optional when the inventory has only one; "
                                             "also accepted as the first of three positional arguments)")
    for name, text in (("a", "the profile to compare from (e.g. baseline)"),
                       ("b", "the profile to compare to (e.g. candidate)")):
        parser.add_argument(name, metavar=name.upper(), help=text).completer = complete_profiles  # type: ignore[attr-defined]
    parser.add_argument("third", nargs="?", help=argparse.SUPPRESS)  # `diff D A B`: the alias of -d D
    parser.add_argument("--unit", action="store_true", help="unified diff of the rendered unit files")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing: only the exit code says (0 same, 1 differ)")


def run(args: argparse.Namespace) -> int:
    shift_deployment(args, ("a", "b"), "third")
    inv = load_inventory_from_args(args)
    name = deployment_name(inv, args)
    if args.unit:
        a = render_unit(inv, name, args.a, default_python=sys.executable)
        b = render_unit(inv, name, args.b, default_python=sys.executable)
        lines = list(difflib.unified_diff(
            a.text.splitlines(), b.text.splitlines(),
            fromfile=f"{a.name} ({args.a})", tofile=f"{b.name} ({args.b})", lineterm="",
        ))
        same = not lines
        document = {"deployment": name, "a": args.a, "b": args.b, "same": same, "unified_diff": lines}
        lines = lines or [f"{name}: {args.a} -> {args.b}: no differences"]
    else:
        diff = diff_profiles(resolve_profile(inv, name, args.a), resolve_profile(inv, name, args.b))
        same = diff.empty
        document = {"deployment": name, "a": args.a, "b": args.b, "same": same, **dataclasses.asdict(diff)}
        lines = [f"{name}: {args.a} -> {args.b}", *format_profile_diff(diff)]
    code = ExitCode.OK if same else DIFFERENT
    if args.quiet:
        return code
    if args.json:
        emit_json(document)
        return code
    colour = use_colour()
    for line in lines:
        mark = line.strip()[:1]
        if colour and mark in _COLOURS and not line.startswith(("+++", "---")):
            line = f"{_COLOURS[mark]}{line}\033[0m"
        print(line)
    return code
