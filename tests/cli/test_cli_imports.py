"""Start-up stays light: `deployctl --version`, `--help` (every verb's parser) and the read-only verbs that
judge nothing (history, show of a stored release, completion) import neither numpy, scipy nor aiohttp —
together about half a second of every command (benchmarks/cli_startup.py). Each check runs in a fresh
interpreter, so what an earlier test imported cannot hide a wrong import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testpaths import REPO

HEAVY = ("numpy", "scipy", "aiohttp")
EXAMPLE = str(REPO / "inventory" / "example.yaml")

# The child runs the verbs through the CLI's own entry point, stdout swallowed, then says which of HEAVY it
# imported (and every exit code, so a verb that failed early cannot pass by importing nothing).
CHILD = """
import contextlib, io, json, os, sys
state, example, heavy, before = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4]
os.environ["DEPLOYCTL_STATE_DIR"] = state
if before:
    __import__(before)
from deployctl.adapters.ledger import Ledger
from deployctl.cli import main
with Ledger.open(state) as ledger:
    ledger.begin_release(deployment="glm5", kind="promote", unit_name="sglang-glm5.service",
                         unit_text="[Service]\\n", unit_hash="0" * 64, who="root", profile="baseline",
                         finished=True, result="kept")
codes = {}
for argv in (["--version"], ["--help"], ["history", "-i", example], ["history", "--json", "-i", example],
             ["show", "1", "-i", example], ["show", "1", "--json", "-i", example]):
    with contextlib.redirect_stdout(io.StringIO()):
        codes[" ".join(argv[:2])] = main(argv)
print(json.dumps({"codes": codes, "imported": [m for m in heavy if m in sys.modules]}))
"""


def child(tmp_path: Path, before: str = "") -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "state"), EXAMPLE, ",".join(HEAVY), before],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_version_help_and_read_only_verbs_import_no_numpy_scipy_or_aiohttp(tmp_path: Path) -> None:
    result = child(tmp_path)
    assert set(result["codes"].values()) == {0}, result["codes"]  # type: ignore[union-attr]
    assert result["imported"] == [], (
        f"{result['imported']} imported at start-up: move the import into the function that needs it "
        "(`python -X importtime -m deployctl --version 2>&1 | sort -t'|' -k2 -n | tail` shows who pulls it in)")


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The probe itself: a verb module that imported the judge at its top would be seen."""
    assert child(tmp_path, before="deployctl.judge.verdict")["imported"] == ["numpy", "scipy"]
