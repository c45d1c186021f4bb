"""Run a deployctl verb against the sandbox as an operator would, in a subprocess with a time limit.

A verb that hangs dumps every thread's stack just before the limit, and the test fails with that
output, so a rare hang on a loaded machine says where it was instead of only that it happened.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.sandbox import Sandbox
from deployctl.sim.probe import free_port

__all__ = ["free_port", "run_deployctl"]

LIMIT_S = 60
_BOOT = (
    f"import faulthandler, sys; faulthandler.dump_traceback_later({LIMIT_S - 5}); "
    "from deployctl.cli import main; sys.exit(main())"
)


def run_deployctl(sandbox: Sandbox, inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **sandbox.env(), "DEPLOYCTL_STATE_DIR": str(inventory.parent / "state"), "NO_COLOR": "1"}
    argv = [sys.executable, "-c", _BOOT, *args, "-i", str(inventory)]
    try:
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=LIMIT_S)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        pytest.fail(f"deployctl {' '.join(args)} hung for {LIMIT_S} s; its output so far:\n{out}\n{err}")

