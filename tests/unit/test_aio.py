"""The asyncio helpers: a bounded call never swallows its caller's cancellation; a teardown ends tasks
that swallowed one. The first case is the `deployctl restart` hang (asyncio.wait_for on Python ≤ 3.11)."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from deployctl.adapters.aio import bounded, cancel_all, kill_child


async def _cancel_as_the_call_completes(wrap) -> asyncio.Task:
    """A reader awaiting ``wrap(call)`` and then a signal that never comes; its call completes in the very
    loop iteration its cancellation arrives (a D-Bus reply racing the end of a readiness wait)."""
    reply = asyncio.get_running_loop().create_future()
    never = asyncio.Event()

    async def call() -> int:
        return await reply

    async def reader() -> None:
        await wrap(call())
        await never.wait()  # the next PropertiesChanged, which a stable unit never sends

    task = asyncio.create_task(reader())
    for _ in range(3):
        await asyncio.sleep(0)
    reply.set_result(1)
    task.cancel()
    await asyncio.wait({task}, timeout=0.5)
    return task


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps the cancellation since 3.12")
async def test_wait_for_swallows_the_cancellation_here() -> None:
    """The cause itself, so that this file fails loudly if the premise ever changes."""
    task = await _cancel_as_the_call_completes(lambda aw: asyncio.wait_for(aw, 25))
    assert not task.done()
    await cancel_all([task])
    assert task.cancelled()


async def test_bounded_lets_the_cancellation_through() -> None:
    for _ in range(50):
        task = await _cancel_as_the_call_completes(lambda aw: bounded(aw, 25))
        assert task.cancelled()


async def test_bounded_returns_the_result_or_times_out() -> None:
    assert await bounded(asyncio.sleep(0, "x"), 1) == "x"
    with pytest.raises(asyncio.TimeoutError):
        await bounded(asyncio.sleep(10), 0.01)


async def test_cancel_all_ends_a_task_that_swallows_its_first_cancellation() -> None:
    ended = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # swallowed, as wait_for can
        try:
            await asyncio.sleep(10)
        finally:
            ended.set()

    async def failing() -> None:
        raise RuntimeError("ignored at teardown")

    tasks = [asyncio.create_task(stubborn()), asyncio.create_task(failing())]
    await asyncio.sleep(0)
    await cancel_all(tasks)
    assert ended.is_set() and all(t.done() for t in tasks)


async def test_kill_child_ends_a_running_child_and_leaves_an_exited_one_to_the_watcher(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="asyncio")
    running = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(30)")
    kill_child(running)
    assert await running.wait() == -9
    exited = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await exited.wait()
    kill_child(exited)  # a no-op: no signal, no waitpid behind asyncio's back
    assert exited.returncode == 0
    assert "Unknown child process" not in caplog.text

