"""The stdlib /health probe against a tiny local server on a free port."""

from __future__ import annotations

import asyncio
import socket

import pytest

from deployctl.operations.restart import http_health_probe


async def serve(status: bytes) -> tuple[asyncio.AbstractServer, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize(("status", "ok"), [(b"200 OK", True), (b"503 Service Unavailable", False)])
async def test_probe_reads_the_status(status: bytes, ok: bool) -> None:
    server, port = await serve(status)
    async with server:
        assert await http_health_probe(f"http://127.0.0.1:{port}/health")() is ok


async def test_nothing_listening_is_not_ready() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again before the probe: refused
    assert await http_health_probe(f"http://127.0.0.1:{port}/health")() is False


async def test_a_silent_server_times_out_as_not_ready() -> None:
    async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        assert await http_health_probe(f"http://127.0.0.1:{port}/health", timeout_s=0.1)() is False


def test_only_plain_http() -> None:
    with pytest.raises(ValueError):
        http_health_probe("https://127.0.0.1:1/health")
