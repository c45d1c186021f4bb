"""Run D-Bus calls as ``nobody`` inside the sandbox: what a non-root operator gets from systemd (and polkit)."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
from typing import Awaitable, Callable

from deployctl.adapters.systemd import Systemd
from deployctl.sandbox import Sandbox

NOBODY = 65534  # nobody, whose primary group is nogroup (65534) on Debian


def as_nobody(sandbox: Sandbox, attempt: Callable[[Systemd], Awaitable[dict[str, str]]]) -> dict[str, str]:
    """Fork; the child enters the sandbox's mount namespace, drops to nobody:nogroup, connects to the
    sandbox's bus and returns what ``attempt`` reports (or ``{"error": ...}`` for anything it raised)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        result: dict[str, str] = {}
        try:
            os.close(read_fd)
            libc = ctypes.CDLL(None, use_errno=True)
            ns = os.open(f"/proc/{sandbox.pid}/ns/mnt", os.O_RDONLY)
            if libc.setns(ns, 0x00020000) != 0:  # CLONE_NEWNS
                raise OSError(ctypes.get_errno(), "setns")
            os.chdir("/")
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)

            async def run() -> None:
                systemd = await Systemd.connect("unix:path=/run/dbus/system_bus_socket")
                try:
                    result.update(await attempt(systemd))
                finally:
                    await systemd.close()

            asyncio.run(run())
        except BaseException as exc:  # report anything to the parent
            result["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            os.write(write_fd, json.dumps(result).encode())
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)
