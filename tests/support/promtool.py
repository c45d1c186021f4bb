"""Prometheus' own ``promtool`` for the monitoring tests, and its server for the passive canary's query-API
test: scripts/bootstrap puts both in .venv/bin (out of Debian's prometheus package). Missing, a test skips,
except under CI=true, where it fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def binary(name: str) -> str:
    """One of the prometheus package's binaries (``promtool``, ``prometheus``): .venv/bin's, else PATH's."""
    found = Path(sys.executable).parent / name
    tool = str(found) if found.exists() else shutil.which(name)
    if tool is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is missing: scripts/bootstrap fetches it from Debian's prometheus package")
        pytest.skip(f"{name} is not installed (scripts/bootstrap fetches it)")
    return tool


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary("promtool"), *args], input=stdin, capture_output=True, text=True, timeout=60)
