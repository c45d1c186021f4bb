"""A canary run stopped during its watch (``deployctl abort``, ``systemctl stop``, Ctrl-C): exit 130 and
the reason, with nothing to roll back — a real signal to this process, a real lock directory."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from deployctl.adapters.lock import DeploymentLock
from deployctl.flows.canary import _stoppable
from deployctl.flows.abort import abort_request_path
from deployctl.errors import ExitCode, Interrupted


async def _signal_soon(sig: signal.Signals) -> None:
    await asyncio.sleep(0.05)
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_the_watch_with_exit_130_and_says_nothing_changed(tmp_path: Path, sig: signal.Signals):
    lock = DeploymentLock(tmp_path, "sglang-glm5.service", "glm5")
    abort_request_path(lock).write_text("aborted by alice with `deployctl abort`")
    kill = asyncio.ensure_future(_signal_soon(sig))
    with pytest.raises(Interrupted) as caught:
        await _stoppable(asyncio.sleep(30), lock)
    await kill
    assert caught.value.exit_code == ExitCode.INTERRUPTED
    assert str(caught.value) == "aborted by alice with `deployctl abort` during the watch; nothing was changed"
    assert not abort_request_path(lock).exists()


async def test_after_the_watch_the_signals_are_the_promotes_again(tmp_path: Path):
    lock = DeploymentLock(tmp_path, "sglang-glm5.service", "glm5")
    assert await _stoppable(asyncio.sleep(0, result="watched"), lock) == "watched"
    loop = asyncio.get_running_loop()
    # no handler of the watch is left behind: the promote that follows installs its own
    assert loop.remove_signal_handler(signal.SIGTERM) is False
