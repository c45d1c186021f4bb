"""``deployctl canary install`` on the sandboxed systemd is all or nothing (issue 44.6): with no system bus
it writes nothing; when systemd refuses after the files were written, they are put back as they were; and
``--dry-run`` says what it would write and changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.errors import ExitCode
from deployctl.sandbox import Sandbox
from testpaths import REPO

pytestmark = [pytest.mark.system, pytest.mark.parallel]  # no verdicts: what is written, refused or restored

TIMER = "deployctl-canary@glm5.timer"
UNITS = ("deployctl-canary@.service", "deployctl-canary@.timer", "deployctl-promote@.service")


def _install(box: Sandbox, tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deployctl", "canary", "install", "glm5", "-i",
                           str(REPO / "inventory" / "example.yaml"), "--state-dir", str(tmp / "state"),
                           "--textfile-dir", str(tmp / "text"), *args],
                          env={**os.environ, **box.env(), "PYTHONPATH": str(REPO), "NO_COLOR": "1", **env},
                          capture_output=True, text=True, timeout=120)


def _canary_files(unit_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(unit_dir)) for p in unit_dir.rglob("deployctl-*"))


def test_dry_run_says_what_it_would_write_and_changes_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    done = _install(sandbox, tmp_path, "--dry-run", "--every", "15min")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in (*UNITS, f"{TIMER}.d/schedule.conf"):
        assert f"would write {sandbox.unit_dir / name} (new)" in done.stdout, done.stdout
    assert f"would enable and start {TIMER}" in done.stdout
    assert _canary_files(sandbox.unit_dir) == [] and not (tmp_path / "state").exists()
    assert sandbox.run(["systemctl", "is-enabled", TIMER]).stdout.strip() != "enabled"


def test_without_a_system_bus_nothing_is_written(sandbox: Sandbox, tmp_path: Path) -> None:
    done = _install(sandbox, tmp_path, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={tmp_path}/no-bus")
    assert done.returncode == ExitCode.ENVIRONMENT, done.stdout + done.stderr
    assert "nothing of the canary's install was written" in done.stderr
    assert _canary_files(sandbox.unit_dir) == []
    assert not (tmp_path / "state").exists() and not (tmp_path / "text").exists()


def test_a_refusal_by_systemd_after_writing_puts_the_files_back(sandbox: Sandbox, tmp_path: Path) -> None:
    # A unit directory systemd does not read: the files are written, then enabling the timer fails.
    elsewhere = tmp_path / "units"
    elsewhere.mkdir()
    (elsewhere / UNITS[0]).write_text("# the operator's own canary service\n")
    done = _install(sandbox, tmp_path, DEPLOYCTL_UNIT_DIR=str(elsewhere))
    assert done.returncode == ExitCode.FAILED, done.stdout + done.stderr
    assert "nothing of the canary's install was kept (its files are as they were)" in done.stderr, done.stderr
    assert _canary_files(elsewhere) == [UNITS[0]]
    assert (elsewhere / UNITS[0]).read_text() == "# the operator's own canary service\n"
    assert not (tmp_path / "text").exists()
    assert sandbox.run(["systemctl", "is-enabled", TIMER]).stdout.strip() != "enabled"
