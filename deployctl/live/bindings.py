"""The runner's protocols bound to the real modules: systemd, unit files, journal, startup parser, judge,
gates, pre-flight (the benchmark's binding, ``LiveBench``, is in ``deployctl.load.measure``). Each class
translates into the runner's evidence types; the modules' own APIs stay theirs. ``live_adapters(site,
profile)`` builds the set a promote runs with.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from statistics import mean
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from deployctl.adapters.journal import Journal
from deployctl.adapters.systemd import Systemd
from deployctl.bench.result import BenchResult
from deployctl.errors import SystemdError
from deployctl.inventory.policy import Policy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import (
    StartsVerdict, critical_levels, judge_over_starts, over_starts_needed, recheck_pass, starts_a_side, verification_plan,
)
from deployctl.judge.stats import NoiseEstimate, RestartNoise
from deployctl.judge.verdict import Verdict
from deployctl.load.measure import LiveBench
from deployctl.live.output_gate import LiveOutputs
from deployctl.live.protocols import Adapters, Guard, Progress, QuietProgress
from deployctl.operations.restart import http_health_probe, read_startup, restart_and_wait
from deployctl.operations.site import Site
from deployctl.decisions.canary import ServerStart
from deployctl.decisions.evidence import (
    DriftResult,
    GateResult,
    JudgeResult,
    LevelRow,
    Plan,
    PreflightResult,
    ServerFacts,
    StartOutcome,
)
from deployctl.startup.parser import StartupReport, parse_lines
from deployctl.units.stamp import unit_hash


class LiveUnits:
    def __init__(self, systemd: Systemd, site: Site, on_progress: Callable[[], None] | None = None) -> None:
        self.systemd = systemd
        self.site = site
        self.on_progress = on_progress  # each line of a starting server: the dead-man's lease is renewed
        self.files = site.unit_files()
        self.journal: Journal = site.endpoint.journal()

    async def install_trial(self, name: str, text: str) -> str:
        installed = self.files.install_trial(name, text, adopt=True)
        await self.systemd.reload()
        return str(installed.path)

    async def keep(self, name: str, candidate_hash: str) -> str:
        try:
            installed = self.files.keep(name, candidate_hash)  # idempotent: a resumed keep finds it persisted
        finally:
            await self.systemd.reload()  # whatever it left on disk is what systemd must load
        return f"persisted to {installed.path}"

    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str:
        done = []
        if self.files.discard_trial(name):
            done.append("removed the trial")
        current = self.files.known_good(name)
        if known_good_hash and (current is None or current.sha256 != known_good_hash):
            # The known-good file itself was replaced (a keep cut short, a hand edit): put it back.
            texts = (known_good_text, self.files.previous(name))
            text = next((t for t in texts if t and unit_hash(t) == known_good_hash), None)
            if text is None:
                raise SystemdError(
                    f"cannot find the known-good text of {name} (sha256 {known_good_hash[:12]}…)",
                    hint="`deployctl history` lists the releases; `deployctl rollback --to ID` reinstalls one",
                )
            self.files.restore(name, text)
            done.append("reinstalled the known-good unit")
        await self.systemd.reload()
        return ", ".join(done) or "the known-good unit was in place"

    async def restart_and_wait(self, name: str, timeout_s: float, *, fresh_start: bool = False) -> StartOutcome:
        if fresh_start:
            await self.systemd.reset_failed(name)
        on_line = (lambda line: self.on_progress()) if self.on_progress is not None else None
        report = await restart_and_wait(self.systemd, self.journal, name, timeout_s=timeout_s,
                                        probe=http_health_probe(self.site.url + "/health"), on_line=on_line)
        startup = parse_lines(line.text for line in report.log if not line.from_manager)
        if report.outcome.ok and not startup.ready and report.invocation_id:
            startup = await self._complete_log(report.invocation_id)
        return start_outcome(report.outcome, startup)

    async def _complete_log(self, invocation_id: str, settle_s: float = 3.0) -> StartupReport:
        """The whole startup log once /health answered first: the journal may lag the ready line a little."""
        deadline = asyncio.get_running_loop().time() + settle_s
        while True:
            lines = await read_startup(self.journal, invocation_id)
            startup = parse_lines(line.text for line in lines if not line.from_manager)
            if startup.ready or asyncio.get_running_loop().time() >= deadline:
                return startup
            await asyncio.sleep(0.1)


def start_outcome(outcome: Any, startup: StartupReport) -> StartOutcome:
    """The readiness outcome in the runner's words, with the server's own reason when it gave one."""
    last = tuple(getattr(outcome, "last_lines", ()) or ())
    if outcome.ok:
        return StartOutcome(True, "ready", f"ready via {outcome.via}", (), startup, outcome.elapsed_s)
    failure = startup.failure
    if outcome.kind == "timeout":
        where = outcome.last_line or "(no output)"
        message = f"not ready after {outcome.elapsed_s:.0f} s; last line: {where}"
    else:
        message = outcome.reason
    if failure is not None:
        message = f"{failure.message} — {message}"
    return StartOutcome(False, outcome.kind, message, last, startup, outcome.elapsed_s)


class LiveStartup:
    def __init__(self, systemd: Systemd, site: Site) -> None:
        self.systemd = systemd
        self.site = site
        self.journal = site.endpoint.journal()

    async def live_report(self, name: str) -> StartupReport | None:
        state = await self.systemd.unit_state(name)
        if not state.invocation_id or state.active_state != "active":
            return None
        lines = await read_startup(self.journal, state.invocation_id)
        return parse_lines(line.text for line in lines if not line.from_manager)

    async def live_start(self, name: str) -> ServerStart | None:
        """The active unit's start: its invocation and when it became active (ActiveEnterTimestamp)."""
        state = await self.systemd.unit_state(name)
        if not state.invocation_id or state.active_state != "active" or not state.active_enter_us:
            return None
        return ServerStart(state.invocation_id, state.active_enter_us / 1e6)

    def diff(self, baseline: StartupReport | None, candidate: StartupReport, plan: Plan) -> tuple[str, ...]:
        from deployctl.startup.diff import diff_startups

        if baseline is None:
            return ()
        host = self.site.inv.host_of(self.site.deployment)
        changes = diff_startups(baseline, candidate, profile_diff=plan.profile_diff_data, host=host)
        return tuple(change.text for change in changes)


class LiveJudge:
    """The judge's verdicts; ``improvement=True`` (the canary's rollback of a degraded release) keeps a
    candidate only if it is better now (``deployctl.judge.improvement``), not merely not worse."""

    def __init__(self, policy: Policy, *, improvement: bool = False) -> None:
        self.policy = policy
        self.improvement = improvement

    def gates(self, baseline: StartupReport | None, candidate: StartupReport) -> GateResult:
        from deployctl.judge.gates import check_startup_gates

        verdict = check_startup_gates(baseline, candidate, self.policy.gates)
        return GateResult(bool(verdict.passed), tuple(verdict.failures))

    def judge(
        self, baseline: BenchResult, candidate: BenchResult, noise: Mapping[int, NoiseEstimate] | None = None,
        *, restart: RestartNoise | None = None,
    ) -> JudgeResult:
        from deployctl.judge.verdict import judge

        verdict = judge(baseline, candidate, self.policy.judge, noise, restart)
        if self.improvement:
            from deployctl.judge.improvement import improvement_verdict

            verdict = improvement_verdict(verdict, baseline, candidate, self.policy.judge)
        else:
            # A PASS on one server start a side that a restart offset could explain is not kept on its word: a
            # final INCONCLUSIVE, decided over server starts (``starts.pass_robust``).
            verdict = recheck_pass(verdict, baseline, candidate, self.policy.judge, noise, restart)
        rows = tuple(
            LevelRow(lv.concurrency, _mean(baseline, lv.concurrency), _mean(candidate, lv.concurrency),
                     _change(lv), lv.state, lv.reason)
            for lv in verdict.levels
        )
        # The noise the verdict rests on closes its reasons: printed, stored with the release; the record
        # (``Verdict.to_dict``) carries it as data (``noise``) for --json and the reports.
        in_force = (verdict.noise.describe(),) if verdict.noise is not None else ()
        plan = self._over_starts_plan(verdict, baseline, candidate, noise, restart)
        return JudgeResult(verdict.outcome, tuple(verdict.reasons) + in_force,
                           tuple(sorted(verdict.more_trials.items())), rows, verdict.to_dict(), plan,
                           starts_a_side(len(critical_levels(self.policy.judge, baseline))))

    def _over_starts_plan(self, verdict: Verdict, baseline: BenchResult, candidate: BenchResult,
                          noise: Mapping[int, NoiseEstimate] | None, restart: RestartNoise | None
                          ) -> tuple[tuple[int, int], ...]:
        """The plan of the candidate's second start and the rollback's verification should ``verdict`` roll
        back and a restart offset could explain it; empty otherwise, and always for the canary's rollback trial (it fails a release merely not
        better, and its status quo is the conservative side)."""
        # The machine rolls back a verdict still asking for trials once its rounds are spent: it is final then.
        ending = replace(verdict, more_trials={})
        if self.improvement or not over_starts_needed(ending, baseline, candidate, self.policy.judge, noise, restart):
            return ()
        return tuple(sorted(verification_plan(self.policy.judge, baseline, candidate).items()))

    def over_starts(self, baselines: Sequence[BenchResult], candidates: Sequence[BenchResult],
                    noise: Mapping[int, NoiseEstimate] | None, restart: RestartNoise | None) -> StartsVerdict:
        return judge_over_starts(baselines, candidates, self.policy.judge, noise, restart)

    def drift(self, pre: BenchResult, verify: BenchResult, candidate: BenchResult | None = None,
              judged: JudgeOutcome | None = None) -> DriftResult:
        """The restored baseline against the one before; drifted, and with a ``judged`` PASS or FAIL of
        ``candidate`` to weigh, the A-B-A reading says whether that verdict stands (``deployctl.judge.aba``)."""
        from deployctl.judge.aba import aba_check
        from deployctl.judge.drift import drift_check

        verdict = drift_check(pre, verify, self.policy.judge)
        # The canary's rollback trial (``improvement``) fails a release that is merely not better: "not
        # worse than the restored baseline" does not make that FAIL doubtful, and its status quo (the
        # degraded release stays, alerted) is the conservative side either way.
        if not verdict.drift or candidate is None or judged not in (JudgeOutcome.PASS, JudgeOutcome.FAIL) or self.improvement:
            return DriftResult(bool(verdict.drift), tuple(verdict.reasons))
        aba = aba_check(candidate, verify, judged, self.policy.judge)
        return DriftResult(True, tuple(verdict.reasons) + aba.reasons, in_doubt=not aba.stands)


def _mean(result: BenchResult, c: int) -> float | None:
    level = result.level(c)
    values = [t.output_tok_s for t in level.trials if t.valid] if level else []
    return mean(values) if values else None


def _change(level_verdict: Any) -> float | None:
    for check in level_verdict.checks:
        if check.interval is not None:
            return float(check.interval.change) * 100
    return None


class LiveHostFacts:
    """Today's server and GPUs for a baseline's fingerprint: the version ``GET /server_info`` states, and
    the GPUs through the host-facts path (NVML, or a simulated host's simulator)."""

    def __init__(self, site: Site) -> None:
        self.site = site

    async def server_facts(self, url: str) -> ServerFacts:
        from deployctl.adapters.http_control import ControlClient, ServerUnreachable
        from deployctl.preflight.hostfacts import local_speed_facts
        from deployctl.startup.version import server_info_version

        try:
            async with ControlClient(url) as control:
                version = server_info_version(await control.server_info())
        except ServerUnreachable:
            version = None  # the startup log's version (or range) stands in
        gpus = await asyncio.to_thread(local_speed_facts, url if self.site.simulated else None)
        return ServerFacts(version, gpus.model, gpus.driver, gpus.power_limit_w, gpus.clocks_policy)


class LivePreflight:
    def __init__(self, site: Site, profile: str) -> None:
        self.site = site
        self.profile = profile

    async def check(self, plan: Plan) -> PreflightResult:
        from deployctl.preflight.run import run_preflight

        report = run_preflight(self.site.inv, self.site.name, self.profile, default_python=self.site.default_python)
        errors = tuple(_finding(f) for f in report.findings if f.level == "ERROR")
        warnings = tuple(_finding(f) for f in report.findings if f.level == "WARN")
        return PreflightResult(errors, warnings)


def _finding(f: Any) -> str:
    return f"{f.message} [{f.code}]" + (f" (hint: {f.hint})" if f.hint else "")


@contextlib.asynccontextmanager
async def live_adapters(site: Site, profile: str | None, progress: Progress | None = None, *, preflight: bool = True,
                        guard: Guard | None = None, improvement: bool = False) -> AsyncIterator[Adapters]:
    systemd = await site.endpoint.connect()
    try:
        yield Adapters(
            units=LiveUnits(systemd, site, on_progress=guard.renew if guard is not None else None),
            bench=LiveBench(site, systemd, getattr(progress, "detail", None),
                            on_progress=guard.renew if guard is not None else None),
            judge=LiveJudge(site.policy, improvement=improvement),
            preflight=LivePreflight(site, profile or "") if preflight and profile else _NoPreflight(),
            startup=LiveStartup(systemd, site),
            progress=progress or QuietProgress(),
            host=LiveHostFacts(site),
            guard=guard,
            outputs=LiveOutputs(site.api_key()),
        )
    finally:
        await systemd.close()


class _NoPreflight:
    async def check(self, plan: Plan) -> PreflightResult:
        return PreflightResult()
