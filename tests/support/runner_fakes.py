"""Scripted stand-ins for the runner's protocols (``deployctl.live.protocols``), one screen: each records
its calls and answers from a script given to it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Mapping, Sequence

from support.promote import READY, bench, startup

from deployctl.bench.result import BenchResult
from deployctl.judge.outcome import Outcome
from deployctl.live.protocols import Adapters
from deployctl.promote.evidence import (
    DriftResult,
    GateResult,
    JudgeResult,
    Plan,
    PreflightResult,
    ServerFacts,
    StartOutcome,
)
from deployctl.startup.parser import StartupReport


class FakeUnits:
    def __init__(self, starts: Sequence[StartOutcome] = (READY, READY, READY), install_error: Exception | None = None):
        self.calls: list[str] = []
        self.starts = list(starts)
        self.install_error = install_error
        self.fresh: list[bool] = []

    async def install_trial(self, name: str, text: str) -> str:
        self.calls.append("install_trial")
        if self.install_error:
            raise self.install_error
        return f"/run/systemd/system.control/{name}"

    async def keep(self, name: str, candidate_hash: str) -> str:
        self.calls.append("keep")
        return f"/etc/systemd/system/{name}"

    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str:
        self.calls.append("restore")
        return "discarded the trial"

    async def restart_and_wait(self, name: str, timeout_s: float, *, fresh_start: bool = False) -> StartOutcome:
        self.calls.append("restart")
        self.fresh.append(fresh_start)
        return self.starts.pop(0)


class FakeBench:
    def __init__(self, results: Sequence[BenchResult], delay: float = 0.0, healthy: bool = True):
        self.results = list(results)
        self.calls: list[tuple[Any, Any]] = []
        self.delay = delay
        self._healthy = healthy

    async def healthy(self, url: str) -> bool:
        return self._healthy

    async def sweep(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> BenchResult:
        self.calls.append((levels, trials))
        if self.delay:
            await asyncio.sleep(self.delay)
        return with_trials(self.results.pop(0), trials)

    def merge(self, a: BenchResult, b: BenchResult) -> BenchResult:
        return b


def with_trials(result: BenchResult, trials: Mapping[int, int] | int) -> BenchResult:
    """The canned result with as many trials a level as asked (copies of its last one), as a sweep runs them."""
    if all(len(lv.trials) >= (trials if isinstance(trials, int) else trials.get(lv.concurrency, 0))
           for lv in result.levels):
        return result
    levels = []
    for lv in result.levels:
        n = trials if isinstance(trials, int) else trials.get(lv.concurrency, len(lv.trials))
        extra = tuple(replace(lv.trials[-1], trial=len(lv.trials) + i) for i in range(max(0, n - len(lv.trials))))
        levels.append(replace(lv, trials=lv.trials + extra))
    return replace(result, levels=tuple(levels))


class FakeJudge:
    def __init__(self, verdicts: Sequence[JudgeResult] = (), gates: GateResult = GateResult(True),
                 drift: DriftResult = DriftResult(False)):
        self.verdicts = list(verdicts)
        self._gates = gates
        self._drift = drift

    def gates(self, baseline: StartupReport | None, candidate: StartupReport) -> GateResult:
        return self._gates

    def judge(self, baseline: BenchResult, candidate: BenchResult, noise: Any = None) -> JudgeResult:
        self.noise = noise
        return self.verdicts.pop(0)

    def drift(self, pre: BenchResult, verify: BenchResult) -> DriftResult:
        return self._drift


class FakePreflight:
    def __init__(self, errors: Sequence[str] = ()):
        self.errors = tuple(errors)

    async def check(self, plan: Plan) -> PreflightResult:
        return PreflightResult(errors=self.errors)


class FakeStartup:
    def __init__(self, report: StartupReport | None = None) -> None:
        self.report = report or startup(48)

    async def live_report(self, name: str) -> StartupReport | None:
        return self.report

    def diff(self, baseline: StartupReport | None, candidate: StartupReport, plan: Plan) -> tuple[str, ...]:
        before, after = baseline.max_running_requests if baseline else None, candidate.max_running_requests
        return (f"max_running_requests {before} → {after}",) if baseline and before != after else ()


# A host that states everything a baseline's fingerprint needs.
KNOWN_HOST = ServerFacts(sglang_version="0.5.10", gpu_model="8× NVIDIA H200", gpu_driver="570.86.15",
                         power_limit_w=700.0, clocks_policy="default")


class FakeHost:
    def __init__(self, facts: ServerFacts = KNOWN_HOST) -> None:
        self.facts = facts

    async def server_facts(self, url: str) -> ServerFacts:
        return self.facts


class Steps:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, phase: Any, text: str) -> None:
        self.lines.append(f"{phase.value}: {text}")


def adapters(units=None, bench_=None, judge=None, preflight=None, host=None) -> Adapters:
    return Adapters(
        units=units or FakeUnits(),
        bench=bench_ or FakeBench([bench({1: 120, 64: 1500}), bench({1: 121, 64: 1510}), bench({1: 120})]),
        judge=judge or FakeJudge([JudgeResult(Outcome.PASS, ("within noise",))]),
        preflight=preflight or FakePreflight(),
        startup=FakeStartup(),
        progress=Steps(),
        host=host or FakeHost(),
    )
