"""A real systemd for the system tests: booted once per session as PID 1 of a private namespace.

Needs root (tests/conftest.py skips the ``system`` tests without it, and fails them under CI=true).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

import pytest

from deployctl.adapters.systemd import Systemd
from deployctl.adapters.unitfiles import UnitFiles
from deployctl.operations.restart import Endpoint
from deployctl.sandbox import Sandbox


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    if os.geteuid() != 0:
        pytest.skip("the sandboxed systemd needs root")
    with Sandbox.boot() as box:
        yield box


@pytest.fixture
def endpoint(sandbox: Sandbox) -> Endpoint:
    return sandbox.endpoint()


@pytest.fixture
def unit_files(endpoint: Endpoint) -> UnitFiles:
    return endpoint.unit_files()


@pytest.fixture
async def systemd(endpoint: Endpoint) -> AsyncIterator[Systemd]:
    connection = await endpoint.connect()
    try:
        yield connection
    finally:
        await connection.close()


def service_unit(exec_start: str, *, deployment: str = "systest", extra_unit: str = "", extra_service: str = "") -> str:
    return (
        "[Unit]\n"
        f"Description=deployctl system test ({deployment})\n"
        f"X-Deployctl-Deployment={deployment}\n"
        "X-Deployctl-Profile=test\n"
        f"{extra_unit}"
        "\n[Service]\n"
        "Type=exec\n"
        "Environment=PYTHONUNBUFFERED=1\n"
        f"ExecStart={exec_start}\n"
        f"{extra_service}"
    )


@pytest.fixture
def unit_text() -> Callable[..., str]:
    """``unit_text(exec_start, **options)``: a managed Type=exec unit running ``exec_start``."""
    return service_unit


@pytest.fixture
def python_unit(tmp_path: Path) -> Callable[..., str]:
    """``python_unit(code, **unit_options)``: a unit whose main process runs ``code`` (a Python script).

    /tmp is shared with the sandbox, so the script file written here is visible to its systemd."""
    counter = iter(range(1_000_000))

    def make(code: str, **options: str) -> str:
        script = tmp_path / f"service_{next(counter)}.py"
        script.write_text(code)
        return service_unit(f"{sys.executable} -u {script}", **options)

    return make
