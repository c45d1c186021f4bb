"""deployctl bisect: which change of a rejected candidate did it; keep the rest."""

from __future__ import annotations

import argparse
import asyncio
import time

from deployctl.adapters.ledger import Ledger
from deployctl.console.bisect_output import report
from deployctl.console.cost import promote_cost
from deployctl.console.in_unit import add_in_unit_argument, dead_man, run_in_unit
from deployctl.console.options import shift_deployment
from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import add_candidate_arguments, locked, site_from_args
from deployctl.decisions.bisect_search import worst_case_trials
from deployctl.errors import ExitCode, UsageError
from deployctl.flows.bisect import bisect, installed_base, recorded_rejection, search_changes
from deployctl.judge.reuse import BASELINE_MAX_AGE_S
from deployctl.judge.wording import duration
from deployctl.operations.site import Site


NAME = "bisect"
HELP = "find which change of a rejected candidate did it, and promote the candidate without it"
DESCRIPTION = """\
Split the difference between the live profile and PROFILE into changes (a flag with the values it
implies is one change), then find the smallest set of changes that explains the rejection: startup facts
first (a startup gate failure is blamed, through the startup diff's catalogue, on the changes that can
move that fact: no benchmark), then bisection, then delta debugging for changes that only hurt together.
Each intermediate profile is tried like a promote (the same gates and judge; recorded as a release of kind
`bisect`; always rolled back), the known-good baseline is measured once and reused. The candidate minus the
culprits is then promoted (kept only if it passes) and printed as YAML to paste into the inventory,
which deployctl never edits. The budget is the policy's bisect.max_restarts and bisect.max_bench_s.

An inconclusive trial (the judge could not decide, or the host drifted) counts as neither passed nor
failed: the same subset is tried again, up to twice; still inconclusive, the bisect stops and says it
could not decide (and which changes), rather than blaming any of them.

exit codes: 0 the survivors were kept (or nothing survived: the baseline stays) · 10 the survivors were
rejected too · 11 could not decide (a subset stayed inconclusive, or the budget ran out first) · 3, 12,
130 as promote.

examples:
  deployctl bisect candidate -d glm5 --dry-run     # the changes, what is blamed already, the worst case
  deployctl bisect candidate -d glm5               # do it
  deployctl promote candidate -d glm5 --bisect     # promote; on a rejection, bisect at once
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_candidate_arguments(
        parser, profile_help="the rejected candidate, e.g. candidate",
        dry_run_help="print the changes, what the ledger already blames, the worst case and the budget",
        fresh_baseline_help="measure the live release once now instead of reusing a measurement from the last hour")
    add_in_unit_argument(parser)


def run(args: argparse.Namespace) -> int:
    shift_deployment(args, ("profile",), "second")
    named = {n for n in (args.profile, args.profile_option) if n}
    if len(named) != 1:
        raise UsageError("name one profile", hint="deployctl bisect PROFILE [-d DEPLOYMENT]")
    profile = named.pop()
    site = site_from_args(args)
    if args.dry_run:
        return dry_run(site, profile, as_json=args.json)
    if args.in_unit:
        return run_in_unit(args, NAME, site)
    with locked(site, NAME) as lock:
        out = asyncio.run(bisect(site, profile, lock, preflight=not args.skip_preflight,
                                 fresh_baseline=args.fresh_baseline, guard=dead_man(args, site),
                                 output_gate=not args.skip_output_gate))
    report(out, as_json=args.json)
    return out.exit_code


def dry_run(site: Site, profile: str, *, as_json: bool) -> int:
    """The plan, as `promote --dry-run` gives one: where nothing is installed yet it is counted from the
    profile `baseline` (what `restart --profile baseline` installs) and says so, instead of refusing."""
    installed = site.unit_files().known_good(site.unit) is not None
    if not installed and "baseline" not in site.deployment.profiles:
        installed_base(site)  # refuses, saying why
    base = installed_base(site) if installed else "baseline"
    changes = search_changes(site, profile, base)
    plan = site.plan(profile, need_known_good=False)
    with Ledger.open(site.state_dir) as ledger:
        known = recorded_rejection(ledger, site, plan.candidate_hash, plan.known_good_hash, changes,
                                   BASELINE_MAX_AGE_S, time.time())
        cost = promote_cost(site, plan, BASELINE_MAX_AGE_S, ledger)  # each trial is a promote
    blamed = sorted(known.startup_blamed) if known and len(known.startup_blamed) < len(changes) else []
    n = len(changes) - len(blamed)
    trials = (0 if known else 1) + worst_case_trials(n) + 1
    budget = site.policy.bisect
    if as_json:
        emit_json({"deployment": site.name, "profile": profile, "base": base, "installed": installed,
                   "changes": [c.text for c in changes],
                   "candidate_rejection": known.summary if known else None,
                   "blamed_without_restart": [changes[i].text for i in blamed],
                   "worst_case_trials_one_culprit": trials, "worst_case_restarts": 2 * trials,
                   "cost_per_trial": cost.to_dict(), "worst_case_gpu_hours": trials * cost.expected_gpu_h,
                   "budget": budget.model_dump()})
        return ExitCode.OK
    lines = [f"bisect {profile} on {site.name}: {len(changes)} change(s) from the live profile {base}:" if installed else
             f"bisect {profile} on {site.name}: {len(changes)} change(s) from profile {base} ({site.unit} is not "
             f"installed yet: the real run needs it, `deployctl restart {site.name} --profile {base}`):"]
    lines += [f"  #{i + 1} {c.text}" for i, c in enumerate(changes)]
    lines.append(f"  the candidate's rejection: {known.summary}" if known else
                 "  no recent rejection of this candidate in the ledger: the first trial is the candidate itself")
    lines += [f"  blamed by the startup facts without a restart: #{i + 1} {changes[i].text}" for i in blamed]
    lines.append(f"  worst case for one culprit: {trials} trial(s) ({2 * trials} restarts with rollbacks), the last "
                 "one the promote of the candidate minus the culprit; each interacting change adds ⌈log2 n⌉ + 1")
    lines.append(f"  worst case for one culprit, each trial at a promote's expected cost: "
                 f"{trials * cost.expected_gpu_h:.2f} GPU-hours ({duration(trials * cost.expected_s)} on {cost.gpus} GPU(s));"
                 f" a promote here: {cost.basis}")
    lines.append(f"  budget (policy bisect): {budget.max_restarts} restarts, {budget.max_bench_s:.0f} s of benchmark")
    emit(lines)
    return ExitCode.OK
