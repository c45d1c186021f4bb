"""The load transport: stream completions at high concurrency without becoming the bottleneck.

A small HTTP/1.1 client written on asyncio's ``Protocol`` API, because the load client must cost less
than what it measures. Each socket read reaches :meth:`_Connection.data_received` directly from the
event loop: it is stamped there with one ``time.perf_counter()``, de-chunked, split into SSE events by
the sans-IO :class:`~deployctl.bench.sse.SseDecoder`, and handed to the caller's sink — no future, no task
wake-up, no coroutine resumption per read. Connections are kept alive and reused (no per-request
set-up), with no cap on their number (the hidden cap of 100 in httpx and aiohttp's defaults).

Measured on the 2-core machine this was written on (``benchmarks/bench_client.py``, client pinned to
one core, SGLang-shaped stand-in server on the other): it spends less CPU per token than aiohttp read
the way SGLang's bench_serving reads it, and — because nothing else runs between the read and its
timestamp — keeps TTFT/ITL timing error lowest at high concurrency. httpx consumed 2–3× more CPU per
token and is used only for control requests (``deployctl.adapters.http_control``). llhttp (httptools)
in place of the parser below, inside the same Protocol, cost 8–16 % more CPU per token in the same run
(``bench_client.py --clients engine,httptools``; figures in its docstring), so the parser stays.

Speaks what SGLang's uvicorn server sends: HTTP/1.1 with chunked transfer encoding (or a
Content-Length, or a body ended by close); ``https://`` works through asyncio's TLS transport.
Every failure becomes :class:`LoadError` with a short ``kind`` the trial counts failures by.

What a server sends is bounded, because a broken or hostile one must cost one failed request, not the
client's memory: response headers (``MAX_HEAD_BYTES``), a chunk-size line (``MAX_CHUNK_LINE``), one SSE
event (``deployctl.bench.sse.MAX_EVENT_BYTES``) and the part of an error body kept for its message
(``MAX_ERROR_BODY``). Past a bound, and on a body the sink cannot read (a chunk that is JSON but not an
object), the request fails as ``protocol`` and the connection is closed; the other requests go on.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Callable, Protocol, Sequence
from urllib.parse import urlsplit

from deployctl.bench.sse import SseDecoder, SseEventTooLong
from deployctl.errors import DeployctlError, InputError

_CLOCK = time.perf_counter
MAX_HEAD_BYTES = 64 * 1024
MAX_CHUNK_LINE = 1024  # hex size plus extensions; SGLang's are a few bytes
MAX_ERROR_BODY = 4096


class Sink(Protocol):
    """Where a stream's timing goes (``deployctl.bench.metrics.StreamRecorder`` is one)."""

    def sent(self, t: float) -> None:
        """The request's bytes were handed to the socket at ``t`` (TTFT starts here)."""

    def feed(self, t: float, payloads: Sequence[bytes]) -> None:
        """One read, received at ``t``, completed these SSE ``data`` payloads."""


class LoadError(DeployctlError):
    """One request failed; ``kind`` is its class: connect, timeout, http_<status>, disconnected, protocol."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class LoadClient:
    """``async with LoadClient(base_url) as client: await client.stream(path, body, sink)``."""

    name = "deployctl asyncio HTTP/1.1 protocol client (keep-alive, per-read timestamps)"
    protocol: Callable[[], "_Connection"]  # set below the class: the parser one connection speaks

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, api_key: str | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"not an http(s) URL: {base_url!r}", hint="use e.g. http://127.0.0.1:30000")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc.encode()
        self._timeout_s = timeout_s
        self._auth = _authorization(api_key)
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()

    async def __aenter__(self) -> "LoadClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn.transport.close()
        self._open.clear()
        self._idle.clear()

    async def stream(self, path: str, body: bytes, sink: Sink) -> None:
        """POST ``body`` to ``path``: ``sink.sent(t)`` when the request is written (after any connection
        set-up), then ``sink.feed(t, payloads)`` once per read that completes SSE events. Returns when
        the response body ends; raises :class:`LoadError` on any failure."""
        loop = asyncio.get_running_loop()
        conn = await self._connection(loop)
        done = loop.create_future()
        conn.begin(sink.feed, done)
        sink.sent(_CLOCK())
        conn.transport.write(
            # The User-Agent names deployctl's synthetic load, so the server's own logs (and the simulator's
            # per-source counter) tell it apart from users' requests.
            b"POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: deployctl-bench\r\nContent-Type: application/json\r\n"
            b"Accept: text/event-stream\r\n"
            b"%sContent-Length: %d\r\n\r\n%s"
            % ((self._prefix + path).encode(), self._host_header, self._auth, len(body), body)
        )
        timer = loop.call_later(self._timeout_s, _expire, done, self._timeout_s)
        try:
            reusable = await done
        except BaseException:
            conn.transport.close()  # mid-response: the connection cannot be reused
            raise
        finally:
            timer.cancel()
        if reusable:
            self._idle.append(conn)
        else:
            conn.transport.close()

    async def _connection(self, loop: asyncio.AbstractEventLoop) -> "_Connection":
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(self.protocol, self._host, self._port, ssl=self._ssl),
                timeout=min(self._timeout_s, 30.0),
            )
        except asyncio.TimeoutError:
            raise LoadError("connect", f"connecting to {self._host}:{self._port} timed out") from None
        except OSError as exc:
            raise LoadError("connect", f"cannot connect to {self._host}:{self._port}: {exc}") from None
        self._open.add(conn)
        conn.on_close = self._open.discard
        return conn


def _authorization(api_key: str | None) -> bytes:
    """The ``Authorization: Bearer`` header line SGLang's ``--api-key`` asks for (empty without a key)."""
    if not api_key:
        return b""
    if any(c in api_key for c in "\r\n\x00") or not api_key.isascii():
        raise InputError("the server's API key holds a line break, NUL or non-ASCII character: not sent",
                         hint="fix the key in the deployment's environment_file")
    return b"Authorization: Bearer %s\r\n" % api_key.encode()


def _expire(done: asyncio.Future, timeout_s: float) -> None:
    if not done.done():
        done.set_exception(LoadError("timeout", f"no complete response within {timeout_s:g} s"))


_HEAD, _CHUNKED, _LENGTH, _UNTIL_CLOSE, _IDLE = range(5)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; parses one response at a time, sans copies where it can."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport
        self.closed = False
        self.on_close: Callable[["_Connection"], None] | None = None
        self._state = _IDLE
        self._buf = b""
        self._need = 0  # chunked: data bytes left in this chunk (−1: its CRLF); length: body bytes left
        self._sink: Callable[[float, Sequence[bytes]], None] | None = None
        self._done: asyncio.Future | None = None
        self._decoder = SseDecoder()
        self._keep_alive = True
        self._error: tuple[str, str] | None = None  # a non-200 status: its body becomes the message
        self._error_body: list[bytes] = []
        self._error_size = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def begin(self, sink: Callable[[float, Sequence[bytes]], None], done: asyncio.Future) -> None:
        self._sink, self._done = sink, done
        self._state, self._buf, self._decoder = _HEAD, b"", SseDecoder()

    def data_received(self, data: bytes) -> None:
        t = _CLOCK()
        if self._state == _HEAD:
            buf = self._buf + data if self._buf else data
            data = self._head(buf)
            if data is None:
                return
        state = self._state
        if state == _CHUNKED:
            body, finished = self._dechunk(data)
        elif state == _LENGTH:
            body = data[: self._need]
            self._need -= len(body)
            finished = self._need == 0
        elif state == _UNTIL_CLOSE:
            body, finished = data, False
        else:
            return  # nothing expected: a failed response, or bytes the server should not have sent
        if self._error is not None:
            if self._error_size < MAX_ERROR_BODY:
                self._error_body.append(body[: MAX_ERROR_BODY - self._error_size])
                self._error_size += len(body)
            if finished:
                self._fail(*self._error, detail=self._error_detail())
            return
        if body:
            try:
                payloads = self._decoder.feed(body)
            except SseEventTooLong as exc:
                self._fail("protocol", str(exc))
                return
            if payloads:
                try:
                    self._sink(t, payloads)
                except Exception as exc:  # noqa: BLE001 - the server's bytes broke the reader: this request fails
                    self._fail("protocol", f"a streamed chunk could not be read: {type(exc).__name__}: {exc}")
                    return
        if finished:
            self._state = _IDLE
            if not self._done.done():
                self._done.set_result(self._keep_alive)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.on_close:
            self.on_close(self)
        if self._done is None or self._done.done():
            return
        if self._error is not None:
            self._fail(*self._error, detail=self._error_detail())
        elif self._state == _UNTIL_CLOSE:
            self._done.set_result(False)
        else:
            self._fail("disconnected", f"the server closed the connection mid-response ({exc or 'EOF'})")

    def _head(self, buf: bytes) -> bytes | None:
        """Parse the status line and headers; the bytes after them, or None until they are complete."""
        end = buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES)
        if end < 0:
            if len(buf) >= MAX_HEAD_BYTES:
                self._fail("protocol", f"response headers longer than {MAX_HEAD_BYTES} bytes")
            else:
                self._buf = buf
            return None
        self._buf = b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        try:
            status = int(status_line[1])
        except (IndexError, ValueError):
            self._fail("protocol", f"not an HTTP response: {lines[0][:80]!r}")
            return None
        self._keep_alive = headers.get("connection") != "close" and status_line[0] == "HTTP/1.1"
        self._error = (f"http_{status}", f"HTTP {status}") if status != 200 else None
        self._error_body, self._error_size = [], 0
        if "chunked" in headers.get("transfer-encoding", ""):
            self._state, self._need = _CHUNKED, 0
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                self._fail("protocol", f"bad Content-Length {length[:40]!r}")
                return None
            self._state, self._need = _LENGTH, int(length)
        else:
            self._state, self._keep_alive = _UNTIL_CLOSE, False
        return buf[end + 4:]

    def _error_detail(self) -> str:
        return b"".join(self._error_body)[:200].decode(errors="replace")

    def _dechunk(self, data: bytes) -> tuple[bytes, bool]:
        """Chunked transfer decoding, incremental: (body bytes now complete, end of body seen)."""
        buf = self._buf + data if self._buf else data
        pos, n, need = 0, len(buf), self._need
        out = []
        while pos < n:
            if need > 0:
                take = min(need, n - pos)
                out.append(buf[pos:pos + take])
                pos += take
                need -= take
                if need:
                    break
                need = -1
            if need == -1:
                if n - pos < 2:
                    break
                pos += 2
                need = 0
            eol = buf.find(b"\r\n", pos, pos + MAX_CHUNK_LINE)
            if eol < 0:
                if n - pos >= MAX_CHUNK_LINE:
                    self._fail("protocol", f"a chunk-size line longer than {MAX_CHUNK_LINE} bytes")
                    return b"", False
                break
            try:
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                if size < 0:
                    raise ValueError(size)
            except ValueError:
                self._keep_alive = False
                self._fail("protocol", f"bad chunk size line {buf[pos:eol][:40]!r}")
                return b"", False
            pos = eol + 2
            if size == 0:
                # The last chunk; trailers are not used by SGLang, so the body ends here.
                self._buf, self._need = b"", 0
                return b"".join(out), True
            need = size
        self._buf, self._need = buf[pos:], need
        return (out[0] if len(out) == 1 else b"".join(out)), False

    def _fail(self, kind: str, message: str, detail: str = "") -> None:
        self._state = _IDLE
        self._keep_alive = False
        if self._done is not None and not self._done.done():
            self._done.set_exception(LoadError(kind, f"{message}: {detail}" if detail else message))


LoadClient.protocol = _Connection
