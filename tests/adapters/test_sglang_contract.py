"""The load client's fake SGLang and the simulator agree: one list of scenarios, run by the product's sweep
(``deployctl.load.sweep.run_sweep`` over the load client) against ``FakeSglang`` (tests/support/sglang.py, what
the load-client and benchmark tests use) and against the simulator, the SGLang stand-in of the system tests.

What is compared is what a benchmark reads from a server: the model it names, the requests' tokens (usage),
the capacity it states (``effective_max_running_requests_per_dp``), and how a server that answers 500 shows
up. Timing is not compared: the fake's and the simulator's speeds differ by design.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, Callable

import pytest
from support.sglang import FakeSglang, small_policy

from deployctl.load.sweep import run_sweep
from deployctl.sim.probe import launch, wait_ready

pytestmark = pytest.mark.timeout(60)

# GLM-5 decodes one token a step (no speculative decoding), as the fake sends one token a chunk.
GLM = ("--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --tp 8 --mem-fraction-static 0.92 "
       "--disable-cuda-graph --disable-radix-cache").split()
SIM_ENV = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "20", "SGLANG_SIM_NOISE": "0"}


@dataclass(frozen=True)
class Server:
    """A server as a scenario asks for it; each side builds it its own way."""

    capacity: int = 64
    failing: bool = False  # every generation request answers HTTP 500


@dataclass(frozen=True)
class Started:
    url: str
    model: str  # the name it serves under


@contextlib.asynccontextmanager
async def _fake(server: Server, serve: Callable, tmp_path: Path) -> AsyncIterator[Started]:
    fake = FakeSglang(capacity=server.capacity, fail_every=1 if server.failing else 0)
    yield Started(await serve(fake), "qwen3.5")


@contextlib.asynccontextmanager
async def _simulator(server: Server, serve: Callable, tmp_path: Path) -> AsyncIterator[Started]:
    env = {**SIM_ENV, **({"SGLANG_SIM_FAULT": "error_rate:1"} if server.failing else {})}
    sim = launch([*GLM, "--max-running-requests", str(server.capacity)], env, str(tmp_path))
    try:
        assert wait_ready(sim), sim.log()[-3000:]
        yield Started(sim.url, "glm-5")
    finally:
        sim.stop()


@pytest.fixture(params=[_fake, _simulator], ids=["fake", "simulator"])
def start(request: pytest.FixtureRequest, serve: Callable, tmp_path: Path) -> Callable:
    return lambda server: request.param(server, serve, tmp_path)


async def test_every_stream_is_read_whole_with_its_usage(start) -> None:
    async with start(Server()) as server:
        result = await run_sweep(server.url, small_policy(), seed=1)
    assert result.model == server.model
    assert [lv.concurrency for lv in result.levels] == [1, 4]
    c4 = result.level(4).trials[0]
    assert c4.valid, c4.invalid_reason
    assert (c4.requests_ok, c4.requests_failed, c4.output_tokens) == (8, 0, 160)
    assert all(s.token_count_source == "usage" and s.output_tokens == 20 and s.itl_s for s in c4.samples)
    assert c4.client["peak_streaming"] == 4


async def test_a_capacity_below_the_concurrency_is_read_and_noted(start) -> None:
    async with start(Server(capacity=2)) as server:
        result = await run_sweep(server.url, small_policy(concurrency=[2, 4]))
    assert result.level(2).trials[0].valid and result.level(2).trials[0].notes == ()
    c4 = result.level(4).trials[0]
    assert c4.valid, c4.invalid_reason
    assert "it runs at most 2 requests at once" in c4.notes[0]


async def test_a_server_answering_500_makes_failures_not_tokens(start) -> None:
    async with start(Server(failing=True)) as server:
        trial = (await run_sweep(server.url, small_policy(concurrency=[2], warmup_requests=0))).levels[0].trials[0]
    assert trial.failures == {"http_500": 4} and trial.requests_ok == 0 and trial.output_tokens == 0
    assert not trial.valid and trial.invalid_reason.startswith("failures: 4 of 4 requests failed")
