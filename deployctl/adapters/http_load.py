"""The load transport: stream completions at high concurrency without becoming the bottleneck.

The only importer of aiohttp. One shared ``ClientSession`` for the whole sweep (connection reuse, no
per-request session setup), a connector without the hidden cap of 100 connections, a large read
buffer, and the body read with ``iter_any()``: one wake-up per socket read rather than one per SSE line
(SGLang's bench_serving iterates lines, two per event). Each read is stamped once with
``time.perf_counter()`` and decoded by the sans-IO :class:`~deployctl.sse.SseDecoder`; what the payloads
mean is the caller's business (a sink), so this module knows HTTP, not metrics.

Why not httpx (the project's HTTP library for control requests): measured on a 2-core machine it
consumed 26k–61k tok/s per client core, falling as concurrency rises, against ~120k for aiohttp, and
at C=1024 it fell 11 s behind the stream. See docs/bench.md and benchmarks/bench_client.py.

Every failure is mapped to :class:`LoadError` with a short ``kind`` that the trial counts by class.
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable, Sequence

import aiohttp

from deployctl.errors import DeployctlError
from deployctl.sse import SseDecoder

Sink = Callable[[float, Sequence[bytes]], None]
_READ_BUFFER = 10 * 2**20  # SGLang's bench_serving size: the 64 KiB default collapses long streams


class LoadError(DeployctlError):
    """One request failed; ``kind`` is its class: connect, timeout, http_<status>, disconnected."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class LoadClient:
    """``async with LoadClient(base_url) as client: await client.stream(path, body, sink)``."""

    name = f"aiohttp {aiohttp.__version__} (shared session, iter_any)"

    def __init__(self, base_url: str, *, timeout_s: float = 600.0) -> None:
        self._base = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, 30.0))
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "LoadClient":
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, force_close=False, enable_cleanup_closed=False)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, read_bufsize=_READ_BUFFER, auto_decompress=False,
            skip_auto_headers=("User-Agent",),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def stream(self, path: str, body: bytes, sink: Sink) -> None:
        """POST ``body`` to ``path``; call ``sink(t, payloads)`` once per read that completes events.
        Returns when the server ends the body; raises :class:`LoadError` on any failure."""
        if self._session is None:
            raise RuntimeError("LoadClient used outside 'async with'")
        decoder = SseDecoder()
        clock = time.perf_counter
        try:
            async with self._session.post(
                self._base + path, data=body, headers={"Content-Type": "application/json"}
            ) as response:
                if response.status != 200:
                    detail = (await response.text())[:200]
                    raise LoadError(f"http_{response.status}", f"HTTP {response.status}: {detail}")
                async for data in response.content.iter_any():
                    t = clock()
                    payloads = decoder.feed(data)
                    if payloads:
                        sink(t, payloads)
        except LoadError:
            raise
        except asyncio.TimeoutError as exc:
            raise LoadError("timeout", f"request timed out: {exc}") from None
        except aiohttp.ClientConnectorError as exc:
            raise LoadError("connect", f"cannot connect to {self._base}: {exc}") from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            raise LoadError("disconnected", f"stream broken: {exc}") from None
        except aiohttp.ClientError as exc:
            raise LoadError("http", f"{type(exc).__name__}: {exc}") from None
