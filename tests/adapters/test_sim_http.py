"""Through its HTTP API the simulator reproduces incident A's table and both incident candidates.

Runs use SGLANG_SIM_TIME_SCALE so a sweep takes seconds. Throughput is checked on the simulator's own
clock (``LevelResult.model_tok_s``): a loaded host stretches the wall clock, never the model's. The tok/s the
client saw (divided by the scale) is bounded from above only: load can only make it slower.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import aiohttp
import pytest

from deployctl.sim.probe import SimHandle, launch, run_level, wait_ready

QWEN = ("--model-path Qwen/Qwen3.5-122B-A10B --served-model-name qwen3.5-122b --tp 4 --mem-fraction-static 0.85 "
        "--attention-backend triton --speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4 --mamba-scheduler-strategy extra_buffer --reasoning-parser qwen3 "
        "--tool-call-parser qwen3_coder").split()
FUSION = ["--enable-fused-moe-sum-all-reduce", "--enable-flashinfer-allreduce-fusion"]
GLM = ("--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --reasoning-parser glm45 --tool-call-parser glm47 "
       "--trust-remote-code --tp 8 --mem-fraction-static 0.92 --max-running-requests 1024 --kv-cache-dtype auto "
       "--quantization modelopt_fp4 --attention-backend flashinfer --fp8-gemm-backend cutlass --nsa-decode-backend trtllm "
       "--nsa-prefill-backend trtllm --moe-runner-backend flashinfer_cutlass --disable-cuda-graph --disable-radix-cache").split()
BASE_ENV = {"SGLANG_ENABLE_SPEC_V2": "1", "SGLANG_SIM_SPEED": "0.2", "SGLANG_SIM_SEED": "7",
            "SGLANG_SIM_GPU_NAME": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "SGLANG_SIM_GPU_COUNT": "4"}
# The shared baseline's time scale: throughput is read on the simulator's clock, so only wall time shrinks. Not
# more: a loaded client sends a wave's requests late, and the engine steps the part-filled batch meanwhile (at
# 50, C=64 read -5.8 % in a fast loop at load 11; at 20, -3.3 % at most with two extra busy cores).
SCALE = 20
# incident A, baseline: concurrency -> (requests, aggregate tok/s)
INCIDENT_A = {1: (4, 121.6), 4: (8, 399.1), 16: (32, 1213.5), 32: (64, 1515.1), 64: (128, 1582.5)}


def _start(tmp: Path, flags: list[str], **env: str) -> SimHandle:
    sim = launch(flags, {**BASE_ENV, **env}, str(tmp))
    if not wait_ready(sim):
        sim.stop()  # a simulator that never got ready must not outlive the test
        pytest.fail(f"the simulator did not get ready:\n{sim.log()[-3000:]}")
    return sim


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    sim = _start(tmp_path_factory.mktemp("sim"), QWEN, SGLANG_SIM_TIME_SCALE=str(SCALE))
    yield sim
    sim.stop()


async def test_baseline_reproduces_the_incident_table_within_5_percent(baseline: SimHandle) -> None:
    for concurrency, (requests, expected) in INCIDENT_A.items():
        level = await run_level(baseline.url, concurrency, requests, stream=False)
        assert level.output_tokens == level.engine_tokens == requests * 1000
        assert abs(level.model_tok_s / expected - 1) <= 0.05, (concurrency, level.model_tok_s, expected)
        assert level.agg_tok_s / SCALE <= expected * 1.05, (concurrency, level.agg_tok_s / SCALE, expected)


async def test_streamed_level_matches_and_is_framed_like_sglang(baseline: SimHandle) -> None:
    level = await run_level(baseline.url, 4, 8, stream=True)
    assert abs(level.model_tok_s / INCIDENT_A[4][1] - 1) <= 0.05
    assert level.agg_tok_s / SCALE <= INCIDENT_A[4][1] * 1.05
    # speculative decoding: chunks carry several tokens (the accept length)
    assert level.chunks < level.output_tokens * 0.6
    body = {"model": "qwen3.5-122b", "prompt": "Hello there", "max_tokens": 6, "stream": True,
            "stream_options": {"include_usage": True}}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{baseline.url}/v1/completions", json=body) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            raw = (await resp.read()).decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-2]]
    assert all(e.startswith("data: ") for e in events[:-1])
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 2, "total_tokens": 8, "completion_tokens": 6, "reasoning_tokens": 0}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(c["object"] == "text_completion" and c["usage"] is None for c in chunks[:-1])
    assert "".join(c["choices"][0]["text"] for c in chunks[:-1])


async def test_chat_generate_and_info_endpoints(baseline: SimHandle) -> None:
    async with aiohttp.ClientSession() as session:
        chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        async with session.post(f"{baseline.url}/v1/chat/completions", json=chat) as resp:
            answer = await resp.json()
        assert answer["object"] == "chat.completion" and answer["usage"]["completion_tokens"] == 4
        gen = {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}}
        async with session.post(f"{baseline.url}/generate", json=gen) as resp:
            out = await resp.json()
        assert out["meta_info"]["prompt_tokens"] == 3 and out["meta_info"]["completion_tokens"] == 3
        async with session.get(f"{baseline.url}/v1/models") as resp:
            models = await resp.json()
        assert models["data"][0]["id"] == "qwen3.5-122b" and models["data"][0]["owned_by"] == "sglang"
        async with session.get(f"{baseline.url}/server_info") as resp:
            info = await resp.json()
        assert info["version"] == "0.5.10" and info["max_running_requests"] == 48
        assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 48
        async with session.get(f"{baseline.url}/sim/telemetry") as resp:
            telemetry = await resp.json()
        assert telemetry["simulated"] is True and len(telemetry["gpus"]) == 4
        assert set(telemetry["gpus"][0]) == {"index", "name", "power_w", "power_limit_w", "sm_util_pct", "mem_used_gb", "mem_total_gb"}
    assert '"POST /v1/chat/completions HTTP/1.1" 200 OK' in baseline.access_log()


async def test_fusion_candidate_reports_26_and_forced_fusion_costs_87_percent(baseline: SimHandle, tmp_path: Path) -> None:
    candidate = _start(tmp_path, QWEN + FUSION, SGLANG_SIM_TIME_SCALE="50")
    try:
        status, body = _get(f"{candidate.url}/server_info")
        assert status == 200
        assert json.loads(body)["internal_states"][0]["effective_max_running_requests_per_dp"] == 26
        assert "max_running_requests=26," in candidate.log()
    finally:
        candidate.stop()
    forced = _start(tmp_path, QWEN, SGLANG_SIM_TIME_SCALE="50", SGLANG_SIM_FORCE_AR_FUSION="1")
    try:
        slow = await run_level(forced.url, 16, 16, stream=False)
    finally:
        forced.stop()
    change = slow.model_tok_s / INCIDENT_A[16][1] - 1
    assert -0.90 <= change <= -0.84, change
    assert slow.agg_tok_s / 50 / INCIDENT_A[16][1] - 1 <= -0.84


async def test_glm5_reaches_about_1870_and_draws_about_250_w(tmp_path: Path) -> None:
    sim = _start(tmp_path, GLM, SGLANG_SIM_TIME_SCALE="20", SGLANG_SIM_GPU_COUNT="8")
    try:
        idle = json.loads(_get(f"{sim.url}/sim/telemetry")[1])["gpus"]
        running = asyncio.ensure_future(run_level(sim.url, 64, 192, stream=False))
        await asyncio.sleep(3.0)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{sim.url}/sim/telemetry") as resp:
                loaded = (await resp.json())["gpus"]
        level = await running
    finally:
        sim.stop()
    assert abs(level.model_tok_s / 1870 - 1) <= 0.06, level
    assert level.agg_tok_s / 20 <= 1870 * 1.06, level
    assert all(75 <= g["power_w"] <= 95 for g in idle)
    assert all(200 <= g["power_w"] <= 300 and g["power_limit_w"] == 600 for g in loaded), loaded


async def test_health_is_503_until_warmup_completes(tmp_path: Path) -> None:
    sim = launch(QWEN, {**BASE_ENV, "SGLANG_SIM_FAULT": "hang:warmup"}, str(tmp_path))
    try:
        for _ in range(200):
            try:
                status, _ = _get(f"{sim.url}/health")
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.05)
        assert status == 503
        assert _get(f"{sim.url}/model_info")[0] == 200
        assert "fired up" not in sim.log()
    finally:
        assert sim.stop() == 0


async def test_error_rate_and_crash_after(tmp_path: Path) -> None:
    sim = _start(tmp_path, QWEN, SGLANG_SIM_FAULT="error_rate:1")
    try:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{sim.url}/v1/completions", json={"prompt": "x", "max_tokens": 2}) as resp:
                assert resp.status == 500
    finally:
        sim.stop()
    sim = _start(tmp_path, QWEN, SGLANG_SIM_FAULT="crash_after:2", SGLANG_SIM_TIME_SCALE="20")
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(2):
                try:
                    async with session.post(f"{sim.url}/v1/completions", json={"prompt": "x", "max_tokens": 2}) as resp:
                        await resp.read()
                except aiohttp.ClientError:
                    pass
        assert sim.proc.wait(10) == -signal.SIGKILL
    finally:
        sim.stop()
    assert "crashed with exit code -9. Triggering SIGQUIT for cleanup..." in sim.log()


async def test_stalled_streams_api_key_and_emit_timestamps(tmp_path: Path) -> None:
    sim = _start(tmp_path, QWEN + ["--api-key", "sekret", "--enable-metrics"], SGLANG_SIM_FAULT="stall_streams", SGLANG_SIM_EMIT_TS="1")
    try:
        body = {"prompt": "x", "max_tokens": 50, "stream": True}
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{sim.url}/v1/completions", json=body) as resp:
                assert resp.status == 401
            headers = {"Authorization": "Bearer sekret"}
            async with session.post(f"{sim.url}/v1/completions", json=body, headers=headers) as resp:
                first = await asyncio.wait_for(resp.content.readline(), 5)
                chunk = json.loads(first[len(b"data: "):])
                assert isinstance(chunk["sim_emit_ts"], float)
                await resp.content.readline()
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(resp.content.readline(), 1.0)
                async with session.get(f"{sim.url}/metrics", headers=headers) as metrics:
                    text = await metrics.text()
                assert 'sglang:prompt_tokens_total{model_name="qwen3.5-122b"} 1.0\n' in text and "sglang:num_running_reqs{" in text
        assert _get(f"{sim.url}/health")[0] == 200
    finally:
        sim.stop()


async def test_defaults_natural_stop_and_bad_bodies(baseline: SimHandle) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{baseline.url}/v1/completions", json={"prompt": "x"}) as resp:
            assert (await resp.json())["usage"]["completion_tokens"] == 16
        chat = {"messages": [{"role": "user", "content": "tell me"}]}
        async with session.post(f"{baseline.url}/v1/chat/completions", json=chat) as resp:
            answer = await resp.json()
        assert answer["choices"][0]["finish_reason"] == "stop" and answer["usage"]["completion_tokens"] == 256
        async with session.post(f"{baseline.url}/generate", json={"text": "x"}) as resp:
            assert (await resp.json())["meta_info"]["completion_tokens"] == 128
        async with session.post(f"{baseline.url}/v1/completions", data=b"{nope") as resp:
            assert resp.status == 400
        async with session.post(f"{baseline.url}/v1/completions", json={"prompt": "x", "max_tokens": -1}) as resp:
            assert resp.status == 400


def test_port_taken_fails_like_uvicorn(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        sim = launch(QWEN, BASE_ENV, str(tmp_path), port=port)
        assert sim.proc.wait(30) == 1
    lines = sim.log().strip().splitlines()
    assert lines[-2].endswith("INFO:     Application startup complete.")
    assert lines[-1].endswith(f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): address already in use")
