"""Scripted stand-ins for the runner's protocols (``deployctl.live.protocols``), one screen: each records
its calls and answers from a script given to it."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Mapping, Sequence

from support.promote import READY, bench, plan, startup

from deployctl.bench.result import BenchResult, merge_results
from deployctl.errors import SystemdError, UnitNotFound
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import StartsVerdict
from deployctl.live.protocols import Adapters
from deployctl.decisions.evidence import (
    DriftResult,
    GateResult,
    JudgeResult,
    Plan,
    PreflightResult,
    ServerFacts,
    StartOutcome,
)
from deployctl.startup.parser import StartupReport
from deployctl.units.stamp import unit_hash


class FakeUnits:
    """systemd and the unit files as the runner's ``Units`` sees them, in memory, faithful to ``LiveUnits``:
    a persisted unit per name (/etc), a trial over it (/run), the backup a persist makes of what it replaced,
    and whether the unit runs. tests/system/test_units_contract.py runs the same scenarios on both.

    A restart starts the trial if there is one, else the persisted unit, and ends as that unit's text does:
    ``outcomes`` by text (a known-good whose port is held, a candidate that crashes), READY otherwise. The
    host starts with ``installed`` (default: the plan's known-good unit) and ``trials`` (default: none)."""

    def __init__(self, install_error: Exception | None = None, *, installed: Mapping[str, str] | None = None,
                 trials: Mapping[str, str] | None = None, outcomes: Mapping[str, StartOutcome] | None = None):
        self.calls: list[str] = []
        self.install_error = install_error
        self.fresh: list[bool] = []
        default = plan()
        self.persisted = dict({default.unit_name: default.known_good_text} if installed is None else installed)
        self.trials = dict(trials or {})
        self.backups: dict[str, str] = {}
        self.running: dict[str, bool] = {}
        self.outcomes = dict(outcomes or {})

    async def install_trial(self, name: str, text: str) -> str:
        self.calls.append("install_trial")
        if self.install_error:
            raise self.install_error
        self.trials[name] = text
        return f"/run/systemd/system.control/{name}"

    async def keep(self, name: str, candidate_hash: str) -> str:
        self.calls.append("keep")
        trial = self.trials.get(name)
        if trial is None:
            if name in self.persisted and unit_hash(self.persisted[name]) == candidate_hash:
                return f"persisted to /etc/systemd/system/{name}"  # a keep cut short after its write
            raise SystemdError(f"no trial of {name} to keep, and the persisted unit is not the candidate",
                               hint="the candidate is not kept; promote it again to try it")
        if unit_hash(trial) != candidate_hash:
            raise SystemdError(f"the trial of {name} is not the planned candidate", hint="promote the profile again")
        self._persist(name, trial)
        del self.trials[name]
        return f"persisted to /etc/systemd/system/{name}"

    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str:
        self.calls.append("restore")
        done = ["removed the trial"] if self.trials.pop(name, None) is not None else []
        current = self.persisted.get(name)
        if known_good_hash and (current is None or unit_hash(current) != known_good_hash):
            texts = (known_good_text, self.backups.get(name))
            text = next((t for t in texts if t and unit_hash(t) == known_good_hash), None)
            if text is None:
                raise SystemdError(f"cannot find the known-good text of {name}", hint="`deployctl rollback --to ID`")
            self._persist(name, text)
            done.append("reinstalled the known-good unit")
        return ", ".join(done) or "the known-good unit was in place"

    async def restart_and_wait(self, name: str, timeout_s: float, *, fresh_start: bool = False) -> StartOutcome:
        self.calls.append("restart")
        self.fresh.append(fresh_start)
        text = self.installed(name)
        if text is None:
            raise UnitNotFound(f"{name} is not installed", hint="install its unit file, then daemon-reload")
        outcome = self.outcomes.get(text, READY)
        self.running[name] = outcome.ready
        return outcome

    def installed(self, name: str) -> str | None:
        """The text a start runs: the trial's, else the persisted one."""
        return self.trials.get(name) or self.persisted.get(name)

    def _persist(self, name: str, text: str) -> None:
        current = self.persisted.get(name)
        if current is not None and current != text:
            self.backups[name] = current
        self.persisted[name] = text


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
        return merge_results(a, b)


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
                 drift: DriftResult = DriftResult(False), starts: StartsVerdict | None = None):
        self.verdicts = list(verdicts)
        self._gates = gates
        self._drift = drift
        self._starts = starts
        self.drift_asked: list[tuple[BenchResult | None, Any]] = []  # (candidate, judged) of each drift check
        self.starts_asked: list[tuple[Sequence[BenchResult], Sequence[BenchResult]]] = []

    def gates(self, baseline: StartupReport | None, candidate: StartupReport) -> GateResult:
        return self._gates

    def judge(self, baseline: BenchResult, candidate: BenchResult, noise: Any = None, *,
              restart: Any = None) -> JudgeResult:
        self.noise, self.restart = noise, restart
        return self.verdicts.pop(0)

    def drift(self, pre: BenchResult, verify: BenchResult, candidate: BenchResult | None = None,
              judged: Any = None) -> DriftResult:
        self.drift_asked.append((candidate, judged))
        return self._drift

    def over_starts(self, baselines: Sequence[BenchResult], candidates: Sequence[BenchResult], noise: Any,
                    restart: Any) -> StartsVerdict:
        assert self._starts is not None, "the runner asked for a verdict over two starts nobody scripted"
        self.starts_asked.append((baselines, candidates))
        return self._starts


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
        judge=judge or FakeJudge([JudgeResult(JudgeOutcome.PASS, ("within noise",))]),
        preflight=preflight or FakePreflight(),
        startup=FakeStartup(),
        progress=Steps(),
        host=host or FakeHost(),
    )
