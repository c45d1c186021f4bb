"""The runner's ``Units`` fake and the real thing agree: one list of scenarios, run step by step on
``FakeUnits`` (tests/support/runner_fakes.py, what the runner and recovery tests use) and on ``LiveUnits``
(unit files, systemd over D-Bus and the journal, on the sandboxed systemd; marker ``system``).

Each scenario starts from the same host: the known-good unit persisted and running. It acts through the
``Units`` protocol only and checks what a runner test relies on: which file is installed where, whether the
unit runs, which unit a restart starts (the known-good says ``max_running_requests=48`` when it starts, the
candidate 26), how a crash ends, what each call says, and what it refuses. A runner test that passes on the
fake then says something about the real thing; a fake that drifts from it fails here.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, AsyncIterator, Awaitable, Callable

import pytest
from support.clirun import free_port
from support.promote import startup
from support.runner_fakes import FakeUnits

from deployctl.errors import SystemdError, UnitNotFound
from deployctl.live.bindings import LiveUnits
from deployctl.live.protocols import Units
from deployctl.decisions.evidence import StartOutcome
from deployctl.startup.readiness import READY_LINE
from deployctl.units.stamp import unit_hash

pytestmark = pytest.mark.timeout(60)

_PREFIX = "[2026-01-01 10:00:00] "  # SGLang's log prefix: the startup parser reads lines that carry it


def _serves(max_running_requests: int) -> str:
    """A server that states its scheduler's decision, says it is ready, and serves."""
    return (
        "import time\n"
        f"print({_PREFIX!r} + 'max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={max_running_requests}, context_len=4096')\n"
        f"print({_PREFIX + READY_LINE!r})\n"
        "time.sleep(600)\n"
    )


CRASHES = f"import sys\nprint({_PREFIX!r} + 'Load weight begin.')\nsys.exit(1)\n"
_names = itertools.count(1)


@dataclass
class Texts:
    known_good: str
    candidate: str
    crashes: str


@dataclass
class Host:
    """What a scenario acts through (``units``) and what it observes, the same on both sides."""

    name: str
    units: Units
    texts: Texts
    persisted: Callable[[], str | None]  # the unit file systemd falls back to (/etc)
    trial: Callable[[], str | None]  # the trial over it (/run), None when there is none
    running: Callable[[], Awaitable[bool]]

    async def restart(self) -> StartOutcome:
        return await self.units.restart_and_wait(self.name, 20)


# --- the two sides --------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _fake(name: str, texts: Texts, request: pytest.FixtureRequest) -> AsyncIterator[Host]:
    # What the real units do when started, told to the fake as the runner tests tell it.
    fake = FakeUnits(installed={name: texts.known_good}, outcomes={
        texts.candidate: StartOutcome(True, "ready", startup=startup(26)),
        texts.crashes: StartOutcome(False, "crashed", "exited with status 1"),
    })

    async def running() -> bool:
        return fake.running.get(name, False)

    yield Host(name, fake, texts, lambda: fake.persisted.get(name), lambda: fake.trials.get(name), running)


@contextlib.asynccontextmanager
async def _real(name: str, texts: Texts, request: pytest.FixtureRequest) -> AsyncIterator[Host]:
    endpoint = request.getfixturevalue("endpoint")  # boots the sandboxed systemd, for this side only
    files = endpoint.unit_files()
    # The health probe asks a port nobody serves: readiness comes from the journal, as for a silent /health.
    site = SimpleNamespace(unit_files=endpoint.unit_files, endpoint=endpoint, url=f"http://127.0.0.1:{free_port()}")
    systemd = await endpoint.connect()

    async def running() -> bool:
        return (await systemd.unit_state(name)).running

    def text(found: Any) -> str | None:
        return found.text if found is not None else None

    try:
        files.install(name, texts.known_good)
        await systemd.reload()
        yield Host(name, LiveUnits(systemd, site), texts, lambda: text(files.known_good(name)),
                   lambda: text(files.trial(name)), running)
    finally:
        await systemd.stop(name)
        await systemd.close()


@pytest.fixture(params=[pytest.param(_fake, id="fake"), pytest.param(_real, id="real", marks=pytest.mark.system)])
async def host(request: pytest.FixtureRequest, python_unit: Callable[..., str]) -> AsyncIterator[Host]:
    texts = Texts(python_unit(_serves(48)), python_unit(_serves(26)), python_unit(CRASHES))
    async with request.param(f"contract-{next(_names)}.service", texts, request) as made:
        first = await made.restart()
        assert first.ready and first.startup.max_running_requests == 48 and await made.running()
        yield made


# --- the scenarios ---------------------------------------------------------------------------------------


async def test_a_trial_runs_over_the_known_good_and_a_restore_removes_it(host: Host) -> None:
    t = host.texts
    where = await host.units.install_trial(host.name, t.candidate)
    assert where.endswith(f"/run/systemd/system.control/{host.name}")
    assert host.trial() == t.candidate and host.persisted() == t.known_good
    assert await host.running()  # installing starts nothing: the known-good still serves
    started = await host.restart()
    assert started.ready and started.kind == "ready" and started.startup.max_running_requests == 26

    assert await host.units.restore(host.name, t.known_good, unit_hash(t.known_good)) == "removed the trial"
    assert host.trial() is None and host.persisted() == t.known_good
    back = await host.restart()
    assert back.ready and back.startup.max_running_requests == 48 and await host.running()


async def test_a_keep_persists_the_trial_once_and_a_restore_reinstalls_the_known_good(host: Host) -> None:
    t = host.texts
    await host.units.install_trial(host.name, t.candidate)
    await host.restart()
    said = await host.units.keep(host.name, unit_hash(t.candidate))
    assert said.startswith("persisted to ") and said.endswith(f"/etc/systemd/system/{host.name}")
    assert host.trial() is None and host.persisted() == t.candidate
    # Kept again (a resumed keep): nothing changes, the known-good's backup included.
    assert await host.units.keep(host.name, unit_hash(t.candidate)) == said
    assert host.persisted() == t.candidate
    assert (await host.restart()).startup.max_running_requests == 26

    # Rolled back without the known-good's text at hand: the backup the keep made has it.
    said = await host.units.restore(host.name, None, unit_hash(t.known_good))
    assert said == "reinstalled the known-good unit"
    assert host.persisted() == t.known_good and host.trial() is None
    assert (await host.restart()).startup.max_running_requests == 48


async def test_a_crashing_candidate_stops_the_unit_and_the_known_good_comes_back(host: Host) -> None:
    t = host.texts
    await host.units.install_trial(host.name, t.crashes)
    crashed = await host.restart()
    assert not crashed.ready and crashed.kind == "crashed"
    assert not await host.running()
    assert await host.units.restore(host.name, t.known_good, unit_hash(t.known_good)) == "removed the trial"
    back = await host.restart()
    assert back.ready and back.startup.max_running_requests == 48 and await host.running()


async def test_a_keep_refuses_a_trial_that_is_not_the_planned_candidate(host: Host) -> None:
    t = host.texts
    await host.units.install_trial(host.name, t.candidate)
    with pytest.raises(SystemdError):
        await host.units.keep(host.name, unit_hash(t.crashes))
    assert host.trial() == t.candidate and host.persisted() == t.known_good


async def test_a_keep_whose_trial_is_gone_refuses(host: Host) -> None:
    with pytest.raises(SystemdError):
        await host.units.keep(host.name, unit_hash(host.texts.candidate))
    assert host.persisted() == host.texts.known_good and host.trial() is None


async def test_a_restore_with_nothing_to_undo_says_so(host: Host) -> None:
    t = host.texts
    assert await host.units.restore(host.name, t.known_good, unit_hash(t.known_good)) == \
        "the known-good unit was in place"
    assert host.persisted() == t.known_good and await host.running()


async def test_a_restore_whose_known_good_is_nowhere_refuses_and_changes_nothing(host: Host) -> None:
    t = host.texts
    await host.units.install_trial(host.name, t.candidate)
    await host.units.keep(host.name, unit_hash(t.candidate))
    with pytest.raises(SystemdError):
        await host.units.restore(host.name, None, unit_hash("a unit that was never installed"))
    assert host.persisted() == t.candidate


async def test_restarting_a_unit_that_is_not_installed_is_unit_not_found(host: Host) -> None:
    with pytest.raises(UnitNotFound):
        await host.units.restart_and_wait(f"never-{host.name}", 5)
