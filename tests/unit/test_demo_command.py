"""What `deployctl demo --keep` tells the operator to run next must run in their shell (issue 44, item 12)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.commands.demo import explore_lines


def test_the_kept_demo_names_the_deployctl_that_ran_it_when_the_shell_does_not_find_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # scripts/demo runs the checkout's .venv/bin/deployctl: `deployctl history` was "command not found"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    lines = explore_lines(tmp_path, tmp_path / "demo-inventory.yaml", None)
    command = next(line for line in lines if line.endswith(" history")).strip().removesuffix(" history")
    assert command != "deployctl"
    done = subprocess.run([*shlex.split(command), "--version"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr


def test_the_kept_demo_says_plain_deployctl_when_that_is_the_one_on_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert "  deployctl history" in explore_lines(tmp_path, tmp_path / "demo-inventory.yaml", None)
