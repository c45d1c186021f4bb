"""Fixtures of the adapter tests."""

from __future__ import annotations

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
