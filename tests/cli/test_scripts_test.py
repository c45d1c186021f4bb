"""scripts/test says what each of its modes runs (the full suite; --fast, the contributors' loop)."""

from __future__ import annotations

import subprocess

from testpaths import REPO


def test_the_help_says_what_each_mode_runs_without_running_anything() -> None:
    done = subprocess.run([str(REPO / "scripts" / "test"), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    fast = done.stdout.split("scripts/test --fast", 1)[1]
    assert all(folder in fast for folder in ("tests/unit", "tests/adapters", "tests/cli")), done.stdout
    assert "no root, no system tests" in fast and "tests/system" in done.stdout.split("scripts/test --fast", 1)[0]
