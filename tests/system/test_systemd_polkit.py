"""The generated polkit rule on a real systemd and polkitd: a member of the group restarts the listed
unit, and nothing else — not another unit, not daemon-reload, not daemon-reexec."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Iterator

import pytest
from nobody import as_nobody

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.errors import AccessDenied
from deployctl.sandbox import Sandbox
from deployctl.units.polkit import polkit_rule

pytestmark = [pytest.mark.system, pytest.mark.timeout(90)]

SLEEPER = "/bin/sh -c 'exec sleep 600'"


def _try_each(actions: list[tuple[str, str]]) -> Callable[[Systemd], Awaitable[dict[str, str]]]:
    """Each (verb, unit) in turn: "ok" or "AccessDenied"."""

    async def attempt(systemd: Systemd) -> dict[str, str]:
        calls: dict[str, Callable[[str], Awaitable[object]]] = {
            "restart": systemd.restart, "stop": systemd.stop, "reset-failed": systemd.reset_failed,
            "reload": lambda _unit: systemd.reload(),
            "reexecute": lambda _unit: systemd._manager("Reexecute"),
        }
        result = {}
        for verb, unit in actions:
            try:
                await calls[verb](unit)
                result[f"{verb} {unit}"] = "ok"
            except AccessDenied:
                result[f"{verb} {unit}"] = "AccessDenied"
        return result

    return attempt


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
    result = await asyncio.to_thread(as_nobody, sandbox, _try_each([
        ("restart", listed), ("reset-failed", listed), ("stop", listed),
        ("restart", other), ("reload", ""), ("reexecute", ""),
    ]))
    assert result == {
        f"restart {listed}": "ok", f"reset-failed {listed}": "ok", f"stop {listed}": "ok",
        f"restart {other}": "AccessDenied", "reload ": "AccessDenied", "reexecute ": "AccessDenied",
    }, result
    time.sleep(0.2)
    assert systemd.bus.systemd_name == before  # PID 1 was not re-executed
    assert (await systemd.unit_state(other)).active_state == "inactive"
