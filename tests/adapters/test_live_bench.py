"""Promote's benchmark adapter: per-trial GPU telemetry from the simulator's endpoint, retractions from the
unit's journal, raw samples kept with the result — against a fake SGLang server, no systemd."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

from aiohttp import web
from support.sglang import FakeSglang, small_policy

from deployctl.bench.metrics import RETRACT_MARKER
from deployctl.inventory.policy import Policy
from deployctl.load.measure import LiveBench
from deployctl.startup.journal_line import JournalLine

SIM_GPU = {"index": 0, "name": "NVIDIA RTX PRO 6000", "power_w": 250.0, "power_limit_w": 600.0,
           "sm_util_pct": 61.0, "mem_used_gb": 80.0, "mem_total_gb": 96.0}


@dataclass
class SimServer(FakeSglang):
    sent_at: list[float] = field(default_factory=list)

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/sim/telemetry", self.telemetry)
        return app

    async def telemetry(self, request: web.Request) -> web.Response:
        return web.json_response({"simulated": True, "gpus": [SIM_GPU]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        self.sent_at.append(time.time())
        return await super().completions(request)


class FakeJournal:
    def __init__(self, server: SimServer, retract_at_request: int) -> None:
        self.server, self.at = server, retract_at_request
        self.read_ids: list[str] = []

    async def read(self, invocation_id: str, *, last: int | None = None, since: float | None = None,
                   until: float | None = None) -> list[JournalLine]:
        """Like the real journal: only the lines stamped in [since, until] when a window is asked for."""
        self.read_ids.append(invocation_id)
        lines = [JournalLine(self.server.sent_at[0] - 60, f"[TP0] {RETRACT_MARKER} (before the sweep)"),
                 JournalLine(time.time(), "Started sglang.service", from_manager=True)]
        if len(self.server.sent_at) > self.at:
            lines.append(JournalLine(self.server.sent_at[self.at] + 0.01, f"[TP0] {RETRACT_MARKER} #retracted_reqs: 2"))
        return [line for line in lines if (since is None or line.ts >= since) and (until is None or line.ts <= until)]


class FakeSystemd:
    async def unit_state(self, unit: str) -> SimpleNamespace:
        return SimpleNamespace(main_pid=os.getpid(), invocation_id="0123456789abcdef0123456789abcdef")


async def test_each_trial_carries_simulated_telemetry_and_a_retraction_invalidates_its_trial(serve) -> None:
    server = SimServer(step_s=0.06)  # 20 tokens ≈ 1.2 s a request: a trial spans a couple of 0.5 s samples
    url = await serve(server)
    journal = FakeJournal(server, retract_at_request=2)  # the first request of the second trial
    policy = Policy(bench=small_policy(concurrency=[2], requests_per_level=2, warmup_requests=0))
    site = SimpleNamespace(policy=policy, simulated=True, unit="sglang-x.service", api_key=lambda: None,
                           endpoint=SimpleNamespace(journal=lambda: journal))
    said: list[str] = []
    result = await LiveBench(site, FakeSystemd(), said.append).sweep(url, None, 2)
    first, second = result.level(2).trials
    assert first.valid, first.invalid_reason
    assert second.invalid_reason == f"server retracted requests: 1 '{RETRACT_MARKER}' log lines"
    assert first.telemetry.source == "simulated" and first.telemetry.gpu_power_w == 250.0
    assert first.telemetry.process_count is not None  # the unit's MainPID tree (here: this process)
    assert "GPU power 250 W of 600 W (42 %), SM 61 % (simulated)" in said[0]
    trials = [line.split(":")[0] for line in said if line.startswith("C=")]
    assert trials == ["C=2 trial 1 of 2", "C=2 trial 2 of 2"]  # which of how many planned
    assert result.telemetry_samples and result.telemetry_samples[0]["gpus"][0]["power_w"] == 250.0
    assert journal.read_ids and not any("unavailable" in s for s in said)
