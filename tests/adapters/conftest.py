"""Fixtures of the adapter tests."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web
from support.sglang import FakeSglang


@pytest.fixture
async def serve():
    runners = []

    async def start(fake: FakeSglang) -> str:
        runner = web.AppRunner(fake.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
def threaded_server():
    """FakeSglang on its own loop in a thread, for the CLI (which runs its own asyncio.run)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners = []

    def start(fake: FakeSglang) -> str:
        async def up() -> str:
            runner = web.AppRunner(fake.app())
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            runners.append(runner)
            return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

        return asyncio.run_coroutine_threadsafe(up(), loop).result(10)

    yield start
    for runner in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
