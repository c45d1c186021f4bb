"""deployctl startup-diff: every startup fact that changed between two starts, and the flags that explain it."""

from __future__ import annotations

import argparse
import json
import sys

from deployctl.console.inventory_args import load_inventory_from_args
from deployctl.console.options import FILES_IN_THE_WAY, add_deployment
from deployctl.console.startup_log import load_report
from deployctl.errors import InputError
from deployctl.facts.secrets import redact
from deployctl.startup.diff import diff_startups, flag_differences, model_mismatch, unexplained_flags
from deployctl.startup.text import render_diff


NAME = "startup-diff"
HELP = "compare two startups (logs or saved reports): what changed and which flag differences explain it"
DESCRIPTION = """\
Compare the startup facts of A (baseline) and B (candidate): effective and configured
max_running_requests, KV tokens, free memory, the mamba pool, CUDA-graph and piecewise-graph state,
captured batch sizes, untuned MoE kernels, deprecations, outcome and failure kind, start-up time.
Each change is followed by what explains it: causes read from the logs (e.g. the hybrid-model cap
max_mamba_cache_size // ratio) and the flag differences (from the two server_args dumps, or from
two inventory profiles with --profiles) that the catalogue facts/startup-attribution.yaml links to
that fact, marked when an architecture gate means the flag cannot act on this host.
A and B are log files or outputs of `deployctl startup-report --json`.

examples:
  deployctl startup-diff baseline.log candidate.log --arch sm120
  deployctl startup-diff base.json cand.json --json | jq '.changes[].text'
  deployctl startup-diff a.log b.log -d qwen35 --profiles baseline candidate -i inventory/example.yaml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="baseline: log file, '-' or startup-report JSON")
    parser.add_argument("b", metavar="B", help="candidate: log file or startup-report JSON")
    parser.add_argument("--arch", metavar="SM", help="the host's GPU architecture, e.g. sm120 (for gate notes)")
    add_deployment(parser, alias=False,
                   help="take the host (architecture) and, with --profiles, the flag diff from the inventory"
                        + FILES_IN_THE_WAY)
    parser.add_argument("--profiles", nargs=2, metavar=("PA", "PB"),
                        help="the two profiles of D whose flag/env diff explains the change")


def run(args: argparse.Namespace) -> int:
    if args.a == "-" and args.b == "-":
        raise InputError("only one of A and B can be stdin")
    host = args.arch
    profile_diff = None
    if args.profiles and not args.deployment:
        raise InputError("--profiles needs -d/--deployment")
    if args.deployment:
        from deployctl.inventory.model import resolve_profile
        from deployctl.units.profilediff import diff_profiles

        inv = load_inventory_from_args(args)
        dep = inv.deployment(args.deployment)
        host = host or inv.host_of(dep)
        if args.profiles:
            pa, pb = args.profiles
            profile_diff = diff_profiles(resolve_profile(inv, dep, pa), resolve_profile(inv, dep, pb))
    a, b = load_report(args.a), load_report(args.b)
    changes = diff_startups(a, b, profile_diff=profile_diff, host=host)
    unlinked = unexplained_flags(changes, flag_differences(a, b, profile_diff, host))
    mismatch = model_mismatch(a, b)
    if mismatch and not args.json:
        print(f"warning: {mismatch}", file=sys.stderr)
    if args.json:
        print(json.dumps(redact({"warnings": [mismatch] if mismatch else [],
                                 "changes": [c.to_dict() for c in changes],
                                 "unlinked_flags": [{"flag": d.flag, "before": d.before, "after": d.after,
                                                     "gate": d.gate_note, "phrase": d.phrase} for d in unlinked]}),
                         indent=2, default=repr))
    else:
        print(render_diff(changes, unlinked))
    return 0
