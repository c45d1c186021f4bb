"""The per-deployment lock: busy at once, free after the holder dies, stale records broken safely."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from deployctl.adapters.lock import (
    DeploymentLock,
    Holder,
    is_alive,
    process_start_ticks,
)
from deployctl.errors import Busy, ExitCode

HOLD = """
import sys, time
from pathlib import Path
from deployctl.adapters.lock import DeploymentLock
lock = DeploymentLock(Path(sys.argv[1]), "glm5")
lock.acquire("promote", "alice")
print("held", flush=True)
time.sleep(60)
"""


def _holder_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_acquirer_is_busy_at_once_and_told_who(tmp_path):
    proc = _holder_process(tmp_path)
    try:
        lock = DeploymentLock(tmp_path, "glm5")
        started = time.monotonic()
        with pytest.raises(Busy) as err:
            lock.acquire("promote", "bob")
        assert time.monotonic() - started < 1.0
        assert err.value.exit_code == ExitCode.BUSY
        assert f"pid {proc.pid}" in err.value.message and "alice" in err.value.message
        assert "deployctl abort -d glm5" in err.value.hint
        assert lock.holder().pid == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_lock_is_free_once_the_holder_is_killed(tmp_path):
    proc = _holder_process(tmp_path)
    proc.kill()
    proc.wait()
    lock = DeploymentLock(tmp_path, "glm5")
    assert lock.holder() is None
    me = lock.acquire("promote", "bob")
    assert me.verb == "promote" and lock.holder() == me
    lock.release()
    assert lock.holder() is None


def test_stale_lock_held_by_an_orphan_is_broken(tmp_path):
    """The recorded holder is dead but an inherited descriptor still holds the flock."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock_path = tmp_path / "locks" / "glm5.lock"
    lock_path.parent.mkdir(parents=True)
    lock_path.write_text(json.dumps({"pid": dead.pid, "start_ticks": 1, "verb": "promote", "who": "x", "since": 0}))
    orphan = subprocess.Popen(
        ["flock", "--exclusive", str(lock_path), "sleep", "60"], stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 5
        lock = DeploymentLock(tmp_path, "glm5")
        while not lock._held_by_someone():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with lock:
            me = lock.acquire("promote", "bob")
            assert me.pid == lock.holder().pid
    finally:
        orphan.kill()
        orphan.wait()


def test_liveness_tells_a_reused_pid_from_the_holder():
    import os

    me = Holder(os.getpid(), process_start_ticks(os.getpid()), "promote", "x", 0)
    assert is_alive(me)
    assert not is_alive(Holder(os.getpid(), (me.start_ticks or 0) + 1, "promote", "x", 0))


def test_deployment_names_cannot_escape_the_lock_directory(tmp_path):
    lock = DeploymentLock(tmp_path, "../../etc/passwd")
    assert lock.path.parent == tmp_path / "locks"
