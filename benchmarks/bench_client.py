"""Client overhead: does deployctl's load engine measure the server, or itself?

Compares, in the same run, deployctl's engine (``deployctl.load.trial.run_trial`` over
``deployctl.adapters.http_load``) with a reference client written the way SGLang's bench_serving does
it (aiohttp, one shared session, ``async for line in response.content``, ``json.loads`` per line,
``perf_counter`` per chunk, a semaphore over tasks created up front) — and, with ``--clients``, httpx,
the engine over aiohttp, or the engine with llhttp (``httptools``, ``pip install -e '.[bench]'``) parsing
HTTP inside the same asyncio Protocol instead of its own parser.

httptools against the engine's own parser (2026-12-01, 2-core machine shared with other work, load
average 6–8; ``--levels 1,64,256 --runs 5 --clients engine,httptools``, medians): flood client CPU-s per
1M tokens 6.7 / 6.3 / 6.2 (own) against 7.2 / 6.9 / 7.2 (httptools) at C=1/64/256; tok/s within noise
(31k/43k/37k against 33k/52k/37k). The own parser costs less per token, so it stays.

The server is a stand-in written here for the purpose (raw asyncio, SGLang-shaped /v1/completions
chunks, chunked transfer encoding) that stamps every chunk with ``"sim_emit_ts": time.time()`` like
the simulator's SGLANG_SIM_EMIT_TS=1, so timing error is exact. It runs pinned to CPU 1, each client
measurement in a fresh process pinned to CPU 0 (``os.sched_setaffinity``). Two server modes:

- flood: every stream as fast as the server can write → max tok/s one client core consumes, and
  client CPU seconds per 1M tokens (process CPU time over the load / tokens received);
- paced: every stream gets one token per 20 ms step (50 tok/s, C × 50 offered) → timing error:
  TTFT error = arrival of the first chunk − its emission; ITL error = |client gap − server gap|.

Prints the median of ``--runs`` runs per cell. Takes ~2–3 minutes with the defaults.

    .venv/bin/python benchmarks/bench_client.py [--levels 1,64,256,1024] [--runs 3] [--clients engine,reference]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass

STEP_S = 0.020
CLIENT_CPU, SERVER_CPU = 0, 1


# --- the stand-in server ------------------------------------------------------------------------

_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
         b"Transfer-Encoding: chunked\r\n\r\n")
_PRE = (b'data: {"id":"cmpl-0","object":"text_completion","created":1700000000,"model":"qwen3.5",'
        b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"matched_stop":null}],'
        b'"usage":null,"sim_emit_ts":')
_LEN = re.compile(rb"(?i)content-length:\s*(\d+)")


def _frame(event: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(event), event)


def _token_frame() -> bytes:
    return _frame(_PRE + repr(time.time()).encode() + b"}\n\n")


def _tail(tokens: int) -> bytes:
    usage = {"prompt_tokens": 8, "total_tokens": 8 + tokens, "completion_tokens": tokens}
    final = json.dumps({"id": "cmpl-0", "object": "text_completion", "created": 1, "model": "qwen3.5",
                        "choices": [], "usage": usage}).encode()
    return _frame(b"data: " + final + b"\n\n") + _frame(b"data: [DONE]\n\n") + b"0\r\n\r\n"


class _Ticker:
    """Paced mode: one loop writes one token to every active stream each step."""

    def __init__(self) -> None:
        self.streams: list[list] = []  # [writer, tokens left, total, future]

    async def run(self) -> None:
        next_tick = time.perf_counter()
        while True:
            next_tick += STEP_S
            await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
            keep = []
            for s in self.streams:
                s[0].write(_token_frame())
                s[1] -= 1
                if s[1] == 0:
                    s[0].write(_tail(s[2]))
                    s[3].set_result(None)
                else:
                    keep.append(s)
            self.streams = keep

    async def stream(self, writer: asyncio.StreamWriter, tokens: int) -> None:
        done = asyncio.get_running_loop().create_future()
        self.streams.append([writer, tokens, tokens, done])
        await done


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ticker: _Ticker | None) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            match = _LEN.search(head)
            body = json.loads(await reader.readexactly(int(match.group(1)))) if match else {}
            tokens = int(body.get("max_tokens", 16))
            writer.write(_HEAD)
            if ticker is not None:
                await ticker.stream(writer, tokens)
            else:
                # Batches of 16 frames per write keep the server ahead of one client core.
                for start in range(0, tokens, 16):
                    writer.write(b"".join([_token_frame() for _ in range(min(16, tokens - start))]))
                    await writer.drain()
                writer.write(_tail(tokens))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def _serve(paced: bool, port_out: "mp.connection.Connection") -> None:
    os.sched_setaffinity(0, {SERVER_CPU})

    async def main() -> None:
        ticker = _Ticker() if paced else None
        if ticker:
            asyncio.ensure_future(ticker.run())
        server = await asyncio.start_server(lambda r, w: _handle(r, w, ticker), "127.0.0.1", 0, backlog=4096)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


# --- the clients ---------------------------------------------------------------------------------

@dataclass
class Measured:
    tokens: int
    wall_s: float
    cpu_s: float
    failed: int
    ttft_err: list[float]
    itl_err: list[float]


def _errors(streams: list[tuple[list[float], list[float]]], offset: float) -> tuple[list[float], list[float]]:
    """streams: (perf_counter arrival times, emission epoch times) per request."""
    ttft, itl = [], []
    for recv, emit in streams:
        if not recv:
            continue
        ttft.append(recv[0] + offset - emit[0])
        for i in range(1, len(recv)):
            itl.append(abs((recv[i] - recv[i - 1]) - (emit[i] - emit[i - 1])))
    return ttft, itl


async def _engine(url: str, c: int, n: int, tokens: int, marks: dict, client_cls: type | None = None) -> tuple[int, int, list]:
    from deployctl.adapters.http_load import LoadClient
    from deployctl.bench.plan import LevelPlan, Workload
    from deployctl.load.trial import run_trial

    workload = Workload(model="qwen3.5", input_tokens=8, output_tokens=tokens)
    warm = Workload(model="qwen3.5", input_tokens=8, output_tokens=5)
    async with (client_cls or LoadClient)(url) as client:
        await run_trial(client, LevelPlan(1, 0, 1, warm, 10**7))  # warm-up, not measured
        _mark(marks)
        run = await run_trial(client, LevelPlan(c, 0, n, workload, 0), keep_emit_ts=True)
    got = sum(len(r.chunk_times[0]) for r in run.records)
    failed = sum(1 for r in run.records if not r.sample.ok)
    return got, failed, [(list(r.chunk_times[0]), list(r.chunk_times[1])) for r in run.records]


class _AiohttpLoadClient:
    """The runner-up transport, kept here for the comparison: the engine (same runner, recorder and
    SSE decoder) over aiohttp with one shared session, no connection cap, a 10 MiB read buffer and
    ``iter_any()`` (one wake-up per read)."""

    def __init__(self, base_url: str) -> None:
        self._base = base_url

    async def __aenter__(self) -> "_AiohttpLoadClient":
        import aiohttp

        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                              timeout=aiohttp.ClientTimeout(total=600), read_bufsize=10 * 2**20)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._session.close()

    async def stream(self, path: str, body: bytes, sink) -> None:
        from deployctl.bench.sse import SseDecoder

        decoder = SseDecoder()
        sink.sent(time.perf_counter())
        async with self._session.post(self._base + path, data=body,
                                      headers={"Content-Type": "application/json"}) as response:
            async for data in response.content.iter_any():
                t = time.perf_counter()
                payloads = decoder.feed(data)
                if payloads:
                    sink.feed(t, payloads)


async def _engine_aiohttp(url: str, c: int, n: int, tokens: int, marks: dict) -> tuple[int, int, list]:
    return await _engine(url, c, n, tokens, marks, _AiohttpLoadClient)


async def _reference(url: str, c: int, n: int, tokens: int, marks: dict) -> tuple[int, int, list]:
    import aiohttp

    from deployctl.bench.plan import Workload, build_request

    workload = Workload(model="qwen3.5", input_tokens=8, output_tokens=tokens)
    connector = aiohttp.TCPConnector(limit=c)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    streams: list = []
    failed = 0
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, read_bufsize=10 * 1024**2) as session:
        semaphore = asyncio.Semaphore(c)

        async def one(i: int, shape: Workload = workload) -> None:
            nonlocal failed
            async with semaphore:
                body = build_request(shape, i).body
                recv: list[float] = []
                emit: list[float] = []
                try:
                    async with session.post(url + "/v1/completions", data=body,
                                            headers={"Content-Type": "application/json"}) as response:
                        async for chunk_bytes in response.content:
                            chunk_bytes = chunk_bytes.strip()
                            if not chunk_bytes:
                                continue
                            chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
                            if chunk != "[DONE]":
                                data = json.loads(chunk)
                                if data["choices"] and data["choices"][0]["text"]:
                                    recv.append(time.perf_counter())
                                    emit.append(data.get("sim_emit_ts", 0.0))
                except aiohttp.ClientError:
                    failed += 1
                streams.append((recv, emit))

        await one(10**7, Workload(model="qwen3.5", input_tokens=8, output_tokens=5))  # warm-up
        streams.clear()
        _mark(marks)
        await asyncio.gather(*(asyncio.create_task(one(i)) for i in range(n)))
    return sum(len(r) for r, _ in streams), failed, streams


async def _httpx(url: str, c: int, n: int, tokens: int, marks: dict) -> tuple[int, int, list]:
    import httpx

    from deployctl.bench.plan import Workload, build_request
    from deployctl.bench.sse import SseDecoder

    workload = Workload(model="qwen3.5", input_tokens=8, output_tokens=tokens)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    streams: list = []
    failed = 0
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(600.0)) as client:
        semaphore = asyncio.Semaphore(c)

        async def one(i: int, shape: Workload = workload) -> None:
            nonlocal failed
            async with semaphore:
                recv: list[float] = []
                emit: list[float] = []
                decoder = SseDecoder()
                try:
                    async with client.stream("POST", url + "/v1/completions", content=build_request(shape, i).body,
                                             headers={"Content-Type": "application/json"}) as response:
                        async for data in response.aiter_raw():
                            t = time.perf_counter()
                            for payload in decoder.feed(data):
                                if payload != b"[DONE]":
                                    obj = json.loads(payload)
                                    if obj["choices"] and obj["choices"][0]["text"]:
                                        recv.append(t)
                                        emit.append(obj.get("sim_emit_ts", 0.0))
                except httpx.HTTPError:
                    failed += 1
                streams.append((recv, emit))

        await one(10**7, Workload(model="qwen3.5", input_tokens=8, output_tokens=5))
        streams.clear()
        _mark(marks)
        await asyncio.gather(*(one(i) for i in range(n)))
    return sum(len(r) for r, _ in streams), failed, streams


def _httptools_client() -> type:
    """The engine with llhttp (httptools) parsing HTTP inside the same asyncio Protocol, in place of the
    hand-written status/header/chunked parser: the same bounds, the same per-read timestamp."""
    import httptools

    from deployctl.adapters.http_load import MAX_ERROR_BODY, MAX_HEAD_BYTES, LoadClient, LoadError
    from deployctl.bench.sse import SseDecoder, SseEventTooLong

    class Connection(asyncio.Protocol):
        def __init__(self) -> None:
            self.closed = False
            self.on_close = None
            self._parser = httptools.HttpResponseParser(self)
            self._done = None
            self._sink = None

        def connection_made(self, transport) -> None:
            self.transport = transport

        def begin(self, sink, done) -> None:
            self._sink, self._done = sink, done
            self._decoder = SseDecoder()
            self._in_head, self._head_bytes, self._framed = True, 0, False
            self._error, self._error_body, self._complete, self._payloads = None, [], False, []

        # llhttp callbacks
        def on_header(self, name: bytes, value: bytes) -> None:
            if name.lower() in (b"content-length", b"transfer-encoding"):
                self._framed = True

        def on_headers_complete(self) -> None:
            self._in_head = False
            status = self._parser.get_status_code()
            self._keep_alive = self._parser.should_keep_alive() and self._framed
            self._error = (f"http_{status}", f"HTTP {status}") if status != 200 else None

        def on_body(self, body: bytes) -> None:
            if self._error is not None:
                size = sum(map(len, self._error_body))
                if size < MAX_ERROR_BODY:
                    self._error_body.append(body[: MAX_ERROR_BODY - size])
            else:
                self._payloads += self._decoder.feed(body)

        def on_message_complete(self) -> None:
            self._complete = True

        def data_received(self, data: bytes) -> None:
            t = time.perf_counter()
            if self._done is None or self._done.done():
                return
            if self._in_head:
                self._head_bytes += len(data)
            try:
                self._parser.feed_data(data)
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__context__
                return self._fail("protocol", str(cause if isinstance(cause, SseEventTooLong) else exc))
            except httptools.HttpParserError as exc:
                return self._fail("protocol", f"not a valid HTTP response: {exc}")
            if self._in_head and self._head_bytes > MAX_HEAD_BYTES:  # llhttp has no limit of its own
                return self._fail("protocol", "response headers too long")
            if self._payloads:
                payloads, self._payloads = self._payloads, []
                try:
                    self._sink(t, payloads)
                except Exception as exc:  # noqa: BLE001
                    return self._fail("protocol", f"a streamed chunk could not be read: {exc!r}")
            if self._complete:
                if self._error is not None:
                    return self._fail(*self._error)
                self._done.set_result(self._keep_alive)

        def connection_lost(self, exc) -> None:
            self.closed = True
            if self.on_close:
                self.on_close(self)
            if self._done is None or self._done.done():
                return
            if self._error is not None:
                self._fail(*self._error)
            elif not self._in_head and not self._framed:
                self._done.set_result(False)  # a body ended by close (llhttp has no EOF call)
            else:
                self._fail("disconnected", f"the server closed the connection mid-response ({exc or 'EOF'})")

        def _fail(self, kind: str, message: str) -> None:
            detail = b"".join(self._error_body)[:200].decode(errors="replace")
            if self._done is not None and not self._done.done():
                self._done.set_exception(LoadError(kind, f"{message}: {detail}" if detail else message))

    class HttptoolsLoadClient(LoadClient):
        protocol = Connection

    return HttptoolsLoadClient


async def _engine_httptools(url: str, c: int, n: int, tokens: int, marks: dict) -> tuple[int, int, list]:
    return await _engine(url, c, n, tokens, marks, _httptools_client())


def _mark(marks: dict) -> None:
    """Start of the measured part, after each client's warm-up request."""
    marks.update(t0=time.perf_counter(), cpu0=time.process_time())


CLIENTS = {"engine": _engine, "reference": _reference, "aiohttp": _engine_aiohttp, "httpx": _httpx,
           "httptools": _engine_httptools}


def _client(kind: str, url: str, c: int, n: int, tokens: int, out: "mp.connection.Connection") -> None:
    os.sched_setaffinity(0, {CLIENT_CPU})
    offset = min((time.time() - time.perf_counter() for _ in range(5)), key=abs)

    async def main() -> Measured:
        marks: dict = {}
        got, failed, streams = await CLIENTS[kind](url, c, n, tokens, marks)
        cpu, wall = time.process_time() - marks["cpu0"], time.perf_counter() - marks["t0"]
        ttft, itl = _errors(streams, offset)
        return Measured(got, wall, cpu, failed, ttft, itl)

    out.send(asyncio.run(main()))


def _measure(kind: str, url: str, c: int, n: int, tokens: int) -> Measured:
    recv, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=_client, args=(kind, url, c, n, tokens, send))
    proc.start()
    result = recv.recv()
    proc.join()
    return result


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# --- the experiment ----------------------------------------------------------------------------

def _flood_shape(c: int) -> tuple[int, int]:
    """(requests, tokens per request): ~200k tokens per measurement, 1000-token streams up to C=256."""
    if c == 1:
        return 20, 1000
    return c, 1000 if c <= 256 else 250


PACED_TOKENS = 100


def _paced_shape(c: int) -> tuple[int, int]:
    return (3, PACED_TOKENS) if c == 1 else (c, PACED_TOKENS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="1,64,256,1024")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", default="engine,reference")
    parser.add_argument("--modes", default="flood,paced")
    parser.add_argument("--against", metavar="URL",
                        help="a running server that stamps chunks (the simulator with SGLANG_SIM_EMIT_TS=1) instead "
                             "of the stand-in: paced mode only, at whatever pace it serves")
    parser.add_argument("--paced-tokens", type=int, default=100, help="tokens per request in paced mode")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    kinds = args.clients.split(",")
    modes = ["paced"] if args.against else args.modes.split(",")
    global PACED_TOKENS
    PACED_TOKENS = args.paced_tokens
    if len(os.sched_getaffinity(0)) < 2:
        print("needs 2 CPUs (client and server each pinned to one)", file=sys.stderr)
        return 2
    mp.set_start_method("fork")
    servers, urls = [], {}
    for mode in [] if args.against else modes:
        recv, send = mp.Pipe(duplex=False)
        proc = mp.Process(target=_serve, args=(mode == "paced", send), daemon=True)
        proc.start()
        servers.append(proc)
        urls[mode] = f"http://127.0.0.1:{recv.recv()}"
    if args.against:
        urls["paced"] = args.against.rstrip("/")
    server = f"{args.against} (its own pace)" if args.against else f"stand-in on CPU {SERVER_CPU}"
    print(f"server: {server}; clients on CPU {CLIENT_CPU}; {args.runs} runs, medians; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[tuple, list[Measured]] = {}
    started = time.time()
    try:
        for run in range(args.runs):
            for c in levels:
                for mode in modes:
                    n, tokens = _flood_shape(c) if mode == "flood" else _paced_shape(c)
                    for kind in (kinds if run % 2 == 0 else kinds[::-1]):  # alternate order against drift
                        results.setdefault((mode, c, kind), []).append(_measure(kind, urls[mode], c, n, tokens))
            print(f"  run {run + 1}/{args.runs} done ({time.time() - started:.0f} s)", flush=True)
    finally:
        for proc in servers:
            proc.terminate()
    _print_table(results, levels, kinds, modes)
    print(f"total {time.time() - started:.0f} s; load average now {os.getloadavg()[0]:.2f}")
    return 0


def _print_table(results: dict, levels: list[int], kinds: list[str], modes: list[str]) -> None:
    med = statistics.median
    if "flood" in modes:
        print("\nflood (server as fast as it can): tok/s consumed by one client core · client CPU-s per 1M tokens")
        print("| client | " + " | ".join(f"C={c}" for c in levels) + " |")
        print("|---|" + "---|" * len(levels))
        for kind in kinds:
            cells = []
            for c in levels:
                ms = results[("flood", c, kind)]
                tps = med(m.tokens / m.wall_s for m in ms)
                cpu = med(m.cpu_s / m.tokens * 1e6 for m in ms if m.tokens)
                fail = max(m.failed for m in ms)
                cells.append(f"{tps / 1000:.0f}k · {cpu:.1f}" + (f" ({fail} failed)" if fail else ""))
            print(f"| {kind} | " + " | ".join(cells) + " |")
    if "paced" in modes:
        print(f"\npaced ({1 / STEP_S:.0f} tok/s per stream, C × {1 / STEP_S:.0f} offered, unless --against): "
              "chunks/s consumed · TTFT error p50/p99 · ITL error p99 (ms) (client CPU-s per 1M chunks)")
        print("| client | " + " | ".join(f"C={c}" for c in levels) + " |")
        print("|---|" + "---|" * len(levels))
        for kind in kinds:
            cells = []
            for c in levels:
                ms = results[("paced", c, kind)]
                tps = med(m.tokens / m.wall_s for m in ms)
                t50 = med(_pct(m.ttft_err, 0.5) for m in ms) * 1000
                t99 = med(_pct(m.ttft_err, 0.99) for m in ms) * 1000
                i99 = med(_pct(m.itl_err, 0.99) for m in ms) * 1000
                cpu = med(m.cpu_s / m.tokens * 1e6 for m in ms if m.tokens)
                rate = f"{tps / 1000:.1f}k" if tps >= 1000 else f"{tps:.0f}"
                cells.append(f"{rate} · {t50:.1f}/{t99:.1f} · {i99:.2f} (cpu {cpu:.0f})")
            print(f"| {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
