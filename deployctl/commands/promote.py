"""deployctl promote: try a profile on the live server; keep it only if the evidence says so."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Sequence

from deployctl.console.bisect_output import report as report_bisect
from deployctl.console.cost import promote_cost
from deployctl.console.in_unit import add_in_unit_argument, dead_man, inventory_note, run_in_unit
from deployctl.console.options import shift_deployment
from deployctl.console.output import emit, emit_json
from deployctl.console.release_verbs import add_candidate_arguments, locked, site_from_args
from deployctl.decisions import dead_man as switch, machine as m
from deployctl.decisions.bisect_report import outcome_json as bisect_json
from deployctl.decisions.evidence import PromoteOutcome
from deployctl.decisions.report import level_rows, outcome_json, outcome_lines, plan_lines, startup_gates
from deployctl.errors import ExitCode, UsageError
from deployctl.flows.bisect import bisect
from deployctl.flows.promote import promote
from deployctl.judge.reuse import BASELINE_MAX_AGE_S
from deployctl.operations.site import Site
from deployctl.preflight import run_preflight
from deployctl.preflight.report import format_report


NAME = "promote"
LOCAL_ADDRESSES = ("localhost", "127.0.0.1", "::1")
HELP = "try a profile on the live server: benchmark, judge, keep it or roll back"
DESCRIPTION = """\
Promote PROFILE on DEPLOYMENT: pre-flight checks, measure the live release (the baseline), install the
candidate as a trial (it lives in /run until kept, so a reboot comes back on the known-good unit),
restart, read the startup log (startup gates), benchmark, judge against the baseline, then keep it, or
roll back to the known-good unit and verify it. Every step is written to the ledger before it happens;
a controller killed at any point is recovered by the next deployctl command on that deployment.

A FAIL that a slower server start could explain (one that would not survive a 2 % restart offset a start),
and an INCONCLUSIVE the trial budget could not settle, are decided over server starts: the candidate is
restarted in place and measured again at every critical level, then rolled back, and the rollback's
verification measures the same levels on the restored baseline's new start; the candidate on its two
starts is judged against the baseline on its two: FAIL → rejected (exit 10); otherwise inconclusive
(exit 11), never rejected on a restart offset. docs/promote.md has the rule and what each case prints.

Pre-flight follows the rule of `deployctl check`: an ERROR refuses (exit 3, nothing restarted), a WARN
is printed and the promote goes on (`deployctl check --strict` first, to stop on warnings).

DEPLOYMENT is -d DEPLOYMENT, or the first of two positional arguments (`deployctl promote glm5 candidate`).

examples:
  deployctl promote candidate                      # the only deployment of the inventory
  deployctl promote candidate -d glm5 --dry-run    # the whole plan: diff, pre-flight, gates, root, remote host
  deployctl promote candidate -d qwen35 --json     # the whole result as JSON (for scripts)
  deployctl abort -d glm5                          # from another terminal: stop it and roll back
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_candidate_arguments(
        parser, profile_help="the profile to try, e.g. candidate",
        dry_run_help="print the whole plan (pre-flight included; exit 3 if it would refuse) and change nothing",
        fresh_baseline_help="measure the live release now, even if the ledger has a measurement of it from the last hour")
    parser.add_argument("--bisect", action="store_true",
                        help="on a rejection, find the change(s) that did it and promote the rest (deployctl bisect)")
    add_in_unit_argument(parser)


def run(args: argparse.Namespace) -> int:
    shift_deployment(args, ("profile",), "second")
    _one_profile(args)
    site = site_from_args(args)
    if args.dry_run:
        return dry_run(site, args.profile, preflight=not args.skip_preflight, as_json=args.json,
                       baseline_max_age_s=0.0 if args.fresh_baseline else BASELINE_MAX_AGE_S)
    if args.in_unit:
        return run_in_unit(args, NAME, site)
    with locked(site, NAME) as lock:
        out = asyncio.run(promote(site, args.profile, lock, preflight=not args.skip_preflight,
                                  baseline_max_age_s=0.0 if args.fresh_baseline else BASELINE_MAX_AGE_S,
                                  guard=dead_man(args, site), inventory=inventory_note(args),
                                  output_gate=not args.skip_output_gate, show_plan=None if args.json else print_now))
        if args.bisect and out.state.result is m.Result.REJECTED:
            if not args.json:
                _report(out, as_json=False)
            found = asyncio.run(bisect(site, args.profile, lock, preflight=not args.skip_preflight, rejected=out,
                                              guard=dead_man(args, site)))
            if args.json:
                emit_json({"promote": outcome_json(out), "bisect": bisect_json(found)})
            else:
                report_bisect(found, as_json=False)
            return found.exit_code
    _report(out, as_json=args.json)
    return out.exit_code


def _report(out: PromoteOutcome, *, as_json: bool) -> None:
    if as_json:
        emit_json(outcome_json(out))
    else:
        ev = out.evidence
        emit(outcome_lines(out, plan_shown=True), rows=level_rows(ev.baseline, ev.candidate, ev.judge.levels if ev.judge else ()))


def print_now(lines: Sequence[str]) -> None:
    """To stdout at once: flushed, so it comes before the progress that follows on stderr (a terminal, or
    cron's one pipe for both)."""
    if lines:
        print("\n".join(lines), flush=True)


def _one_profile(args: argparse.Namespace) -> None:
    """PROFILE, or --profile: one of them, once."""
    named = {name for name in (args.profile, args.profile_option) if name}
    if len(named) != 1:
        raise UsageError("two profiles named: " + " and ".join(sorted(named)) if named else "no profile named",
                         hint="deployctl promote PROFILE [-d DEPLOYMENT]")
    args.profile = named.pop()


def dry_run(site: Site, profile: str, *, preflight: bool, as_json: bool, baseline_max_age_s: float) -> int:
    """The whole plan, changing nothing: the diff, pre-flight (and whether it would refuse), every gate,
    the expected and worst-case GPU time, whether the real run needs root, and whether the host is remote. Exit 3 when pre-flight would refuse."""
    plan = site.plan(profile, need_known_good=False)
    report = run_preflight(site.inv, site.name, profile, default_python=site.default_python) \
        if preflight and not plan.unchanged else None
    refuses = report is not None and report.refuses()  # the rule of check and the real run
    address = site.inv.host_of(site.deployment).address
    remote = None if site.simulated or address in LOCAL_ADDRESSES else address
    needs_root = os.geteuid() != 0 and not plan.unchanged
    cost = None if plan.unchanged else promote_cost(site, plan, baseline_max_age_s)
    if as_json:
        emit_json({"deployment": plan.deployment, "profile": plan.profile, "unit": plan.unit_name,
                   "unchanged": plan.unchanged, "profile_diff": list(plan.profile_diff),
                   "would_restart": [] if plan.unchanged else [plan.unit_name],
                   "preflight": report.to_dict() if report else None, "preflight_would_refuse": refuses,
                   "startup_gates": startup_gates(plan.policy), "needs_root": needs_root, "remote_host": remote,
                   "dead_man": {"check_s": switch.check_s(plan.policy), "stall_s": switch.stall_s(plan.policy)},
                   "cost": cost.to_dict() if cost else None,
                   "policy": plan.policy.model_dump(mode="json")})
    else:
        lines = plan_lines(plan)
        if report is not None:
            lines += ["  pre-flight:", *(f"    {line}" for line in format_report(report).splitlines())]
            if refuses:
                lines.append("  pre-flight would REFUSE this promote (exit 3): fix the errors above")
            elif report.warnings:
                lines.append("  pre-flight would let it proceed with the warnings above")
        elif not plan.unchanged:
            lines.append("  pre-flight: skipped (--skip-preflight)")
        if not plan.unchanged:
            lines.append(f"  {switch.describe(plan.policy)}")
        if cost is not None:
            lines += [f"  {line}" for line in cost.describe()]
        if needs_root:
            lines.append("  the real run needs root: it installs the unit in the systemd directories, restarts it "
                         f"over D-Bus and writes the ledger in {site.state_dir}")
        if remote:
            lines.append(f"  host {site.host} is remote ({address}): deployctl restarts units of the systemd it runs "
                         f"under, so run the promote on that host (`ssh {address} sudo deployctl promote "
                         f"{profile} -d {site.name}`)")
        emit(lines)
    return ExitCode.PREFLIGHT_REFUSED if refuses else ExitCode.OK
