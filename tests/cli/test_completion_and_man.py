"""Shell completion through the script bootstrap installs (bash runs argcomplete's hook as a shell would), the
man page bootstrap generates from the parser, and share/: the page and completions the wheel carries."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from pathlib import Path

import pytest
from testpaths import REPO

EXAMPLE = str(REPO / "inventory" / "example.yaml")
VENV_BIN = REPO / ".venv" / "bin"
BASH_SCRIPT = REPO / ".venv" / "share" / "deployctl" / "completions" / "deployctl.bash"


def complete(line: str) -> list[str]:
    """What bash offers for ``line`` (the cursor at its end), through the installed completion script."""
    words = line.split(" ")
    script = f"""
source {BASH_SCRIPT}
COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; COMP_TYPE=9
COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}
_python_argcomplete deployctl
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    env.pop("DEPLOYCTL_INVENTORY", None)
    done = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


def test_bootstrap_wrote_completion_for_three_shells() -> None:
    folder = BASH_SCRIPT.parent
    assert "complete " in BASH_SCRIPT.read_text()
    assert "compdef" in (folder / "_deployctl").read_text()
    assert "complete --command deployctl" in (folder / "deployctl.fish").read_text()


def test_bash_completes_a_deployment_name_from_the_inventory() -> None:
    assert complete(f"deployctl status -i {EXAMPLE} -d g") == ["glm5"]
    assert {"glm5", "qwen35"} <= set(complete(f"deployctl status -i {EXAMPLE} "))  # the positional alias


def test_bash_completes_verbs_options_and_profiles() -> None:
    assert complete("deployctl prom") == ["promote"]
    assert "--dry-run" in complete("deployctl promote --dr")
    assert complete(f"deployctl render -i {EXAMPLE} -d glm5 --profile c") == ["candidate"]
    assert complete(f"deployctl render -i {EXAMPLE} glm5 c") == ["candidate"]  # VERB DEPLOYMENT PROFILE
    assert complete(f"deployctl canary -i {EXAMPLE} ins") == ["install"]
    assert complete(f"deployctl canary -i {EXAMPLE} install g") == ["glm5"]


def test_promote_and_bisect_complete_the_profiles_of_the_deployment_before_them() -> None:
    # `VERB D PROFILE`: argparse puts D in PROFILE and PROFILE in the hidden second word, which completed
    # nothing, so bash offered the directory's files
    assert complete(f"deployctl promote -i {EXAMPLE} glm5 c") == ["candidate"]
    assert complete(f"deployctl bisect -i {EXAMPLE} glm5 c") == ["candidate"]
    offered = complete(f"deployctl promote -i {EXAMPLE} glm5 ")
    assert {"baseline", "candidate"} <= set(offered) and "pyproject.toml" not in offered
    assert {"glm5", "qwen35", "candidate"} <= set(complete(f"deployctl promote -i {EXAMPLE} "))  # either first word


def _undated(text: str) -> str:
    return re.sub(r'^(\.TH \S+ "1" )"[^"]*"', r"\1DATE", text, count=1, flags=re.M)  # the page's date: its build's


def test_share_holds_the_man_page_and_completions_of_this_parser(tmp_path: Path) -> None:
    """The wheel's data files (share/, committed): what `python -m deployctl.install --share` makes now."""
    done = subprocess.run([str(VENV_BIN / "python"), "-m", "deployctl.install", "--share", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    fresh = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert fresh == sorted(p.relative_to(REPO / "share") for p in (REPO / "share").rglob("*") if p.is_file())
    for relative in fresh:
        assert _undated((REPO / "share" / relative).read_text()) == _undated((tmp_path / relative).read_text()), \
            f"share/{relative} is out of step with the parser: .venv/bin/python -m deployctl.install --share share"


def test_man_deployctl_shows_the_verbs_and_the_exit_codes() -> None:
    if shutil.which("man") is None:
        pytest.fail("man is missing: scripts/bootstrap installs man-db")
    env = {**os.environ, "MANPAGER": "cat", "MANWIDTH": "120", "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
    done = subprocess.run(["man", "deployctl"], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "deployctl promote" in done.stdout and "rollback failed: manual action needed" in done.stdout
    for section in ("EXIT STATUS", "ENVIRONMENT", "FILES"):  # man-pages(7)'s sections of a command
        assert f"\n{section}\n" in done.stdout, section
    assert "DEPLOYCTL_INVENTORY" in done.stdout and "/var/lib/deployctl/ledger.sqlite3" in done.stdout
