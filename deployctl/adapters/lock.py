"""One lock per unit on the host: ``flock`` on ``<lock-dir>/<unit>.lock`` (default /run/deployctl/locks).

Keyed by the unit, not by the ledger: two commands with different ``--state-dir`` still exclude each
other on the same unit. The kernel releases a ``flock`` when its holder dies, so a crashed controller
never blocks the next one, and the file is never unlinked or replaced, so the lock is always the same
inode and two holders cannot exist (a "stale lock" break that unlinked the file could hand it to a
second process while a first one had just taken it). The descriptor is close-on-exec, so no program
deployctl runs inherits it.

Under the lock, the holder writes its description into the file (pid, process start time, verb, who,
since) for ``Busy`` messages and ``deployctl abort``. A reader may find a description of a dead holder
while the lock is held: a new holder that has not written its own yet, or a descriptor inherited by a
fork without exec. Either way the lock is busy; the message says so and how to find the process.
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from deployctl.errors import Busy, DeployctlError, EnvironmentUnfit

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


DEFAULT_LOCK_DIR = Path("/run/deployctl/locks")


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


class DeploymentLock:
    """``lock.acquire("promote", who)`` raises ``Busy`` at once when held; ``with lock:`` releases it."""

    def __init__(self, lock_dir: Path, unit: str, deployment: str | None = None) -> None:
        self.unit = unit
        self.deployment = deployment or unit
        self.dir = Path(lock_dir)
        self.path = self.dir / f"{_SAFE_NAME.sub('_', unit)}.lock"
        self._fd: int | None = None

    def holder(self) -> Holder | None:
        """Who holds the lock now (None when free or when the holder's record is unreadable)."""
        if not self._held_by_someone():
            return None
        return self._read_holder()

    def _read_holder(self) -> Holder | None:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text() or "null")
            return Holder(**data) if data else None
        except (OSError, ValueError, TypeError):
            return None

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
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except PermissionError as exc:
            if os.geteuid() == 0:
                raise DeployctlError(f"cannot open the lock {self.path}: {exc.strerror}",
                                     hint="DEPLOYCTL_LOCK_DIR moves the lock directory") from exc
            # Not root: the lock is only the first of the things the verb cannot do (install units, restart
            # them over D-Bus, write the ledger); moving the lock directory would only postpone the refusal.
            raise EnvironmentUnfit(
                f"deployctl {verb} needs root: it installs the unit in the systemd directories, restarts it over "
                f"D-Bus and writes the ledger; as {_user()} it cannot even take the lock {self.path} ({exc.strerror})",
                hint=f"run it as root (sudo deployctl {verb} …); without root, `deployctl promote --dry-run` shows "
                     "the plan and status, history and show read the ledger") from exc
        except OSError as exc:
            raise DeployctlError(f"cannot open the lock {self.path}: {exc.strerror}",
                                 hint="DEPLOYCTL_LOCK_DIR moves the lock directory") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(f"deployment {self.deployment} is busy: {self._who_holds()} holds the lock of {self.unit}",
                       hint=f"wait for it to finish, or stop it with `deployctl abort -d {self.deployment}`"
                            f" (`fuser -v {self.path}` shows the process)") from None
        me = Holder(os.getpid(), process_start_ticks(os.getpid()), verb, who, time.time())
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(asdict(me)).encode(), 0)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        return me

    def _who_holds(self) -> str:
        current = self._read_holder()
        if current is None:
            return "another deployctl process"
        if not is_alive(current):
            return (f"a process other than the one recorded ({current.describe()}, which has ended: the new holder"
                    " is still writing its record, or a child inherited the descriptor)")
        return current.describe()

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
