"""The continuous-batching engine on its virtual clock (fast: large time scale).

Durations are asserted on the engine's own clock (``Engine.simulated_s``); the wall clock is bounded from
below only, since a loaded host can stretch it without limit but the scale never lets it run ahead.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from deployctl.sim.engine import Engine, Request
from deployctl.sim.throughput import PerfModel

PERF = PerfModel(points=((1, 100.0), (8, 400.0)), prefill_tok_s=10000.0, accept_length=1.0, factor=1.0,
                 idle_w=80, load_w=250, power_limit_w=600, power_factor=1.0)


async def _serve(engine: Engine, requests: list[Request]) -> float:
    loop = asyncio.get_running_loop()
    engine.start()
    start = loop.time()
    for req in requests:
        engine.submit(req)
    for req in requests:
        while not req.finished:
            await req.wait_change()
    await engine.stop()
    return loop.time() - start


async def test_running_requests_are_capped_and_the_rest_queue() -> None:
    engine = Engine(PERF, max_running=2, chunked_prefill=8192, time_scale=100)
    reqs = [Request(prompt_tokens=10, max_tokens=50, stream=False) for _ in range(4)]
    wall = await _serve(engine, reqs)
    assert all(r.generated == 50 for r in reqs)
    # two waves of 49 decode steps at batch 2 (2 / 142.9 tok/s = 14 ms each) + 4 prefills = 1.39 s simulated
    assert engine.simulated_s == pytest.approx(1.39, rel=0.01)
    assert wall >= 0.0125


async def test_kv_pool_limits_admission_too() -> None:
    # 120 KV tokens hold two requests of 10 + 50: four waves instead of one batch of eight
    engine = Engine(PERF, max_running=8, chunked_prefill=8192, time_scale=100, kv_tokens=120)
    await _serve(engine, [Request(prompt_tokens=10, max_tokens=50, stream=False) for _ in range(8)])
    free = Engine(PERF, max_running=8, chunked_prefill=8192, time_scale=100)
    await _serve(free, [Request(prompt_tokens=10, max_tokens=50, stream=False) for _ in range(8)])
    assert engine.simulated_s > 2 * free.simulated_s


async def test_streams_wake_per_step_and_aborts_free_their_slot() -> None:
    engine = Engine(PERF, max_running=1, chunked_prefill=8192, time_scale=1000)
    engine.start()
    gone = Request(prompt_tokens=10, max_tokens=10_000, stream=True)
    engine.submit(gone)
    await gone.wait_change()
    engine.abort(gone)
    nxt = Request(prompt_tokens=10, max_tokens=5, stream=True)
    engine.submit(nxt)
    seen = []
    while not nxt.finished:
        await nxt.wait_change()
        seen.append(nxt.generated)
    await engine.stop()
    assert seen[-1] == 5 and len(seen) >= 2


async def test_serving_lines_prefill_each_step_and_decode_every_interval() -> None:
    from deployctl.sim import cli
    from deployctl.sim.batchlog import BatchLog
    from deployctl.sim.resolve import resolve
    from deployctl.sim.world import host_from_env

    argv = ["--model-path", "lukealonso/GLM-5-NVFP4", "--tp", "8", "--decode-log-interval", "10"]
    resolved = resolve("0.5.9", cli.parse("0.5.9", argv), host_from_env({}), {})
    lines: list[str] = []
    engine = Engine(PERF, max_running=8, chunked_prefill=8192, time_scale=1000,
                    log=BatchLog(resolved, lambda rank, text: lines.append(f"TP{rank} {text}")))
    await _serve(engine, [Request(prompt_tokens=100, max_tokens=31, stream=False) for _ in range(2)])
    prefill = [l for l in lines if "Prefill batch" in l]
    decode = [l for l in lines if "Decode batch" in l]
    assert prefill[0].startswith("TP0 Prefill batch, #new-seq: 2, #new-token: 200, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): ")
    assert len(decode) == 3
    assert decode[0].startswith("TP0 Decode batch, #running-req: 2, #token: 222, token usage: 0.00, cuda graph: True, gen throughput (token/s): ")


async def test_swing_takes_its_factors_in_turn_per_block_of_requests() -> None:
    # Blocks of two requests at 1, 0.5, 0.25, then 1 again: each block's model time doubles, then resets.
    engine = Engine(replace(PERF, swing=(1.0, 0.5, 0.25), swing_every=2), max_running=2, chunked_prefill=8192,
                    time_scale=1000)
    times = []
    for _ in range(4):
        before = engine.simulated_s
        await _serve(engine, [Request(prompt_tokens=10, max_tokens=50, stream=False) for _ in range(2)])
        times.append(engine.simulated_s - before)
    assert times[1] == pytest.approx(2 * times[0]) and times[2] == pytest.approx(4 * times[0])
    assert times[3] == pytest.approx(times[0])


async def test_a_batch_stall_admits_the_batch_s_tail_late_while_its_head_decodes_at_its_pace() -> None:
    # chunked prefill of 40 tokens admits 4 of the 8 requests first (the head); the tail waits 0.9 s more.
    def wave() -> list[Request]:
        return [Request(prompt_tokens=10, max_tokens=100, stream=True) for _ in range(8)]

    clean = Engine(PERF, max_running=8, chunked_prefill=40, time_scale=100)
    await _serve(clean, wave())
    stalled = Engine(PERF, max_running=8, chunked_prefill=40, time_scale=10, stall_rate=1.0, stall_s=0.9)
    reqs = wave()
    await _serve(stalled, reqs)
    assert all(r.generated == 100 for r in reqs)
    firsts = sorted(r.first_token_at for r in reqs)
    # The tail's first tokens came 0.9 simulated s after the head's (the head's stamps may run a little late).
    assert firsts[4] - firsts[3] >= 0.8 * 0.9 / 10
    assert stalled.simulated_s > clean.simulated_s  # the head decoded alone meanwhile: smaller batches
    never = Engine(PERF, max_running=8, chunked_prefill=40, time_scale=100, stall_rate=0.0, stall_s=0.9)
    await _serve(never, wave())
    assert never.simulated_s == pytest.approx(clean.simulated_s)
