"""deployctl validate: check an inventory and render every profile of every deployment."""

from __future__ import annotations

import argparse
import sys

from deployctl.console.inventory_args import inventory_path, load_inventory_from_args
from deployctl.console.output import emit_json
from deployctl.errors import InputError
from deployctl.inventory.model import resolve_profile
from deployctl.preflight.run import unshipped_flag_findings
from deployctl.units.render import render_unit


NAME = "validate"
HELP = "check the inventory; list every problem with file, line and key path"
DESCRIPTION = """\
Check the inventory: YAML syntax, unknown keys, types, flag values, references between hosts,
models and deployments, profile inheritance, policy blocks; then render every profile of every
deployment. Every problem is listed at once as FILE:LINE: key.path: message (exit 2; with --json,
{"error", "problems": [...], "exit_code"}). A flag that none of the SGLang releases deployctl has flag
tables of knows is a warning, with a "did you mean" (exit 0: `deployctl check` on the host reads its own
SGLang's flags).

example:
  deployctl validate -i inventory/example.yaml
  inventory/example.yaml:42: deployments.glm5.profiles.candidate.flags.tp: expected an integer, got 'eight'
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Only the global options (-i FILE)."""


def run(args: argparse.Namespace) -> int:
    inv = load_inventory_from_args(args)
    source = inventory_path(args)
    failures = []
    warnings = []
    rendered = 0
    for name, dep in inv.deployments.items():
        for profile in dep.profiles:
            try:
                render_unit(inv, dep, profile, default_python=sys.executable)
                rendered += 1
            except InputError as exc:
                failures.append(f"{source}: deployments.{name}.profiles.{profile}: {exc.message}")
                continue
            for finding in unshipped_flag_findings(list(resolve_profile(inv, dep, profile).flags)):
                flag = finding.message.split()[0].lstrip("-")
                warnings.append(f"{source}: deployments.{name}.profiles.{profile}.flags.{flag}: {finding.message}"
                                f" ({finding.hint})")
    if failures:
        raise InputError("\n".join([f"{source}: {len(failures)} profile(s) do not render", *failures]))
    if args.json:
        emit_json({"inventory": source, "ok": True, "units_rendered": rendered, "warnings": warnings,
                   "hosts": {name: {"simulated": host.simulated, "gpus": host.gpus.count, "gpu_model": host.gpus.model,
                                    "compute_capability": host.gpus.compute_capability}
                             for name, host in inv.hosts.items()},
                   "deployments": {name: {"unit": dep.unit, "host": dep.host, "port": dep.port,
                                          "profiles": list(dep.profiles)} for name, dep in inv.deployments.items()}})
        return 0
    print(f"{source}: ok")
    for name, host in inv.hosts.items():
        kind = "simulated, " if host.simulated else ""
        print(f"  host {name}: {kind}{host.gpus.count} x {host.gpus.model} ({host.gpus.compute_capability})")
    for name, dep in inv.deployments.items():
        print(f"  deployment {name}: {dep.unit} on {dep.host}:{dep.port}, profiles {', '.join(dep.profiles)}")
    print(f"  {rendered} unit(s) rendered")
    for warning in warnings:
        print(f"warning: {warning}")
    return 0
