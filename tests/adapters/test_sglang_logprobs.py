"""The output gate's client against the simulator's /generate: SGLang's log-probability fields, greedy
answers that are right, teacher forcing that scores exactly what generation produced, and the faults."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Iterator

import aiohttp
import pytest

from deployctl.adapters.sglang_logprobs import LogprobClient
from deployctl.outputgate.probes import correct, shipped
from deployctl.sim.probe import SimHandle, launch, wait_ready

QWEN = "--model-path Qwen/Qwen3.5-122B-A10B --tp 4 --attention-backend triton".split()
ENV = {"SGLANG_SIM_SPEED": "0.05", "SGLANG_SIM_TIME_SCALE": "50", "SGLANG_SIM_NOISE": "0"}


def _start(tmp: Path, flags: list[str] = (), **env: str) -> SimHandle:
    sim = launch(QWEN + list(flags), {**ENV, **env}, str(tmp))
    if not wait_ready(sim):
        sim.stop()
        pytest.fail(f"the simulator did not get ready:\n{sim.log()[-3000:]}")
    return sim


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    handle = _start(tmp_path_factory.mktemp("sim"))
    yield handle
    handle.stop()


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


async def _greedy_and_score(url: str, n: int):
    probes = shipped().subset(n).probes
    async with aiohttp.ClientSession() as session:
        client = LogprobClient(session, url)
        refs = [await client.greedy(p, 12, 5) for p in probes]
        scores = [await client.score(r, 5) for r in refs]
    return probes, refs, scores


def test_generate_returns_sglangs_logprob_fields(sim):
    body = _post(sim.url + "/generate", {"text": "Question: What is 2 plus 2?\nAnswer:", "return_logprob": True,
                                         "logprob_start_len": 0, "top_logprobs_num": 3, "return_text_in_logprobs": True,
                                         "sampling_params": {"temperature": 0, "max_new_tokens": 4}})
    meta = body["meta_info"]
    assert len(meta["output_token_logprobs"]) == 4 == len(meta["output_top_logprobs"])
    lp, token, text = meta["output_token_logprobs"][0]
    assert lp < 0 and isinstance(token, int) and text.strip() == body["text"].split()[0]
    assert meta["input_token_logprobs"][0][0] is None and meta["input_top_logprobs"][0] is None
    assert all(len(top) == 3 for top in meta["output_top_logprobs"])
    done = _post(sim.url + "/v1/completions", {"prompt": "The sky", "max_tokens": 3, "logprobs": 2, "echo": True})
    logprobs = done["choices"][0]["logprobs"]
    assert done["choices"][0]["text"].startswith("The sky") and len(logprobs["tokens"]) == 2 + 3
    assert logprobs["token_logprobs"][0] is None and len(logprobs["top_logprobs"][-1]) == 2


def test_greedy_answers_are_right_and_teacher_forcing_scores_them(sim):
    probes, refs, scores = asyncio.run(_greedy_and_score(sim.url, 16))
    assert all(correct(p, r.text) for p, r in zip(probes, refs) if p.checkable)
    for ref, score in zip(refs, scores):
        assert len(score.logprobs) == len(ref.token_ids) == 12
        assert [t[0][0] for t in score.top] == list(ref.token_ids)  # the same argmax at every position
        assert all(abs(a - b) < 0.05 for a, b in zip(score.logprobs, ref.logprobs))


def test_wrong_sums_get_the_arithmetic_wrong(tmp_path):
    bad = _start(tmp_path, SGLANG_SIM_FAULT="wrong_sums")
    try:
        probes, refs, _ = asyncio.run(_greedy_and_score(bad.url, 16))
    finally:
        bad.stop()
    assert not any(correct(p, r.text) for p, r in zip(probes, refs) if p.kind == "math")
