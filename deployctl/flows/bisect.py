"""deployctl bisect's wiring: each trial of the search (``deployctl.decisions.bisect_search``) is a promote
run of an intermediate profile: the live profile plus a subset of the candidate's changes.

A trial is the promote runner (``deployctl.live.runner.Runner``) on a plan from ``Site.with_profile``,
recorded in the ledger as a release of kind ``bisect`` and run with ``Limits(keep=False)``: pre-flight,
the baseline (measured once: every later trial reuses the ledger's fresh measurement of the same
known-good unit), install, restart, startup gates, benchmark and judge exactly as a promote, then always
a rollback to the known-good unit (an abort, a crash or a kill leaves the known-good unit running, as in
promote). The final trial — the candidate minus the culprits — is a plain promote (kind ``promote``):
kept only if it passes. The inventory is never edited: the survivor is printed as YAML to paste.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from deployctl.adapters.ledger import Ledger
from deployctl.adapters.lock import DeploymentLock
from deployctl.console.output import TerminalProgress
from deployctl.console.release_verbs import adopt_installed, limits, say, who
from deployctl.decisions import machine as m
from deployctl.decisions.bisect_changes import (
    Change,
    changes_from_diff,
    gate_facts,
    profile_definition,
    profile_yaml,
    startup_blame,
)
from deployctl.decisions.bisect_report import BisectOutcome, Step
from deployctl.decisions.bisect_search import Observation, Search, Trial
from deployctl.decisions.evidence import Evidence, PromoteOutcome
from deployctl.errors import InputError
from deployctl.flows.abort import abort_on_signals
from deployctl.flows.recover import recover_first
from deployctl.inventory.model import Profile, resolve_profile
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.reuse import BASELINE_MAX_AGE_S
from deployctl.live.protocols import Guard, Progress
from deployctl.operations.site import Site
from deployctl.preflight import run_preflight
from deployctl.startup.diff import diff_startups
from deployctl.startup.report import StartupReport
from deployctl.units.profilediff import diff_profiles


if TYPE_CHECKING:
    from deployctl.live.runner import Runner

_PASSED = (m.Result.KEPT, m.Result.PASSED)


def search_changes(site: Site, profile: str, base: str) -> tuple[Change, ...]:
    return changes_from_diff(diff_profiles(resolve_profile(site.inv, site.deployment, base),
                                           resolve_profile(site.inv, site.deployment, profile)))


def observe(outcome: PromoteOutcome, changes: tuple[Change, ...], subset: frozenset[int], site: Site) -> Observation:
    """What a promote run says about ``subset``: passed or not, benchmarked or not, and — for a start
    rejected on its facts — which of the subset's changes the startup catalogue links to them."""
    ev, state = outcome.evidence, outcome.state
    passed = state.result in _PASSED
    if state.result is m.Result.INCONCLUSIVE:  # neither passed nor failed: the search measures it again
        return Observation(False, ev.candidate is not None, summary=_summary(state, ev), inconclusive=True)
    benchmarked = ev.candidate is not None
    facts: frozenset[str] = frozenset()
    blamed: frozenset[int] = frozenset()
    if not passed and not benchmarked and (ev.gate_failures or ev.start_failure):
        facts = gate_facts(ev.gate_failures) or frozenset({"outcome"})
        blamed = _blame(ev.baseline_startup, ev.candidate_startup, outcome.plan.profile_diff_data, site, changes,
                        subset, facts, ev.start_failure.message if ev.start_failure else "")
    return Observation(passed, benchmarked, facts, blamed, summary=_summary(state, ev))


def _blame(baseline: StartupReport | None, candidate: StartupReport | None, profile_diff: Any, site: Site,
           changes: tuple[Change, ...], subset: frozenset[int], facts: frozenset[str], message: str) -> frozenset[int]:
    fact_changes = diff_startups(baseline, candidate, profile_diff=profile_diff,
                                 host=site.inv.host_of(site.deployment)) if baseline and candidate else []
    return startup_blame(changes, subset, facts, fact_changes, message)


def _summary(state: m.State, ev: Evidence) -> str:
    if ev.output is not None and ev.output.outcome is not JudgeOutcome.PASS:  # wrong answers, however fast
        return ev.output.reasons[0]
    if ev.gate_failures:
        return "startup gate: " + "; ".join(ev.gate_failures)
    if ev.start_failure is not None:
        return f"did not start ({ev.start_failure.kind}): {ev.start_failure.message}"
    if ev.starts is not None:  # the verdict as decided over server starts, not the stage-1 one it replaced
        return ev.starts.reasons[0]
    verdict = ev.judge.outcome.value if ev.judge else (state.result.value if state.result else "?")
    return next((r for r in state.reasons if r), verdict)


def recorded_rejection(ledger: Ledger, site: Site, candidate_hash: str, known_good_hash: str | None,
                       changes: tuple[Change, ...], max_age_s: float, now: float) -> Observation | None:
    """The candidate's own rejection from the ledger (a promote of this unit over this known-good unit,
    recent), so the search need not try the candidate again."""
    for release in ledger.history(site.name, limit=50):
        if release.kind != "promote" or release.unit_hash != candidate_hash or release.result != "rejected":
            continue
        if now - release.started_at > max_age_s or release.previous_id is None:
            return None
        previous = ledger.get(release.previous_id)
        if previous.unit_hash != known_good_hash:
            return None
        gates = tuple(r.removeprefix("startup gate: ") for r in release.reasons if r.startswith("startup gate: "))
        everything = frozenset(range(len(changes)))
        if not gates:
            benchmarked = release.verdict not in (None, "FAIL (startup gate)")
            return Observation(False, benchmarked=benchmarked,
                               summary=f"release {release.id}: {release.verdict or release.result}")
        facts = gate_facts(gates)
        base = StartupReport.from_dict(release.baseline_startup) if release.baseline_startup else None
        cand = StartupReport.from_dict(release.startup) if release.startup else None
        diff = diff_profiles(resolve_profile(site.inv, site.deployment, previous.profile or ""),
                             resolve_profile(site.inv, site.deployment, release.profile or "")) \
            if previous.profile in site.deployment.profiles and release.profile in site.deployment.profiles else None
        blamed = _blame(base, cand, diff, site, changes, everything, facts, "")
        return Observation(False, benchmarked=False, startup_facts=facts, startup_blamed=blamed,
                           summary=f"release {release.id}: startup gate: " + "; ".join(gates))
    return None


@dataclass
class Bisector:
    """Drives a ``Search`` with trials on the live server, within the policy's budget."""

    ledger: Ledger
    site: Site
    profile: str
    base: str
    limits: m.Limits
    who: str
    previous_release_id: int | None
    progress: Progress
    clock: Callable[[], float]
    preflight: bool = True
    baseline_max_age_s: float = 3600.0
    fresh_baseline: bool = False  # measure the baseline in the first trial; the later ones reuse it
    guard: Guard | None = None  # the dead-man's switch, armed for each trial as for a promote
    abort_reason: str | None = None
    current: Runner | None = None

    def request_abort(self, reason: str) -> None:
        """Stop: the trial in flight rolls back (as a promote does), no further trial starts."""
        self.abort_reason = reason
        if self.current is not None:
            self.current.request_abort(reason)

    async def run(self, search: Search, changes: tuple[Change, ...]) -> BisectOutcome:
        started = self.clock()
        out = BisectOutcome(self.site.name, self.profile, self.base, changes)
        budget = self.site.policy.bisect
        gen = search.run()
        try:
            trial = next(gen)
            while True:
                if self.abort_reason:
                    out.stopped, out.exit_code = self.abort_reason, m.Result.ABORTED.exit_code
                    break
                if out.restarts + 2 > budget.max_restarts or out.bench_s >= budget.max_bench_s:
                    out.stopped = (f"budget spent: {out.restarts} restart(s) of {budget.max_restarts}, "
                                   f"{out.bench_s:.0f} s of benchmark of {budget.max_bench_s:.0f} s "
                                   "(policy bisect.max_restarts / bisect.max_bench_s)")
                    break
                step = await self._trial(trial, changes, len(out.steps) + 1)
                out.steps.append(step)
                if step.result in (m.Result.ABORTED.value, m.Result.ROLLBACK_FAILED.value, m.Result.REFUSED.value):
                    out.stopped = f"trial {len(out.steps)} ended {step.result}: {step.observation.summary}"
                    out.exit_code = m.Result(step.result).exit_code
                    break
                trial = gen.send(step.observation)
        except StopIteration as stop:
            out.finding = stop.value
        self._conclude(out, search)
        out.wall_s = self.clock() - started
        return out

    def _conclude(self, out: BisectOutcome, search: Search) -> None:
        if out.exit_code:
            out.blamed_so_far = tuple(search.culprits)
            return
        finding = out.finding
        if finding is None:  # stopped by the budget: what was blamed so far, what was left undecided
            out.exit_code = m.Result.INCONCLUSIVE.exit_code
            out.blamed_so_far = tuple(search.culprits)
            last = out.steps[-1].observation if out.steps else None
            out.undecided = (out.steps[-1].trial.subset,) if last is not None and last.inconclusive else ()
            return
        if finding.undecided:  # could not decide: nothing more is blamed, nothing is promoted
            out.exit_code = m.Result.INCONCLUSIVE.exit_code
            out.undecided = finding.undecided
            return
        if finding.candidate_passed:
            out.exit_code = 0
            return
        survivors = sorted(finding.survivors)
        culprits = ", ".join(out.changes[i].text for c in finding.culprits for i in sorted(c.changes))
        out.survivor_name = f"{self.profile}-bisected"
        definition = profile_definition(self.base, [out.changes[i] for i in survivors],
                                        f"{self.profile} without {culprits} (deployctl bisect)")
        out.survivor_yaml = profile_yaml(out.survivor_name, definition)
        kept = finding.survivors_passed and out.steps and out.steps[-1].trial.final \
            and out.steps[-1].result == m.Result.KEPT.value
        # nothing survived: the baseline stays, which is the answer; survivors that did not pass: rejected
        out.exit_code = 0 if kept or not survivors else m.Result.REJECTED.exit_code

    async def _trial(self, trial: Trial, changes: tuple[Change, ...], number: int) -> Step:
        name = f"{self.profile}-bisected" if trial.final else f"{self.profile}-bisect-{number}"
        chosen = [changes[i] for i in sorted(trial.subset)]
        described = ", ".join(c.text for c in chosen) or "no change"
        definition = profile_definition(self.base, chosen, f"{self.base} + {described} ({trial.purpose})")
        site = self.site.with_profile(name, Profile(**definition))
        t0 = self.clock()
        # Here, not at the top: the real adapters and the runner bring aiohttp and the judge (numpy, scipy),
        # which `deployctl --help` would pay for through `deployctl bisect`'s import of this module (benchmarks/cli_startup.py).
        from deployctl.live.bindings import live_adapters
        from deployctl.live.runner import Runner

        async with live_adapters(site, name, self.progress, preflight=self.preflight, guard=self.guard) as adapters:
            plan = site.plan(name)
            release_id = self.ledger.begin_release(
                deployment=site.name, kind="promote" if trial.final else "bisect", profile=name,
                unit_name=plan.unit_name, unit_text=plan.candidate_text, unit_hash=plan.candidate_hash, who=self.who,
                flags=plan.flags, env=plan.env, host=site.host, pid=os.getpid(), previous_id=self.previous_release_id)
            self.ledger.record(release_id, "PLAN", "note", "bisect", {"trial": number, "purpose": trial.purpose,
                                                                     "changes": [c.text for c in chosen]})
            fresh = self.fresh_baseline and number == 1
            runner = Runner(self.ledger, adapters, plan, release_id, previous_release_id=self.previous_release_id,
                            baseline_max_age_s=0.0 if fresh else self.baseline_max_age_s)
            self.current = runner
            if self.abort_reason:
                runner.request_abort(self.abort_reason)
            limits = self.limits if trial.final else replace(self.limits, keep=False)
            try:
                outcome = await runner.run(m.start(limits, unchanged=plan.unchanged))
            finally:
                self.current = None
        if outcome.state.result is m.Result.KEPT:
            self.previous_release_id = release_id
        obs = observe(outcome, changes, trial.subset, site)
        restarts = int(outcome.evidence.candidate_startup is not None or outcome.evidence.start_failure is not None)
        restarts += sum(1 for note in outcome.state.done if note.startswith("rolled back"))
        return Step(trial, name, release_id, outcome.state.result.value if outcome.state.result else "unknown", obs,
                    restarts, outcome.evidence.timings.get("traffic", 0.0), self.clock() - t0)


def installed_base(site: Site) -> str:
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
        say(await recover_first(ledger, site, adapters, "bisect"))
    site.refuse_leftover_trial()
    base = installed_base(site)
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
