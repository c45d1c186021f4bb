"""A tiny in-test server shaped like SGLang's streams, for the load client and the benchmark adapter.

It speaks /v1/completions the way SGLang 0.5.x does (log facts §8): one ``data: {json}`` chunk per decode
step (several tokens per chunk under speculative decoding), a final usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``; /server_info reports the effective
max_running_requests, and at most that many requests run at once (the rest wait, as in SGLang's queue).
The ``serve`` fixture (tests/adapters/conftest.py) starts one on a free port.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from aiohttp import web

from deployctl.inventory.policy import BenchPolicy


@dataclass
class FakeSglang:
    capacity: int = 64
    step_s: float = 0.002
    tokens_per_chunk: int = 1
    send_usage: bool = True
    fail_every: int = 0  # every Nth completion answers HTTP 500
    cut_after_chunks: int | None = None  # drop the connection mid-stream
    stall_s: float = 0.0  # before the first chunk
    bodies: list[dict] = field(default_factory=list)
    running: int = 0
    peak_running: int = 0

    def app(self) -> web.Application:
        self._slots = asyncio.Semaphore(self.capacity)
        app = web.Application()
        app.router.add_get("/server_info", self.server_info)
        app.router.add_get("/model_info", self.model_info)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        return app

    async def server_info(self, request: web.Request) -> web.Response:
        return web.json_response({
            "version": "0.5.10", "served_model_name": "qwen3.5", "max_running_requests": 48, "dp_size": 1,
            "internal_states": [{"effective_max_running_requests_per_dp": self.capacity}],
        })

    async def model_info(self, request: web.Request) -> web.Response:
        return web.json_response({"model_path": "Qwen/Qwen3.5-122B-A10B", "is_generation": True})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "qwen3.5", "object": "model"}]})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        if self.fail_every and len(self.bodies) % self.fail_every == 0:
            return web.json_response({"object": "error", "message": "boom", "code": 500}, status=500)
        async with self._slots:
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
            try:
                return await self._stream(request, body)
            finally:
                self.running -= 1

    async def _stream(self, request: web.Request, body: dict) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await asyncio.sleep(self.stall_s)
        left, sent_chunks = body["max_tokens"], 0
        while left > 0:
            n = min(self.tokens_per_chunk, left)
            left -= n
            await asyncio.sleep(self.step_s)
            if self.cut_after_chunks is not None and sent_chunks == self.cut_after_chunks:
                request.transport.close()
                return response
            choice = {"index": 0, "text": "x" * n, "logprobs": None, "finish_reason": None if left else "length",
                      "matched_stop": None}
            chunk = {"id": "r", "object": "text_completion", "created": 1, "model": body["model"],
                     "choices": [choice], "usage": None}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            sent_chunks += 1
        if self.send_usage and body.get("stream_options", {}).get("include_usage"):
            prompt = len(body["prompt"]) if isinstance(body["prompt"], list) else 7
            usage = {"prompt_tokens": prompt, "total_tokens": prompt + body["max_tokens"],
                     "completion_tokens": body["max_tokens"]}
            final = {"id": "r", "object": "text_completion", "created": 1, "model": body["model"], "choices": [],
                     "usage": usage}
            await response.write(b"data: " + json.dumps(final).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def small_policy(**kw: object) -> BenchPolicy:
    base = dict(concurrency=[1, 4], input_tokens=16, output_tokens=20, warmup_requests=1)
    return BenchPolicy(**{**base, **kw})
