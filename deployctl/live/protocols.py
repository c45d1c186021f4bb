"""What the promote runner needs from the outside world: one small protocol per kind of action.

``deployctl.live.bindings`` binds them to the real modules; tests script them (tests/support/promote.py).
They speak the promote's evidence types (``deployctl.decisions.evidence``), never dicts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, Sequence

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import OutputGatePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.stats import NoiseEstimate, RestartNoise
from deployctl.outputgate.record import Measured, ReferenceSet
from deployctl.decisions import machine as m
from deployctl.decisions.canary import ServerStart
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

if TYPE_CHECKING:  # an annotation only: the judge over server starts (scipy) is the binding's, not the protocol's
    from deployctl.judge.starts import StartsVerdict

log = logging.getLogger("deployctl")


class Units(Protocol):
    async def install_trial(self, name: str, text: str) -> str: ...  # returns where it went
    async def keep(self, name: str, candidate_hash: str) -> str: ...
    async def restore(self, name: str, known_good_text: str | None, known_good_hash: str | None) -> str: ...
    async def restart_and_wait(self, name: str, timeout_s: float, *, fresh_start: bool = False) -> StartOutcome: ...


class Bench(Protocol):
    async def healthy(self, url: str) -> bool: ...  # GET /health answers 200 (within a few seconds)
    async def sweep(self, url: str, levels: Sequence[int] | None, trials: Mapping[int, int] | int) -> BenchResult: ...
    def merge(self, a: BenchResult, b: BenchResult) -> BenchResult: ...


class Judge(Protocol):
    def gates(self, baseline: StartupReport | None, candidate: StartupReport) -> GateResult: ...
    def judge(
        self, baseline: BenchResult, candidate: BenchResult, noise: Mapping[int, NoiseEstimate] | None = None,
        *, restart: RestartNoise | None = None,
    ) -> JudgeResult: ...
    def drift(self, pre: BenchResult, verify: BenchResult, candidate: BenchResult | None = None,
              judged: JudgeOutcome | None = None) -> DriftResult: ...
    def over_starts(self, baselines: Sequence[BenchResult], candidates: Sequence[BenchResult],
                    noise: Mapping[int, NoiseEstimate] | None, restart: RestartNoise | None) -> StartsVerdict: ...


class Preflight(Protocol):
    async def check(self, plan: Plan) -> PreflightResult: ...


class Startup(Protocol):
    async def live_report(self, name: str) -> StartupReport | None: ...
    async def live_start(self, name: str) -> ServerStart | None: ...  # the running unit's start (the canary)
    def diff(self, baseline: StartupReport | None, candidate: StartupReport, plan: Plan) -> tuple[str, ...]: ...


class HostFacts(Protocol):
    async def server_facts(self, url: str) -> ServerFacts: ...  # the version it states, its GPUs


class UnknownHost:
    """Knows nothing of the host: no stored baseline is ever reused (an unknown fact never matches)."""

    async def server_facts(self, url: str) -> ServerFacts:
        return ServerFacts()


class Outputs(Protocol):
    """The output gate's probes (deployctl.live.output_gate): a server's reference answers, its scores of them."""

    async def reference(self, url: str, policy: OutputGatePolicy, key: str) -> ReferenceSet: ...
    async def measure(self, url: str, policy: OutputGatePolicy, refs: ReferenceSet, *, answers: bool) -> Measured: ...


class Guard(Protocol):
    """The dead-man's switch (deployctl.operations.dead_man): armed once a candidate is installed, disarmed at the end."""

    async def arm(self, release_id: int) -> str: ...
    def renew(self) -> None: ...  # progress: a step, a finished request (cheap, called often)
    async def disarm(self) -> None: ...


class Progress(Protocol):
    def step(self, phase: m.Phase, text: str) -> None: ...


class QuietProgress:
    def step(self, phase: m.Phase, text: str) -> None:
        log.info("%s: %s", phase.value, text)


@dataclass
class Adapters:
    units: Units
    bench: Bench
    judge: Judge
    preflight: Preflight
    startup: Startup
    progress: Progress = field(default_factory=QuietProgress)
    host: HostFacts = field(default_factory=UnknownHost)
    clock: Callable[[], float] = time.monotonic
    guard: Guard | None = None
    outputs: Outputs | None = None  # None: this caller has no output gate (Limits.output_gate stays off)


# --- the evidence a promote gathers --------------------------------------------------------------
