"""``deployctl abort`` and the signals that stop a long flow: an abort request left next to the deployment's lock,
and the handlers that make a running promote, bisect or canary rollback roll back and stop."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Protocol

from deployctl.adapters.lock import DeploymentLock


class Abortable(Protocol):
    def request_abort(self, reason: str) -> None: ...


def abort_on_signals(target: Abortable, lock: DeploymentLock, what: str = "promote") -> None:
    """SIGTERM/SIGINT (``deployctl abort``, ``systemctl stop``, Ctrl-C) make ``target`` roll back and stop."""
    abort_request(lock)  # a request left for a verb that had already ended is not for this one
    loop = asyncio.get_running_loop()

    def abort(signame: str) -> None:
        target.request_abort(abort_request(lock) or f"interrupted ({signame})")
        print(f"\n{signame}: stopping the {what} and rolling back", file=sys.stderr)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, abort, sig.name)


def abort_request_path(lock: DeploymentLock) -> Path:
    return lock.path.with_suffix(".abort")


def abort_request(lock: DeploymentLock) -> str | None:
    """The reason ``deployctl abort`` left next to the lock, if it was that and not a plain signal."""
    path = abort_request_path(lock)
    try:
        text = path.read_text().strip()
        path.unlink()
    except OSError:
        return None
    return text or None
