"""deployctl promote: try a profile on the live server; keep it only if the evidence says so."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.commands._operation import add_in_unit_argument, dead_man, inventory_note, run_in_unit
from deployctl.commands._release_verbs import (
    add_site_arguments,
    adopt_installed,
    limits,
    locked,
    recover_first,
    say,
    site_from_args,
    who,
)
from deployctl.commands.output import TerminalProgress, emit, emit_json
from deployctl.live.bindings import live_adapters
from deployctl.live.runner import Guard, Runner
from deployctl.live.site import Site
from deployctl.promote import machine as m
from deployctl.promote.evidence import PromoteOutcome
from deployctl.promote.report import level_rows, outcome_json, outcome_lines, plan_lines

NAME = "promote"
BASELINE_MAX_AGE_S = 3600.0  # a baseline of the same unit, host, version and sweep this recent is reused
HELP = "try a profile on the live server: benchmark, judge, keep it or roll back"
DESCRIPTION = """\
Promote PROFILE on DEPLOYMENT: pre-flight checks, measure the live release (the baseline), install the
candidate as a trial (it lives in /run until kept, so a reboot comes back on the known-good unit),
restart, read the startup log (startup gates), benchmark, judge against the baseline, then keep it, or
roll back to the known-good unit and verify it. Every step is written to the ledger before it happens;
a controller killed at any point is recovered by the next deployctl command on that deployment.

exit codes: 0 kept (or nothing to change) · 2 bad input · 3 refused by pre-flight · 4 busy ·
            10 rejected and rolled back · 11 inconclusive, baseline kept · 12 rollback failed · 130 aborted

examples:
  deployctl promote candidate                      # the only deployment of the inventory
  deployctl promote candidate -d glm5 --dry-run    # the diff, what would restart, the policy
  deployctl promote candidate -d qwen35 --json     # the whole result as JSON (for scripts)
  deployctl abort -d glm5                          # from another terminal: stop it and roll back
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("profile", metavar="PROFILE", help="the profile to try, e.g. candidate")
    add_site_arguments(parser)
    parser.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    parser.add_argument("--skip-preflight", action="store_true", help="do not run the pre-flight checks")
    parser.add_argument("--fresh-baseline", action="store_true",
                        help="measure the live release now, even if the ledger has a measurement of it from the last hour")
    add_in_unit_argument(parser)


def run(args: argparse.Namespace) -> int:
    site = site_from_args(args)
    if args.dry_run:
        plan = site.plan(args.profile, need_known_good=False)
        if args.json:
            emit_json({"deployment": plan.deployment, "profile": plan.profile, "unit": plan.unit_name,
                       "unchanged": plan.unchanged, "profile_diff": list(plan.profile_diff),
                       "would_restart": [] if plan.unchanged else [plan.unit_name],
                       "policy": plan.policy.model_dump(mode="json")})
        else:
            emit(plan_lines(plan))
        return 0
    if args.in_unit:
        return run_in_unit(args, NAME, site)
    with locked(site, NAME) as lock:
        out = asyncio.run(promote(site, args.profile, lock, preflight=not args.skip_preflight,
                                  baseline_max_age_s=0.0 if args.fresh_baseline else BASELINE_MAX_AGE_S,
                                  guard=dead_man(args, site), inventory=inventory_note(args)))
    if args.json:
        emit_json(outcome_json(out))
    else:
        ev = out.evidence
        emit(outcome_lines(out), rows=level_rows(ev.baseline, ev.candidate, ev.judge.levels if ev.judge else ()))
    return out.exit_code


async def promote(site: Site, profile: str, lock: DeploymentLock, *, preflight: bool = True,
                  baseline_max_age_s: float = BASELINE_MAX_AGE_S, guard: Guard | None = None,
                  inventory: str | None = None) -> PromoteOutcome:
    """The whole promote under a held lock: recover, adopt, record, run; SIGTERM/SIGINT roll back."""
    progress = TerminalProgress()
    with Ledger.open(site.state_dir) as ledger:
        async with live_adapters(site, profile, progress, preflight=preflight, guard=guard) as adapters:
            say(await recover_first(ledger, site, adapters, NAME))
            plan = site.plan(profile)
            previous = adopt_installed(ledger, site)
            release_id = ledger.begin_release(
                deployment=site.name, kind="promote", profile=profile, unit_name=plan.unit_name,
                unit_text=plan.candidate_text, unit_hash=plan.candidate_hash, who=who(), flags=plan.flags,
                env=plan.env, host=site.host, pid=os.getpid(), previous_id=previous,
            )
            if inventory:
                ledger.record(release_id, m.Phase.PLAN.value, "note", "inventory", {"reason": inventory})
            runner = Runner(ledger, adapters, plan, release_id, previous_release_id=previous,
                            baseline_max_age_s=baseline_max_age_s)
            abort_request(lock)  # a request left for a promote that had already ended is not for this one
            _abort_on_signals(runner, lock)
            return await runner.run(m.start(limits(site.policy, preflight=preflight)))


def _abort_on_signals(runner: Runner, lock: DeploymentLock) -> None:
    loop = asyncio.get_running_loop()

    def abort(signame: str) -> None:
        requested = abort_request(lock)
        runner.request_abort(requested or f"interrupted ({signame})")
        print(f"\n{signame}: stopping the promote and rolling back", file=sys.stderr)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, abort, sig.name)


def abort_request_path(lock: DeploymentLock) -> Path:
    return lock.path.with_suffix(".abort")


def abort_request(lock: DeploymentLock) -> str | None:
    """The reason ``deployctl abort`` left next to the lock, if it was that and not a plain signal."""
    path = abort_request_path(lock)
    try:
        text = path.read_text().strip()
        path.unlink()
    except OSError:
        return None
    return text or None
