"""deployctl bisect: which change of a rejected candidate did it; keep the rest."""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.in_unit import add_in_unit_argument, dead_man, run_in_unit
from deployctl.console.release_verbs import (
    add_candidate_arguments,
    adopt_installed,
    limits,
    locked,
    recover_first,
    say,
    site_from_args,
    who,
)
from deployctl.console.options import shift_deployment
from deployctl.console.output import TerminalProgress, emit, emit_json
from deployctl.commands.promote import abort_on_signals
from deployctl.errors import ExitCode, InputError, UsageError
from deployctl.flows.bisect import (
    Bisector,
    BisectOutcome,
    observe,
    recorded_rejection,
    search_changes,
)
from deployctl.live.protocols import Guard
from deployctl.operations.site import Site
from deployctl.preflight import run_preflight
from deployctl.decisions.bisect_changes import Change
from deployctl.decisions.bisect_search import Observation, Search, worst_case_trials
from deployctl.decisions.evidence import PromoteOutcome

NAME = "bisect"
BASELINE_MAX_AGE_S = 3600.0
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


def _base(site: Site) -> str:
    known = site.unit_files().known_good(site.unit)
    if known is None:
        raise InputError(f"{site.unit} is not installed: a bisect needs a known-good unit",
                         hint=f"`deployctl restart {site.name} --profile baseline`")
    if not known.profile or known.profile not in site.deployment.profiles:
        raise InputError(f"the installed unit's profile {known.profile or '?'} is not in the inventory: "
                         "the changes are counted from it", hint="add it back to the inventory")
    return known.profile


def likely_harmless(site: Site, profile: str, changes: tuple[Change, ...]) -> frozenset[int]:
    """Changes pre-flight calls no-ops on this host: tried first on the passing side."""
    report = run_preflight(site.inv, site.name, profile, default_python=site.default_python)
    noops = [f.message for f in report.warnings if "no-effect" in f.code or "no effect" in f.message]
    return frozenset(i for i, c in enumerate(changes)
                     if any(f"--{name}" in text.split() for name in c.flags for text in noops))


def dry_run(site: Site, profile: str, *, as_json: bool) -> int:
    """The plan, as `promote --dry-run` gives one: where nothing is installed yet it is counted from the
    profile `baseline` (what `restart --profile baseline` installs) and says so, instead of refusing."""
    installed = site.unit_files().known_good(site.unit) is not None
    if not installed and "baseline" not in site.deployment.profiles:
        _base(site)  # refuses, saying why
    base = _base(site) if installed else "baseline"
    changes = search_changes(site, profile, base)
    plan = site.plan(profile, need_known_good=False)
    with Ledger.open(site.state_dir) as ledger:
        known = recorded_rejection(ledger, site, plan.candidate_hash, plan.known_good_hash, changes,
                                   BASELINE_MAX_AGE_S, time.time())
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
    lines.append(f"  budget (policy bisect): {budget.max_restarts} restarts, {budget.max_bench_s:.0f} s of benchmark")
    emit(lines)
    return ExitCode.OK


async def bisect(site: Site, profile: str, lock: DeploymentLock, *, preflight: bool = True,
                 fresh_baseline: bool = False, rejected: PromoteOutcome | None = None,
                 ledger: Ledger | None = None, guard: Guard | None = None, output_gate: bool = True) -> BisectOutcome:
    """The whole bisect under a held lock. ``rejected``: the promote of ``profile`` that just failed."""
    if ledger is None:
        with Ledger.open(site.state_dir) as opened:
            return await bisect(site, profile, lock, preflight=preflight, fresh_baseline=fresh_baseline,
                                rejected=rejected, ledger=opened, guard=guard)
    # Here, not at the top: the real adapters bring aiohttp and the judge (numpy, scipy), which `deployctl
    # --help` would pay for at start-up (benchmarks/cli_startup.py).
    from deployctl.live.bindings import live_adapters

    progress = TerminalProgress()
    async with live_adapters(site, profile, progress, preflight=False) as adapters:
        say(await recover_first(ledger, site, adapters, NAME))
    site.refuse_leftover_trial()
    base = _base(site)
    changes = search_changes(site, profile, base)
    if not changes:
        raise InputError(f"{profile} changes nothing against the live profile {base}: nothing to bisect")
    plan = site.plan(profile)
    everything = frozenset(range(len(changes)))
    candidate: Observation | None
    if rejected is not None:
        candidate = observe(rejected, changes, everything, site)
    else:
        candidate = recorded_rejection(ledger, site, plan.candidate_hash, plan.known_good_hash, changes,
                                       BASELINE_MAX_AGE_S, time.time())
    harmless = likely_harmless(site, profile, changes) if preflight else frozenset()
    previous = adopt_installed(ledger, site)
    bisector = Bisector(ledger, site, profile, base, limits(site.policy, preflight=preflight, output_gate=output_gate),
                        who(), previous,
                        progress, time.monotonic, preflight=preflight, baseline_max_age_s=BASELINE_MAX_AGE_S,
                        fresh_baseline=fresh_baseline, guard=guard)
    abort_on_signals(bisector, lock, "bisect")
    out = await bisector.run(Search(len(changes), candidate=candidate, likely_harmless=harmless), changes)
    out.blamed_before = tuple(sorted(candidate.startup_blamed)) if candidate else ()
    return out


def report(out: BisectOutcome, *, as_json: bool) -> None:
    if as_json:
        emit_json(outcome_json(out))
    else:
        emit(outcome_lines(out))


def _names(out: BisectOutcome, subset: Any) -> str:
    return ", ".join(f"#{i + 1} {out.changes[i].text}" for i in sorted(subset)) or "no change"


def outcome_lines(out: BisectOutcome) -> list[str]:
    lines = [f"bisect {out.profile} on {out.deployment}: {len(out.changes)} change(s) from {out.base}:"]
    lines += [f"  #{i + 1} {c.text}" for i, c in enumerate(out.changes)]
    lines.append("trials:")
    for n, s in enumerate(out.steps, 1):
        kind = "promote" if s.trial.final else "bisect"
        lines.append(f"  {n}. release {s.release_id} ({kind}, {s.profile}): {_names(out, s.trial.subset)}")
        lines.append(f"     {s.trial.purpose} → {s.result}; {s.observation.summary}")
        lines.append(f"     {s.restarts} restart(s), {'benchmarked' if s.observation.benchmarked else 'no benchmark'}"
                     f" ({s.bench_s:.1f} s of traffic), {s.wall_s:.1f} s")
    finding = out.finding
    if finding is not None and finding.candidate_passed:
        lines.append("the candidate passes now: there is nothing to explain (promote it)")
    elif finding is not None:
        for c in finding.culprits:
            what = "interaction of" if c.interaction else "culprit"
            lines.append(f"{what}: {_names(out, c.changes)} (by {c.how})")
            lines += [f"  evidence: {e}" for e in c.evidence]
        if not finding.survivors and not finding.undecided:
            lines.append("every change is a culprit: the baseline stays")
    if out.undecided:
        lines += [f"could not decide: {_names(out, subset)} stayed inconclusive after every trial of it; nothing "
                  "is blamed on it (run the bisect again when the host is steadier)" for subset in out.undecided]
        if finding is not None and finding.undecided:
            lines.append("the search stopped there: the known-good unit runs, nothing was promoted")
    if out.stopped:
        lines.append(f"stopped: {out.stopped}; the known-good unit runs")
        lines += [f"  blamed so far (by {c.how}): {_names(out, c.changes)}" for c in out.blamed_so_far]
    if out.survivor_yaml:
        kept = "kept" if out.exit_code == 0 else "NOT kept (it did not pass)"
        lines.append(f"the candidate minus the culprits ({out.survivor_name}) was {kept}; "
                     "paste it under the deployment's profiles (deployctl does not edit the inventory):")
        lines += ["  " + line for line in out.survivor_yaml.rstrip().splitlines()]
    lines.append(f"{len(out.steps)} trial(s), {out.benchmarked} benchmarked, {out.restarts} restart(s), "
                 f"{out.bench_s:.1f} s of benchmark traffic, {out.wall_s:.1f} s in all; exit {out.exit_code}")
    return lines


def outcome_json(out: BisectOutcome) -> dict[str, Any]:
    finding = out.finding
    return {
        "deployment": out.deployment, "profile": out.profile, "base": out.base,
        "changes": [c.text for c in out.changes],
        "trials": [{"release": s.release_id, "profile": s.profile, "final": s.trial.final, "purpose": s.trial.purpose,
                    "changes": sorted(s.trial.subset), "result": s.result, "summary": s.observation.summary,
                    "observed": s.observation.word,
                    "benchmarked": s.observation.benchmarked, "restarts": s.restarts, "bench_s": round(s.bench_s, 2),
                    "wall_s": round(s.wall_s, 2)} for s in out.steps],
        "culprits": [{"changes": sorted(c.changes), "texts": [out.changes[i].text for i in sorted(c.changes)],
                      "how": c.how, "interaction": c.interaction, "evidence": list(c.evidence)}
                     for c in (finding.culprits if finding else ())],
        "candidate_passed": bool(finding and finding.candidate_passed),
        "survivors": sorted(finding.survivors) if finding else None,
        "survivor_yaml": out.survivor_yaml, "stopped": out.stopped,
        "blamed_so_far": [sorted(c.changes) for c in out.blamed_so_far],
        "undecided": [sorted(subset) for subset in out.undecided], "exit_code": out.exit_code,
        "restarts": out.restarts, "benchmarked": out.benchmarked, "bench_s": round(out.bench_s, 2),
        "wall_s": round(out.wall_s, 2),
    }
