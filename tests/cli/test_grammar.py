"""One grammar for deployment, profile and release across verbs, and the exit codes that say what
happened (issue: the first hour of a new operator). In-process, on the example inventory and a small
ledger made here."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from testpaths import REPO

from deployctl.adapters.ledger import Ledger
from deployctl.cli import main
from deployctl.console.options import complete_releases
from deployctl.errors import ExitCode

EXAMPLE = str(REPO / "inventory" / "example.yaml")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main([*argv, "-i", EXAMPLE])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def ledger_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two releases of glm5 and one of qwen35 (ids 1, 2, 3)."""
    state = tmp_path / "state"
    with Ledger.open(state) as ledger:
        for deployment, profile in (("glm5", "baseline"), ("qwen35", "baseline"), ("glm5", "candidate")):
            ledger.begin_release(deployment=deployment, kind="promote", unit_name=f"sglang-{deployment}.service",
                                 unit_text="[Service]\n", unit_hash="0" * 64, who="root", profile=profile,
                                 finished=True, result="kept")
    monkeypatch.setenv("DEPLOYCTL_STATE_DIR", str(state))
    return state


@pytest.mark.parametrize("spelling", [["glm5", "candidate"], ["candidate", "-d", "glm5"], ["-d", "glm5", "--profile", "candidate"],
                                      ["glm5", "--profile", "candidate"]])
def test_render_names_deployment_and_profile_like_promote(spelling: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", *spelling], capsys)
    assert code == 0 and "Description=SGLang glm5 (candidate profile)" in out


@pytest.mark.parametrize("spelling", [["glm5", "candidate"], ["candidate", "-d", "glm5"], ["glm5"]])
def test_check_takes_the_same_spellings(spelling: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["check", *spelling, "--json"], capsys)
    assert code == 0 and json.loads(out)["profile"] == "candidate" and json.loads(out)["deployment"] == "glm5"


def test_ambiguous_or_unknown_names_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["render", "glm5", "candidate", "--profile", "baseline"], capsys)
    assert code == ExitCode.BAD_INPUT and "two profiles named: 'candidate' and --profile 'baseline'" in err
    code, _, err = run(["render", "glm5", "nosuch"], capsys)
    assert code == ExitCode.BAD_INPUT and "no profile 'nosuch'" in err
    code, _, err = run(["render", "nosuch"], capsys)
    assert code == ExitCode.BAD_INPUT and "nosuch" in err


def test_show_and_report_name_a_release_by_id_or_by_deployment(ledger_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["show", "-d", "glm5"], capsys)
    assert code == 0 and out.startswith("release 3:")
    code, _, err = run(["report", "-d", "qwen35", "3", "-o", str(tmp_path / "r.html")], capsys)
    assert code == ExitCode.BAD_INPUT and "release 3 is of glm5, not qwen35" in err
    code, _, err = run(["show"], capsys)
    assert code == ExitCode.BAD_INPUT and "no release named" in err


def test_history_of_an_unknown_deployment_is_an_error_and_json_is_slim(ledger_dir: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["history", "nosuch"], capsys)
    assert code == ExitCode.BAD_INPUT and "no deployment 'nosuch'" in err
    code, out, _ = run(["history", "glm5", "--json"], capsys)
    slim = json.loads(out)
    assert code == 0 and [r["id"] for r in slim] == [3, 1] and "flags" not in slim[0] and "state" not in slim[0]
    code, out, _ = run(["history", "glm5", "--json", "--full"], capsys)
    assert "flags" in json.loads(out)[0]


def test_release_ids_complete_from_the_ledger(ledger_dir: Path) -> None:
    assert complete_releases("", argparse.Namespace(deployment="glm5")) == ["3", "1"]
    assert complete_releases("2", argparse.Namespace()) == ["2"]


def test_canary_refuses_every_on_a_run_and_install_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["canary", "--every", "6h", "glm5"], capsys)
    assert code == ExitCode.BAD_INPUT and "hint: deployctl canary install glm5 --every 6h" in err
    code, out, _ = run(["canary", "install", "--help"], capsys)
    assert code == 0 and "deployctl canary install DEPLOYMENT [--every" in " ".join(out.split())


def test_canary_dry_run_goes_with_install_only(capsys: pytest.CaptureFixture[str]) -> None:
    for words in (["canary", "glm5", "--dry-run"], ["canary", "rebaseline", "glm5", "--dry-run"]):
        code, _, err = run(words, capsys)
        assert code == ExitCode.BAD_INPUT and "--dry-run goes with `canary install`" in err, err


def test_bisect_dry_run_prints_the_plan_before_anything_is_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("DEPLOYCTL_UNIT_DIR", "DEPLOYCTL_RUNTIME_UNIT_DIR", "DEPLOYCTL_BACKUP_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    code, out, _ = run(["bisect", "candidate", "-d", "glm5", "--dry-run", "--state-dir", str(tmp_path / "state")], capsys)
    assert code == 0, out
    assert "1 change(s) from profile baseline (sglang-glm5.service is not installed yet" in out
    # Each trial is a promote, priced as one (docs/cost.md): 2 trials × 4.00 GPU-hours on the 8-GPU host.
    assert ("worst case for one culprit, each trial at a promote's expected cost: 8.00 GPU-hours (60 min on 8 GPU(s));"
            " a promote here: no history on this host: defaults") in out
