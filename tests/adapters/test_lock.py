"""The per-unit lock: busy at once, free after the holder dies, never two holders, one lock per unit
whatever the state directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deployctl.adapters.lock import DeploymentLock, Holder, is_alive, process_start_ticks
from deployctl.commands.demo import demo_inventory
from deployctl.errors import Busy, ExitCode
from deployctl.inventory.model import load_inventory
from deployctl.operations.site import make_site

HOLD = """
import sys, time
from pathlib import Path
from deployctl.adapters.lock import DeploymentLock
lock = DeploymentLock(Path(sys.argv[1]), "sglang-glm5.service", "glm5")
lock.acquire("promote", "alice")
print("held", flush=True)
time.sleep(60)
"""

# One contender: takes the lock as often as it can; while holding, it owns a marker file that only one
# process may have created (O_EXCL). The last hold of each contender ends by dying without releasing,
# leaving the record of a dead holder behind: the case a "stale lock" break used to mishandle.
CONTENDER = """
import os, sys, time
from pathlib import Path
from deployctl.adapters.lock import DeploymentLock
from deployctl.errors import Busy
lock_dir, marker, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
held = 0
while held < rounds:
    lock = DeploymentLock(lock_dir, "sglang-glm5.service", "glm5")
    try:
        lock.acquire("promote", str(os.getpid()))
    except Busy:
        continue
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        print("TWO HOLDERS", flush=True)
        os._exit(3)
    os.close(fd)
    time.sleep(0.001)
    os.unlink(marker)
    held += 1
    if held == rounds:
        os._exit(0)  # dies holding the lock: the kernel releases it, the file still names this pid
    lock.release()
"""


def _holder_process(lock_dir: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_acquirer_is_busy_at_once_and_told_who(tmp_path: Path) -> None:
    proc = _holder_process(tmp_path)
    try:
        lock = DeploymentLock(tmp_path, "sglang-glm5.service", "glm5")
        started = time.monotonic()
        with pytest.raises(Busy) as err:
            lock.acquire("promote", "bob")
        assert time.monotonic() - started < 1.0
        assert err.value.exit_code == ExitCode.BUSY
        assert f"pid {proc.pid}" in err.value.message and "alice" in err.value.message
        assert "deployctl abort -d glm5" in (err.value.hint or "")
        holder = lock.holder()
        assert holder is not None and holder.pid == proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_lock_is_free_once_the_holder_is_killed(tmp_path: Path) -> None:
    proc = _holder_process(tmp_path)
    proc.kill()
    proc.wait()
    lock = DeploymentLock(tmp_path, "sglang-glm5.service", "glm5")
    assert lock.holder() is None
    me = lock.acquire("promote", "bob")
    assert me.verb == "promote" and lock.holder() == me
    lock.release()
    assert lock.holder() is None
    assert lock.path.exists()  # never unlinked: always the same inode


def test_a_lock_held_by_someone_else_than_its_record_is_busy_not_broken(tmp_path: Path) -> None:
    """The recorded holder is dead but a descriptor (inherited, or a new holder still writing) holds it."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    lock = DeploymentLock(tmp_path, "sglang-glm5.service", "glm5")
    lock.path.write_text(json.dumps({"pid": dead.pid, "start_ticks": 1, "verb": "promote", "who": "x", "since": 0}))
    other = subprocess.Popen(["flock", "--exclusive", str(lock.path), "sleep", "60"], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while not lock._held_by_someone():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with pytest.raises(Busy) as err:
            lock.acquire("promote", "bob")
        assert "has ended" in err.value.message and "fuser -v" in (err.value.hint or "")
        assert lock._held_by_someone() and lock.path.exists()
    finally:
        other.kill()
        other.wait()


def test_racing_processes_never_hold_the_lock_together(tmp_path: Path) -> None:
    marker = tmp_path / "inside"
    total = 0
    for _ in range(6):
        procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(tmp_path / "locks"), str(marker), "40"],
                                  stdout=subprocess.PIPE, text=True) for _ in range(4)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, outs
        total += 4 * 40
    assert total == 960 and not marker.exists()


def test_one_lock_per_unit_whatever_the_state_directory(tmp_path: Path) -> None:
    demo_inventory(tmp_path / "inv.yaml")
    inv = load_inventory(tmp_path / "inv.yaml")
    env = {"DEPLOYCTL_LOCK_DIR": str(tmp_path / "locks")}
    one = make_site(inv, "glm5-sim", tmp_path / "state-a", env)
    two = make_site(inv, "glm5-sim", tmp_path / "state-b", env)
    other = make_site(inv, "qwen35-sim", tmp_path / "state-a", env)
    with one.lock() as held:
        held.acquire("promote", "alice")
        with pytest.raises(Busy):
            two.lock().acquire("rollback", "bob")
        with other.lock() as free:  # another unit: its own lock
            free.acquire("promote", "carol")
    assert one.lock().path == two.lock().path == tmp_path / "locks" / f"{one.unit}.lock"


def test_liveness_tells_a_reused_pid_from_the_holder() -> None:
    me = Holder(os.getpid(), process_start_ticks(os.getpid()), "promote", "x", 0)
    assert is_alive(me)
    assert not is_alive(Holder(os.getpid(), (me.start_ticks or 0) + 1, "promote", "x", 0))


def test_unit_names_cannot_escape_the_lock_directory(tmp_path: Path) -> None:
    lock = DeploymentLock(tmp_path, "../../etc/passwd")
    assert lock.path.parent == tmp_path
