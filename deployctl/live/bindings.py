"""The runner's protocols bound to the real modules: systemd, unit files, journal, startup parser, load
engine, judge, gates, pre-flight. Each class is a thin translation into the runner's plain values; the
modules' own APIs stay theirs. ``live_adapters(site, profile)`` builds the set a promote runs with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from statistics import mean
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

from deployctl.adapters.journal import Journal
from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import unit_sha256
from deployctl.bench.result import BenchResult
from deployctl.errors import DeployctlError, SystemdError
from deployctl.inventory.policy import Policy
from deployctl.live.restart import http_health_probe, restart_and_wait
from deployctl.live.runner import Adapters, Guard, Progress, QuietProgress
from deployctl.promote.evidence import (
    DriftResult,
    GateResult,
    JudgeResult,
    LevelRow,
    Plan,
    PreflightResult,
    StartOutcome,
)
from deployctl.judge.stats import NoiseEstimate
from deployctl.startup.parser import StartupReport, parse_lines

log = logging.getLogger("deployctl")
from deployctl.live.site import Site

log = logging.getLogger("deployctl")


class LiveUnits:
    def __init__(self, systemd: Systemd, site: Site) -> None:
        self.systemd = systemd
        self.site = site
        self.files = site.unit_files()
        self.journal: Journal = site.endpoint.journal()

    async def install_trial(self, name: str, text: str) -> str:
        installed = self.files.install_trial(name, text, adopt=True)
        await self.systemd.reload()
        return str(installed.path)

    async def keep(self, name: str) -> str:
        if self.files.trial(name) is not None:
            installed = self.files.keep(name)
            where = str(installed.path)
        else:  # a keep resumed after a crash may find the trial already persisted
            where = str(self.files.unit_dir / name)
        await self.systemd.reload()
        return f"persisted to {where}"

    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str:
        done = []
        if self.files.discard_trial(name):
            done.append("removed the trial")
        current = self.files.known_good(name)
        if known_good_hash and (current is None or current.sha256 != known_good_hash):
            # The known-good file itself was replaced (a keep cut short, a hand edit): put it back.
            texts = (known_good_text, self.files.previous(name))
            text = next((t for t in texts if t and unit_sha256(t) == known_good_hash), None)
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
        report = await restart_and_wait(self.systemd, self.journal, name, timeout_s=timeout_s,
                                        probe=http_health_probe(self.site.url + "/health"))
        startup = parse_lines(line.text for line in report.log if not line.from_manager)
        if report.outcome.ok and not startup.ready and report.invocation_id:
            startup = await self._complete_log(report.invocation_id)
        return start_outcome(report.outcome, startup)

    async def _complete_log(self, invocation_id: str, settle_s: float = 3.0) -> StartupReport:
        """The whole startup log once /health answered first: the journal may lag the ready line a little."""
        deadline = asyncio.get_running_loop().time() + settle_s
        while True:
            lines = await self.journal.read(invocation_id)
            startup = parse_lines(line.text for line in lines if not line.from_manager)
            if startup.ready or asyncio.get_running_loop().time() >= deadline:
                return startup
            await asyncio.sleep(0.1)


def start_outcome(outcome: Any, startup: StartupReport) -> StartOutcome:
    """The readiness outcome in the runner's words, with the server's own reason when it gave one."""
    data = startup.to_dict()
    last = tuple(getattr(outcome, "last_lines", ()) or ())
    if outcome.ok:
        return StartOutcome(True, "ready", f"ready via {outcome.via}", (), data, outcome.elapsed_s)
    failure = startup.failure
    if outcome.kind == "timeout":
        where = outcome.last_line or "(no output)"
        message = f"not ready after {outcome.elapsed_s:.0f} s; last line: {where}"
    else:
        message = outcome.reason
    if failure is not None:
        message = f"{failure.message} — {message}"
    return StartOutcome(False, outcome.kind, message, last, data, outcome.elapsed_s)


class LiveStartup:
    def __init__(self, systemd: Systemd, site: Site) -> None:
        self.systemd = systemd
        self.site = site
        self.journal = site.endpoint.journal()

    async def live_report(self, name: str) -> Mapping[str, Any] | None:
        state = await self.systemd.unit_state(name)
        if not state.invocation_id or state.active_state != "active":
            return None
        lines = await self.journal.read(state.invocation_id)
        return parse_lines(line.text for line in lines if not line.from_manager).to_dict()

    def diff(self, baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any], plan: Plan) -> tuple[str, ...]:
        from deployctl.startup.diff import diff_startups

        if baseline is None:
            return ()
        host = self.site.inv.host_of(self.site.deployment)
        changes = diff_startups(StartupReport.from_dict(baseline), StartupReport.from_dict(candidate),
                                profile_diff=plan.profile_diff_data, host=host)
        return tuple(change.text for change in changes)


class LiveBench:
    """Sweeps with the server's GPU/process telemetry attached to each trial and its journal read for
    retractions; the raw telemetry samples travel with the result (``BenchResult.telemetry_samples``)
    into the ledger."""

    def __init__(self, site: Site, systemd: Systemd | None = None, note: Callable[[str], None] | None = None) -> None:
        self.site = site
        self.policy = site.policy
        self.systemd = systemd
        self.journal: Journal = site.endpoint.journal()
        self.note = note
        self._said_unavailable = False

    def _progress(self, p: Any) -> None:
        """One line per finished trial, so a long sweep shows it is moving."""
        from deployctl.bench.telemetry import render_telemetry

        if self.note is not None and p.result is not None:
            t = p.result
            invalid = f", not judged: {t.invalid_reason}" if t.invalid_reason else ""
            power = render_telemetry(t.telemetry)
            self.note(f"C={t.concurrency} trial {t.trial + 1}: {t.output_tok_s:.1f} tok/s, "
                      f"{t.requests_ok} ok, {t.requests_failed} failed{invalid}" + (f"; {power}" if power else ""))
            for n in t.notes:
                self.note(f"  note: {n}")

    def _say(self, text: str) -> None:
        if self.note is not None:
            self.note(text)
        else:
            log.info("%s", text)

    async def healthy(self, url: str, *, within_s: float = 5.0) -> bool:
        probe = http_health_probe(url + "/health")
        deadline = asyncio.get_running_loop().time() + within_s
        while not await probe():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    async def sweep(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> BenchResult:
        from deployctl.bench.result import merge_results
        from deployctl.bench.telemetry import samples_to_dicts
        from deployctl.live.sweep import run_sweep
        from deployctl.live.telemetry import TelemetrySampler

        if isinstance(trials, int):
            parts: list[tuple[Sequence[int] | None, int]] = [(levels, trials)]
        else:
            by_count: dict[int, list[int]] = {}
            for c, n in trials.items():
                by_count.setdefault(n, []).append(c)
            parts = [(cs, n) for n, cs in sorted(by_count.items())]
        main_pid, invocation_id = await self._unit()
        sampler = TelemetrySampler.for_server(url, simulated=self.site.simulated, pid=main_pid)
        if sampler.unavailable and not self._said_unavailable:
            self._said_unavailable = True
            self._say(f"GPU telemetry unavailable: {sampler.unavailable}")
        server_log = self._server_log(invocation_id) if invocation_id else None
        result: BenchResult | None = None
        sampler.start()
        try:
            for cs, n in parts:
                part = await run_sweep(url, self.policy.bench, levels=cs, trials=n, progress=self._progress,
                                       telemetry=sampler.window, server_log=server_log)
                result = part if result is None else merge_results(result, part)
        finally:
            samples = await asyncio.to_thread(sampler.stop)  # joins the sampling thread
        assert result is not None
        return replace(result, telemetry_samples=tuple(samples_to_dicts(samples)))

    async def _unit(self) -> tuple[int | None, str | None]:
        """The unit's MainPID (its process tree is sampled) and invocation (whose journal is read)."""
        if self.systemd is None:
            return None, None
        state = await self.systemd.unit_state(self.site.unit)
        return state.main_pid or None, state.invocation_id or None

    def _server_log(self, invocation_id: str) -> Callable[[float, float], Any]:
        said: list[str] = []

        async def lines(start: float, end: float) -> list[str] | None:
            """The server's own lines stamped in [start, end]; None (not judged on) when unreadable."""
            try:
                entries = await self.journal.read(invocation_id)
            except (DeployctlError, OSError) as exc:
                if not said:
                    said.append(str(exc))
                    self._say(f"cannot read the server's journal, so retractions are not checked: {exc}")
                return None
            return [e.text for e in entries if not e.from_manager and start <= e.ts <= end]

        return lines

    def merge(self, a: BenchResult, b: BenchResult) -> BenchResult:
        from deployctl.bench.result import merge_results

        return merge_results(a, b)


class LiveJudge:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def gates(self, baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any]) -> GateResult:
        from deployctl.judge.gates import check_startup_gates

        verdict = check_startup_gates(StartupReport.from_dict(baseline) if baseline else None,
                                      StartupReport.from_dict(candidate), self.policy.gates)
        return GateResult(bool(verdict.passed), tuple(verdict.failures))

    def judge(
        self, baseline: BenchResult, candidate: BenchResult, noise: Mapping[int, NoiseEstimate] | None = None
    ) -> JudgeResult:
        from deployctl.judge.verdict import judge

        verdict = judge(baseline, candidate, self.policy.judge, noise)
        rows = tuple(
            LevelRow(lv.concurrency, _mean(baseline, lv.concurrency), _mean(candidate, lv.concurrency),
                     _change(lv), lv.state.value, lv.reason)
            for lv in verdict.levels
        )
        return JudgeResult(verdict.outcome.value, tuple(verdict.reasons), tuple(sorted(verdict.more_trials.items())), rows)

    def drift(self, pre: BenchResult, verify: BenchResult) -> DriftResult:
        from deployctl.judge.verdict import drift_check

        verdict = drift_check(pre, verify, self.policy.judge)
        return DriftResult(bool(verdict.drift), tuple(verdict.reasons))


def _mean(result: BenchResult, c: int) -> float | None:
    level = result.level(c)
    values = [t.output_tok_s for t in level.trials if t.valid] if level else []
    return mean(values) if values else None


def _change(level_verdict: Any) -> float | None:
    for check in level_verdict.checks:
        if check.interval is not None:
            return float(check.interval.change) * 100
    return None


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
async def live_adapters(site: Site, profile: str | None, progress: Progress | None = None,
                        *, preflight: bool = True, guard: Guard | None = None) -> AsyncIterator[Adapters]:
    systemd = await site.endpoint.connect()
    try:
        yield Adapters(
            units=LiveUnits(systemd, site),
            bench=LiveBench(site, systemd, getattr(progress, "detail", None)),
            judge=LiveJudge(site.policy),
            preflight=LivePreflight(site, profile or "") if preflight and profile else _NoPreflight(),
            startup=LiveStartup(systemd, site),
            progress=progress or QuietProgress(),
            guard=guard,
        )
    finally:
        await systemd.close()


class _NoPreflight:
    async def check(self, plan: Plan) -> PreflightResult:
        return PreflightResult()
