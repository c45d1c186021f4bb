"""SGLang's HTTP API on aiohttp: health, info, OpenAI completions/chat, /generate (SSE as SGLang)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from prometheus_client import CONTENT_TYPE_LATEST

from deployctl.sim import answers
from deployctl.sim.engine import Engine, Request
from deployctl.sim.faults import Faults
from deployctl.sim.metrics import SimMetrics, source_of
from deployctl.sim.resolve import Resolved
from deployctl.sim.world import Host

_WORDS = [" the", " model", " answers", " with", " a", " steady", " stream", " of", " simulated", " tokens", ",", " and"]
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
_DUMPS = json.JSONEncoder(separators=(",", ":")).encode
_NATURAL_ANSWER = 256  # tokens a chat answer runs to when the client sets no limit and keeps EOS


def count_tokens(text: str) -> int:
    """A stand-in tokenizer: one token per word or punctuation mark."""
    return max(1, len(_TOKEN_RE.findall(text)))


def token_text(start: int, n: int) -> str:
    return "".join(_WORDS[(start + i) % len(_WORDS)] for i in range(n))


@dataclass
class ServerState:
    resolved: Resolved
    host: Host
    engine: Engine
    faults: Faults
    log: Callable[[str], None]        # writes a main-process line with the timestamp prefix
    emit_ts: bool = False
    outputs: answers.Corruption = field(default_factory=answers.Corruption)
    ready: bool = False
    completed: int = 0
    started_at: float = field(default_factory=time.time)


class _AccessLogger(AbstractAccessLogger):
    """uvicorn's access line: '[ts] INFO:     127.0.0.1:PORT - "GET /x HTTP/1.1" 200 OK' on stdout."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time_: float) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        addr = f"{peer[0]}:{peer[1]}" if peer else "127.0.0.1:0"
        ts = time.strftime("%Y-%m-%d %H:%M:%S")
        sys.stdout.write(f'[{ts}] INFO:     {addr} - "{request.method} {request.path} HTTP/{request.version.major}.{request.version.minor}" '
                         f"{response.status} {response.reason}\n")
        sys.stdout.flush()


def _prompt_tokens(body: dict[str, Any], chat: bool) -> int:
    if chat:
        total = 0
        for message in body.get("messages") or []:
            content = message.get("content")
            if isinstance(content, list):
                content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            total += count_tokens(content or "") + 4
        return max(total, 1)
    prompt = body.get("prompt", body.get("text", body.get("input_ids", "")))
    if isinstance(prompt, list):
        if prompt and isinstance(prompt[0], list):
            prompt = prompt[0]
        if prompt and isinstance(prompt[0], str):
            prompt = prompt[0]
        else:
            return max(len(prompt), 1)
    return count_tokens(str(prompt))


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"object": "error", "message": message, "type": kind, "param": None, "code": status}, status=status)


def build_app(state: ServerState) -> web.Application:
    r = state.resolved
    args = r.server_args
    served = args.get("served_model_name") or r.model_path
    model = r.model or {}
    ctx = args.get("context_length") or model.get("context_len", 0)
    api_key = args.get("api_key")

    @web.middleware
    async def require_key(request: web.Request, handler: Callable) -> web.StreamResponse:
        # SGLang's --api-key guards everything but the health probes
        if api_key and request.path not in ("/health", "/health_generate", "/sim/telemetry") \
                and request.headers.get("Authorization") != f"Bearer {api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[require_key] if api_key else [])
    exported = SimMetrics(state.engine, served, lambda: r.memory.kv_tokens if r.memory else 1, r.version) \
        if args.get("enable_metrics") else None

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200 if state.ready else 503)

    async def health_generate(_: web.Request) -> web.Response:
        if not state.ready:
            return web.Response(status=503)
        req = Request(prompt_tokens=1, max_tokens=1, stream=False)
        state.engine.submit(req)
        await req.wait_change()
        return web.Response(status=200)

    async def model_info(_: web.Request) -> web.Response:
        return web.json_response({
            "model_path": r.model_path, "tokenizer_path": args.get("tokenizer_path"), "is_generation": True,
            "preferred_sampling_params": args.get("preferred_sampling_params"), "weight_version": "default",
            "has_image_understanding": bool(model.get("multimodal")), "has_audio_understanding": False,
            "model_type": None, "architectures": [model.get("arch")],
        })

    async def server_info(_: web.Request) -> web.Response:
        m = r.memory
        info = dict(args)
        info.update({
            "version": r.version,
            "max_total_num_tokens": m.kv_tokens if m else 0,
            "internal_states": [{
                "effective_max_running_requests_per_dp": r.effective_mrr,
                "memory_usage": {"weight": round(m.weights, 2) if m else 0, "kvcache": round(m.kv_gib, 2) if m else 0,
                                 "token_capacity": m.kv_tokens if m else 0, "graph": 0.86 if r.cuda_graph else 0.0},
                "avg_spec_accept_length": state.engine.perf.accept_length if r.speculative else None,
            }],
        })
        if r.version == "0.5.23":
            info.update({"launch_command": " ".join(sys.argv), "startup_time": state.started_at, "frontend": "http"})
        return web.Response(text=json.dumps(info, default=str), content_type="application/json")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{
            "id": served, "object": "model", "created": int(state.started_at), "owned_by": "sglang",
            "root": served, "max_model_len": ctx}]})

    async def telemetry(_: web.Request) -> web.Response:
        engine, host = state.engine, state.host
        busy, batch = engine.load(asyncio.get_running_loop().time())
        gpus = []
        for i in range(host.count):
            active = i < r.tp
            power = engine.perf.power_w(busy, batch) if active else host.gpu.idle_w
            used = (host.gpu.total_gib - r.memory.avail_pool_end) if active and r.memory else 0.0
            gpus.append({"index": i, "name": host.gpu.name, "power_w": round(power, 1),
                         "power_limit_w": host.gpu.power_limit_w,
                         "sm_util_pct": round(100 * busy if active else 0.0, 1),
                         "mem_used_gb": round(used, 2), "mem_total_gb": host.gpu.total_gib})
        clock = {"simulated_s": engine.simulated_s, "generation_tokens": engine.generation_tokens_total}
        return web.json_response({"simulated": True, "gpus": gpus, "engine": clock})

    def _finish_hook(req: Request, source: str, submitted_at: float) -> None:
        if exported is not None:
            exported.served(source, submitted_at, req.first_token_at, asyncio.get_running_loop().time(), req.generated,
                            req.stream)
        state.completed += 1
        limit = state.faults.crash_after
        if limit is not None and state.completed >= limit:
            state.log(f"Subprocess scheduler_0 (pid={os.getpid() + 1}) crashed with exit code -9. Triggering SIGQUIT for cleanup...")
            state.log("Received sigquit from a child process. It usually means the child failed.")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    async def _run(body: dict[str, Any], kind: str, request: web.Request) -> web.StreamResponse:
        if state.faults.error_rate and random.random() < state.faults.error_rate:
            if exported is not None:
                exported.failed(source_of(request.headers.get("User-Agent")), bool(body.get("stream")))
            return _error(500, "Internal server error (simulated fault)", "InternalServerError")
        chat = kind == "chat"
        # SGLang's defaults: /generate 128 new tokens, completions 16; chat has no limit, so the
        # simulated model "stops" (EOS) after a natural answer length unless told to ignore EOS
        sampling = (body.get("sampling_params") or {}) if kind == "generate" else body
        ignore_eos = bool(sampling.get("ignore_eos"))
        if kind == "generate":
            max_tokens = sampling.get("max_new_tokens", 128)
        else:
            max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or (16 if not chat else None)
        natural_stop = max_tokens is None and not ignore_eos
        max_tokens = _NATURAL_ANSWER if natural_stop else (max_tokens or ctx // 2)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            return _error(400, f"max_tokens must be a positive integer, got {max_tokens!r}", "BadRequestError")
        prompt_tokens = _prompt_tokens(body, chat)
        if prompt_tokens + int(max_tokens) > ctx:
            return _error(400, f"Requested token count exceeds the model's maximum context length of {ctx} tokens. "
                               f"You requested a total of {prompt_tokens + int(max_tokens)} tokens", "BadRequestError")
        stream = bool(body.get("stream"))
        req = Request(prompt_tokens=prompt_tokens, max_tokens=max_tokens, stream=stream, stop_reason="stop" if natural_stop else "length")
        rid = uuid.uuid4().hex
        created = int(time.time())
        source = source_of(request.headers.get("User-Agent"))
        submitted_at = asyncio.get_running_loop().time()
        state.engine.submit(req)
        start = time.perf_counter()
        if not stream:
            try:
                while not req.finished:
                    await req.wait_change()
                if state.faults.stall_streams:
                    await asyncio.Event().wait()
            except asyncio.CancelledError:
                state.engine.abort(req)
                raise
            _finish_hook(req, source, submitted_at)
            final = _final_body(kind, rid, created, served, req, start)
            if not chat and _answering(body, sampling, kind):
                _answer(final, body, sampling, kind, max_tokens, state.outputs)
            return web.json_response(final, dumps=_DUMPS)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage")) or bool(args.get("stream_response_default_include_usage"))
        sent = 0
        emit = _emitter(kind, rid, created, served, state.emit_ts)
        try:
            while True:
                await req.wait_change()
                if req.generated > sent:
                    text = token_text(sent, req.generated - sent)
                    finish = req.finished
                    if kind == "generate":
                        chunk = emit(token_text(0, req.generated), req, finish, start)
                    else:
                        chunk = emit(text, req, finish, start)
                    sent = req.generated
                    await resp.write(chunk)
                    if state.faults.stall_streams:
                        await asyncio.Event().wait()
                if req.finished:
                    break
            if include_usage and kind != "generate":
                obj = "chat.completion.chunk" if chat else "text_completion"
                usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.generated,
                         "completion_tokens": req.generated, "reasoning_tokens": 0}
                await resp.write(b"data: " + _DUMPS({"id": rid, "object": obj, "created": created, "model": served,
                                                     "choices": [], "usage": usage}).encode() + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
        except (asyncio.CancelledError, ConnectionResetError):
            state.engine.abort(req)
            raise
        _finish_hook(req, source, submitted_at)
        return resp

    async def _body(request: web.Request) -> dict[str, Any] | None:
        try:
            body = await request.json()
        except ValueError:
            return None
        return body if isinstance(body, dict) else None

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        return await _run(body, "completion", request) if body is not None else _error(400, "Invalid JSON body", "BadRequestError")

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        return await _run(body, "chat", request) if body is not None else _error(400, "Invalid JSON body", "BadRequestError")

    async def generate(request: web.Request) -> web.StreamResponse:
        body = await _body(request)
        return await _run(body, "generate", request) if body is not None else _error(400, "Invalid JSON body", "BadRequestError")

    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health_generate)
    if r.version == "0.5.23":
        app.router.add_get("/ready", health)
    for path in ("/server_info", "/get_server_info"):
        app.router.add_get(path, server_info)
    for path in ("/model_info", "/get_model_info"):
        app.router.add_get(path, model_info)
    async def metrics(_: web.Request) -> web.Response:
        assert exported is not None
        return web.Response(body=exported.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/v1/models", models)
    if exported is not None:
        app.router.add_get("/metrics", metrics)
    app.router.add_get("/sim/telemetry", telemetry)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/generate", generate)
    return app


def _emitter(kind: str, rid: str, created: int, served: str, emit_ts: bool) -> Callable[..., bytes]:
    model = json.dumps(served)
    if kind == "completion":
        head = f'data: {{"id":"{rid}","object":"text_completion","created":{created},"model":{model},"choices":[{{"index":0,"text":'
    elif kind == "chat":
        head = f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},"model":{model},"choices":[{{"index":0,"delta":{{"role":"assistant","content":'

    def emit(text: str, req: Request, finish: bool, start: float) -> bytes:
        tail = f',"sim_emit_ts":{time.time():.6f}}}\n\n' if emit_ts else "}\n\n"
        reason = f'"{req.stop_reason}"' if finish else "null"
        if kind == "completion":
            body = f'{head}{json.dumps(text)},"logprobs":null,"finish_reason":{reason},"matched_stop":null}}],"usage":null{tail}'
        elif kind == "chat":
            body = (f'{head}{json.dumps(text)},"reasoning_content":null,"tool_calls":null}},"logprobs":null,'
                    f'"finish_reason":{reason},"matched_stop":null}}],"usage":null{tail}')
        else:
            meta = {"id": rid, "finish_reason": _finish_meta(req) if finish else None,
                    "prompt_tokens": req.prompt_tokens, "completion_tokens": req.generated, "cached_tokens": 0,
                    "e2e_latency": round(time.perf_counter() - start, 4), "spec_accept_length": None}
            body = "data: " + _DUMPS({"text": text, "output_ids": list(range(100, 100 + req.generated)), "meta_info": meta})[:-1] + tail
        return body.encode()

    return emit


def _final_body(kind: str, rid: str, created: int, served: str, req: Request, start: float) -> dict[str, Any]:
    text = token_text(0, req.generated)
    usage = {"prompt_tokens": req.prompt_tokens, "total_tokens": req.prompt_tokens + req.generated,
             "completion_tokens": req.generated, "prompt_tokens_details": None, "reasoning_tokens": 0}
    if kind == "generate":
        return {"text": text, "output_ids": list(range(100, 100 + req.generated)), "meta_info": {
            "id": rid, "finish_reason": _finish_meta(req), "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.generated, "cached_tokens": 0, "e2e_latency": round(time.perf_counter() - start, 4)}}
    if kind == "chat":
        choice = {"index": 0, "message": {"role": "assistant", "content": text, "reasoning_content": None, "tool_calls": None},
                  "logprobs": None, "finish_reason": req.stop_reason, "matched_stop": None}
        return {"id": rid, "object": "chat.completion", "created": created, "model": served, "choices": [choice], "usage": usage}
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": req.stop_reason, "matched_stop": None}
    return {"id": rid, "object": "text_completion", "created": created, "model": served, "choices": [choice], "usage": usage}


def _answering(body: dict[str, Any], sampling: dict[str, Any], kind: str) -> bool:
    """The model's own answer (slower to make than the word cycle) only when a client asks for what only
    it has: log-probabilities, or greedy text (temperature 0). Benchmark traffic keeps the word cycle."""
    if kind == "generate":
        return bool(body.get("return_logprob")) or sampling.get("temperature") == 0
    return body.get("logprobs") is not None or body.get("temperature") == 0


def _answer(final: dict[str, Any], body: dict[str, Any], sampling: dict[str, Any], kind: str, max_tokens: int,
            bad: answers.Corruption) -> None:
    """Replaces the word cycle of a non-streamed /generate or /v1/completions body with the simulated
    model's greedy answer and SGLang's log-probability fields."""
    prompt = body.get("text", body.get("input_ids")) if kind == "generate" else body.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        prompt = prompt[0]
    if not isinstance(prompt, (str, list)):
        return
    if kind == "generate":
        top_k = int(body.get("top_logprobs_num") or 0)
        start = body.get("logprob_start_len")
        start = -1 if start is None else int(start)
        done = answers.complete(prompt, max_tokens, bad, top_k=top_k, logprob_start_len=start)
        final["text"] = done.text
        final["output_ids"] = [s.token for s in done.output]
        if body.get("return_logprob"):
            final["meta_info"].update(answers.logprob_fields(done, top_k, bool(body.get("return_text_in_logprobs"))))
        return
    top_k = int(body.get("logprobs") or 0)
    echo = bool(body.get("echo"))
    done = answers.complete(prompt, max_tokens, bad, top_k=top_k, logprob_start_len=0 if echo else -1)
    choice = final["choices"][0]
    choice["text"] = (prompt if echo and isinstance(prompt, str) else "") + done.text
    if body.get("logprobs") is not None:
        steps = [(done.prompt_ids[i], s) for i, s in enumerate(done.input_steps)] if echo else []
        steps += [(s.token, s) for s in done.output]
        v = answers.vocab()
        choice["logprobs"] = {  # the OpenAI completions shape
            "tokens": [v.piece(t) for t, _ in steps],
            "token_logprobs": [s.logprob if s else None for _, s in steps],
            "top_logprobs": [{v.piece(t): lp for t, lp in s.top} if s else None for _, s in steps],
            "text_offset": [],
        }


def _finish_meta(req: Request) -> dict[str, Any]:
    if req.stop_reason == "length":
        return {"type": "length", "length": req.generated}
    return {"type": "stop", "matched": 151645}


def access_logger() -> type[AbstractAccessLogger]:
    return _AccessLogger
