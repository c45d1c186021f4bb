"""Prometheus' own ``promtool`` for the monitoring tests: scripts/bootstrap puts it in .venv/bin (out of
Debian's prometheus package). Missing, a test skips, except under CI=true, where it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    found = Path(sys.executable).parent / "promtool"
    tool = str(found) if found.exists() else shutil.which("promtool")
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail("promtool is missing: scripts/bootstrap fetches it from Debian's prometheus package")
        pytest.skip("promtool is not installed (scripts/bootstrap fetches it)")
    return subprocess.run([tool, *args], input=stdin, capture_output=True, text=True, timeout=60)
