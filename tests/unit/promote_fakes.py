"""Scripted stand-ins for the runner's protocols, small enough to read in one screen."""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.inventory.policy import BenchPolicy, JudgePolicy, Policy
from deployctl.live.runner import Adapters
from deployctl.promote.evidence import (
    DriftResult,
    GateResult,
    JudgeResult,
    Plan,
    PreflightResult,
    StartOutcome,
)

POLICY = Policy(bench=BenchPolicy(concurrency=[1, 64]), judge=JudgePolicy(min_trials=1), verify_concurrency=[1])
READY = StartOutcome(True, "ready", startup={"max_running_requests": 48, "sglang_version": "0.5.10"}, wait_s=2.0)


def bench(tok_s: Mapping[int, float], trials: int = 1, ok: int = 4) -> BenchResult:
    p = Percentiles(1.0, 1.0, 1.0, 1.0)
    levels = tuple(
        LevelResult(c, tuple(
            TrialResult(c, t, 0.0, 1.0, ok, 0 if ok else 4, int(v), 0, v, 0.0, p, p, p, p, p,
                        failures={} if ok else {"connect": 4})
            for t in range(trials)))
        for c, v in tok_s.items()
    )
    return BenchResult("http://x", "m", 1000, 1000, 0.0, levels)


def plan(**kw: Any) -> Plan:
    args = dict(deployment="qwen", profile="candidate", unit_name="sglang-qwen.service",
                candidate_text="[Service]\nExecStart=/x --new\n", candidate_hash="new",
                known_good_text="[Service]\nExecStart=/x\n", known_good_hash="old", url="http://127.0.0.1:1",
                policy=POLICY, host="h1")
    args.update(kw)
    return Plan(**args)


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

    async def keep(self, name: str) -> str:
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
        return self.results.pop(0)

    def merge(self, a: BenchResult, b: BenchResult) -> BenchResult:
        return b


class FakeJudge:
    def __init__(self, verdicts: Sequence[JudgeResult] = (), gates: GateResult = GateResult(True),
                 drift: DriftResult = DriftResult(False)):
        self.verdicts = list(verdicts)
        self._gates = gates
        self._drift = drift

    def gates(self, baseline: Any, candidate: Any) -> GateResult:
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
    async def live_report(self, name: str) -> Mapping[str, Any] | None:
        return {"max_running_requests": 48, "sglang_version": "0.5.10"}

    def diff(self, baseline: Any, candidate: Any, plan: Plan) -> tuple[str, ...]:
        if baseline and baseline.get("max_running_requests") != candidate.get("max_running_requests"):
            return (f"max_running_requests {baseline['max_running_requests']} → {candidate['max_running_requests']}",)
        return ()


class Steps:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def step(self, phase: Any, text: str) -> None:
        self.lines.append(f"{phase.value}: {text}")


def adapters(units=None, bench_=None, judge=None, preflight=None) -> Adapters:
    return Adapters(
        units=units or FakeUnits(),
        bench=bench_ or FakeBench([bench({1: 120, 64: 1500}), bench({1: 121, 64: 1510}), bench({1: 120})]),
        judge=judge or FakeJudge([JudgeResult("PASS", ("within noise",))]),
        preflight=preflight or FakePreflight(),
        startup=FakeStartup(),
        progress=Steps(),
    )
