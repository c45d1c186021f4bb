"""One lock per deployment on the host: ``flock`` on ``<state-dir>/locks/<deployment>.lock``.

The kernel releases a ``flock`` when its holder dies, so a crashed controller never blocks the next one.
The file also names its holder (pid, process start time, verb, who, since) for ``Busy`` messages and for
``deployctl abort``. A lock still held while the named holder is dead (its descriptor inherited by an
orphaned child) is stale: it is broken by replacing the file, under a guard lock so that two breakers
cannot race, and every acquirer checks it locked the file that is at the path now (inode check).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deployctl.errors import Busy, DeployctlError

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.@-]")


@dataclass(frozen=True)
class Holder:
    pid: int
    start_ticks: int | None  # /proc/PID/stat field 22: tells a reused pid from the original process
    verb: str
    who: str
    since: float

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"`deployctl {self.verb}` (pid {self.pid}, {self.who}, since {when})"


def process_start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return int(stat.rsplit(")", 1)[1].split()[19])


def is_alive(holder: Holder) -> bool:
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if holder.start_ticks is None:
        return True
    return process_start_ticks(holder.pid) == holder.start_ticks


class DeploymentLock:
    """``lock.acquire("promote", who)`` raises ``Busy`` at once when held; ``with lock:`` releases it."""

    def __init__(self, state_dir: Path, deployment: str) -> None:
        self.deployment = deployment
        self.dir = Path(state_dir) / "locks"
        self.path = self.dir / f"{_SAFE_NAME.sub('_', deployment)}.lock"
        self._fd: int | None = None

    def holder(self) -> Holder | None:
        """Who holds the lock now (None when free or when the holder's record is unreadable)."""
        if not self._held_by_someone():
            return None
        return self._read_holder()

    def _read_holder(self) -> Holder | None:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text() or "null")
        except (OSError, ValueError):
            return None
        return Holder(**data) if data else None

    def _held_by_someone(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def acquire(self, verb: str, who: str) -> Holder:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DeployctlError(f"cannot create the lock directory {self.dir}: {exc}", hint="run as root") from exc
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise DeployctlError(f"cannot open the lock {self.path}: {exc.strerror}", hint="run as root") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                current = self._read_holder()
                if current is not None and not is_alive(current):
                    self._break_stale(current)
                    continue
                what = current.describe() if current else "another deployctl process"
                raise Busy(
                    f"deployment {self.deployment} is busy: {what} holds its lock",
                    hint=f"wait for it to finish, or stop it with `deployctl abort -d {self.deployment}`",
                ) from None
            if not self._still_at_path(fd):
                os.close(fd)  # a breaker replaced the file between our open and our flock
                continue
            me = Holder(os.getpid(), process_start_ticks(os.getpid()), verb, who, time.time())
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(asdict(me)).encode(), 0)
            os.fsync(fd)
            self._fd = fd
            return me
        raise Busy(f"deployment {self.deployment}'s lock keeps changing hands", hint="try again in a moment")

    def _still_at_path(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def _break_stale(self, stale: Holder) -> None:
        guard = os.open(self.dir / ".guard", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)
            # Re-read under the guard: another breaker may already have replaced the file.
            if self._read_holder() == stale:
                try:
                    self.path.unlink()
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        raise
        finally:
            os.close(guard)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> "DeploymentLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
