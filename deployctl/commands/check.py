"""deployctl check: the pre-flight checks of one deployment profile, without touching the unit."""

from __future__ import annotations

import argparse
import json
import sys

from deployctl.console.inventory_args import deployment_name, load_inventory_from_args
from deployctl.console.options import add_deployment_and_profile
from deployctl.errors import PreflightRefused
from deployctl.preflight import PreflightReport, run_preflight
from deployctl.preflight.report import format_report


NAME = "check"
HELP = "pre-flight checks of a profile: flags vs the installed SGLang, known-bad flags, host facts"
DESCRIPTION = """\
Check DEPLOYMENT's profile P (default: candidate) before anything restarts, exactly as promote's
PREFLIGHT phase does:
  * the rendered command line against the flags of the SGLang the host's interpreter would run
    (read from its source, without importing it; the simulator's version on simulated hosts):
    unknown, renamed, ambiguous (SGLang keeps argparse's abbreviations) and invalid values, each
    quoting what SGLang would print;
  * the knowledge catalogue: flags with no effect on this GPU architecture, side effects,
    known-bad combinations, environment variables SGLang overrides;
  * the host: GPU count/model/compute capability (NVML) vs the inventory, interpreter and CUDA_HOME,
    the port (free, or held by the unit itself), free disk.
One rule for check, promote --dry-run and promote: ERROR refuses (exit 3); WARN is printed and does not
refuse (--strict makes it refuse here, for a CI gate); INFO never does. A warning is something to read:
a host that could not be inspected (remote), a flag deployctl cannot check or that may not act here.

examples:
  deployctl check -d glm5 --profile candidate -i inventory/example.yaml
  deployctl check -d glm5 --profile candidate --strict    # refuse on warnings too (exit 3)
  deployctl check -d qwen35 --json | jq '.findings[] | select(.level=="ERROR")'
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_deployment_and_profile(parser, default="candidate", help="profile (default: candidate)")
    parser.add_argument("--strict", action="store_true", help="refuse on warnings too (exit 3; errors always refuse)")
    # Warnings used to refuse unless --force; scripts that still pass it get the same, default, behaviour.
    parser.add_argument("--force", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    args.deployment = deployment_name(inv, args)
    report = run_preflight(inv, args.deployment, args.profile, default_python=sys.executable)
    refused = _refusal(report, args) if report.refuses(args.strict) else None
    if args.json:
        document = report.to_dict()
        if refused is not None:  # a refusal under --json says so in the one document, as every error does
            document.update(error=refused.message, hint=refused.hint, exit_code=refused.exit_code)
        print(json.dumps(document, indent=2))
    else:
        print(format_report(report))
    if refused is not None:
        refused.after_result = True
        raise refused
    return 0


def _refusal(report: PreflightReport, args: argparse.Namespace) -> PreflightRefused:
    if report.errors:
        return PreflightRefused(f"pre-flight refuses {args.deployment} ({args.profile}): {report.summary()}",
                                hint="fix the errors above; promote would refuse them too")
    return PreflightRefused(f"pre-flight refuses {args.deployment} ({args.profile}) on warnings (--strict): "
                            f"{report.summary()}", hint="fix them, or drop --strict: promote proceeds past warnings")
