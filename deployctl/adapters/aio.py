"""asyncio helpers the adapters share: a timeout that never swallows a cancellation, and a teardown
that really ends its tasks, and a kill that leaves reaping to asyncio.

Why not ``asyncio.wait_for``: on Python ≤ 3.11, when the awaited call completes in the same loop
iteration as the caller's cancellation, ``wait_for`` returns the result and drops the cancellation
(CPython gh-86296, fixed in 3.12 by rewriting it on ``asyncio.timeout``). A reader task cancelled at the
end of a restart then went on to wait for a signal that never came, and the teardown waiting for it
hung: the ``deployctl restart`` hang of about one full test run in five (reproduced in
tests/unit/test_aio.py).
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any, Awaitable, Iterable, TypeVar

T = TypeVar("T")

# How long a teardown waits for a cancelled task before cancelling it again.
_RECANCEL_S = 0.5


async def bounded(aw: Awaitable[T], timeout_s: float) -> T:
    """``aw``'s result, ``asyncio.TimeoutError`` after ``timeout_s``; a cancellation always propagates."""
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise asyncio.TimeoutError(f"no answer within {timeout_s:g} s")
    return task.result()


async def cancel_all(tasks: Iterable["asyncio.Task[Any]"]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again any that swallowed it
    (a library still on ``wait_for`` can). A cancellation of the caller meanwhile is re-raised after."""
    tasks = list(tasks)
    pending = {task for task in tasks if not task.done()}
    interrupted = False
    while pending:
        for task in pending:
            task.cancel()
        try:
            _, pending = await asyncio.wait(pending, timeout=_RECANCEL_S)
        except asyncio.CancelledError:
            interrupted = True
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved: an error in a task being torn down is not news
    if interrupted:
        raise asyncio.CancelledError


def kill_child(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL an asyncio child that may have exited already; asyncio's child watcher reaps it.

    Not ``proc.kill()``: on Python ≤ 3.11 ``Popen.send_signal`` first polls with ``waitpid``, and a child that
    had just exited is then reaped behind the watcher's back, which logs "Unknown child process pid N, will
    report returncode 255" into the verb's stderr (seen in a canary watch's cron output under load). A zombie
    keeps its pid until the watcher reaps it, so the signal cannot reach another process.
    """
    if proc.returncode is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # reaped and gone between the check and the signal
        pass
