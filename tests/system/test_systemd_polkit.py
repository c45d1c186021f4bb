"""The generated polkit rule on a real systemd and polkitd: a member of the group restarts the listed
unit, and nothing else — not another unit, not daemon-reload, not daemon-reexec."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import time
from typing import Callable, Iterator

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.errors import AccessDenied
from deployctl.live.sandbox import Sandbox
from deployctl.units.polkit import polkit_rule

pytestmark = [pytest.mark.system, pytest.mark.timeout(90)]

NOBODY = 65534  # nobody, whose primary group is nogroup (65534) on Debian
SLEEPER = "/bin/sh -c 'exec sleep 600'"


def _as_nobody(sandbox: Sandbox, actions: list[tuple[str, str]]) -> dict[str, str]:
    """Fork; the child enters the sandbox's mount namespace, drops to nobody:nogroup and tries each
    (verb, unit); returns "ok" or the error's class name per action."""
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

            async def attempt() -> None:
                systemd = await Systemd.connect("unix:path=/run/dbus/system_bus_socket")
                calls: dict[str, Callable[[str], object]] = {
                    "restart": systemd.restart, "stop": systemd.stop, "reset-failed": systemd.reset_failed,
                    "reload": lambda _unit: systemd.reload(),
                    "reexecute": lambda _unit: systemd._manager("Reexecute"),
                }
                try:
                    for verb, unit in actions:
                        try:
                            await calls[verb](unit)  # type: ignore[misc]
                            result[f"{verb} {unit}"] = "ok"
                        except AccessDenied:
                            result[f"{verb} {unit}"] = "AccessDenied"
                finally:
                    await systemd.close()

            asyncio.run(attempt())
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


@pytest.fixture
def polkit_rules(sandbox: Sandbox) -> Iterator[Callable[[str], None]]:
    """``install(rule_text)``: polkitd running in the sandbox with only this rule (a private rules.d)."""
    mounted = sandbox.run(["mount", "-t", "tmpfs", "tmpfs", "/etc/polkit-1/rules.d"])
    assert mounted.returncode == 0, mounted.stderr
    started = sandbox.run(["systemctl", "start", "polkit.service"])
    assert started.returncode == 0, f"polkitd (Debian package polkitd) is needed: {started.stderr}"

    def install(text: str) -> None:
        (sandbox.root / "etc/polkit-1/rules.d/50-deployctl.rules").write_text(text)
        # polkitd re-reads the directory on change; restarting it makes the moment certain.
        assert sandbox.run(["systemctl", "restart", "polkit.service"]).returncode == 0

    try:
        yield install
    finally:
        sandbox.run(["systemctl", "stop", "polkit.service"])
        sandbox.run(["umount", "/etc/polkit-1/rules.d"])


async def test_the_rule_grants_the_listed_unit_and_nothing_else(
        sandbox: Sandbox, systemd: Systemd, unit_files: UnitFiles, unit_text: Callable[..., str],
        polkit_rules: Callable[[str], None]) -> None:
    listed, other = "sglang-pk-listed.service", "sglang-pk-other.service"
    for name in (listed, other):
        unit_files.install(name, unit_text(SLEEPER))
    await systemd.reload()
    polkit_rules(polkit_rule([listed], group="nogroup"))
    before = systemd.bus.systemd_name
    result = await asyncio.to_thread(_as_nobody, sandbox, [
        ("restart", listed), ("reset-failed", listed), ("stop", listed),
        ("restart", other), ("reload", ""), ("reexecute", ""),
    ])
    assert result == {
        f"restart {listed}": "ok", f"reset-failed {listed}": "ok", f"stop {listed}": "ok",
        f"restart {other}": "AccessDenied", "reload ": "AccessDenied", "reexecute ": "AccessDenied",
    }, result
    time.sleep(0.2)
    assert systemd.bus.systemd_name == before  # PID 1 was not re-executed
    assert (await systemd.unit_state(other)).active_state == "inactive"
