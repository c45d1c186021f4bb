"""The validate / render / diff verbs through deployctl.cli.main: output, exit codes, inventory lookup."""

from __future__ import annotations

import json

from pathlib import Path

import pytest
from testpaths import DATA, REPO

from deployctl.cli import build_parser, main
from deployctl.inventory.model import load_inventory
from deployctl.units.render import render_unit

EXAMPLE = str(REPO / "inventory" / "example.yaml")


def test_validate_ok_summarises_the_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "-i", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{EXAMPLE}: ok\n")
    assert "deployment glm5: sglang-glm5.service on glm5-host:8000, profiles baseline, candidate" in out
    assert "4 unit(s) rendered" in out
    assert "\033[" not in out


def test_validate_a_broken_inventory_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    bad = DATA / "inventories" / "bad" / "05-profile-references.yaml"
    assert main(["validate", "-i", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: 4 problems\n")
    assert f"hint: fix the lines above, then check again with `deployctl validate -i {bad}`" in err


def test_validate_reports_a_template_that_does_not_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = Path(EXAMPLE).read_text().replace("unit: sglang-qwen35.service", "unit: sglang-qwen35.service\n    template: missing.j2")
    (tmp_path / "inv.yaml").write_text(text)
    assert main(["validate", "-i", str(tmp_path / "inv.yaml")]) == 2
    err = capsys.readouterr().err
    assert "deployments.qwen35.profiles.baseline: unit template 'missing.j2' not found" in err


def test_inventory_comes_from_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DEPLOYCTL_INVENTORY", EXAMPLE)
    assert main(["validate"]) == 0
    monkeypatch.delenv("DEPLOYCTL_INVENTORY")
    if Path("/etc/deployctl/inventory.yaml").exists():
        pytest.skip("this machine has a real /etc/deployctl/inventory.yaml")
    assert main(["validate"]) == 2
    err = capsys.readouterr().err
    assert "inventory file not found: /etc/deployctl/inventory.yaml" in err
    assert "hint: pass -i FILE, set DEPLOYCTL_INVENTORY" in err


def test_render_prints_the_unit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "glm5", "--profile", "baseline", "-i", EXAMPLE]) == 0
    assert capsys.readouterr().out == render_unit(load_inventory(EXAMPLE), "glm5", "baseline").text


def test_render_defaults_to_baseline_and_writes_into_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "qwen35", "-i", EXAMPLE, "-o", str(tmp_path)]) == 0
    written = (tmp_path / "sglang-qwen35.service").read_text()
    assert "X-Deployctl-Profile=baseline" in written
    assert f"wrote {tmp_path / 'sglang-qwen35.service'}" in capsys.readouterr().err


def test_render_unknown_profile_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "glm5", "--profile", "fast", "-i", EXAMPLE]) == 2
    assert "no profile 'fast' (known: baseline, candidate)" in capsys.readouterr().err


def test_render_a_simulated_host_uses_this_interpreter(capsys: pytest.CaptureFixture[str]) -> None:
    import sys
    assert main(["render", "glm5-sim", "-i", str(REPO / "inventory" / "demo.yaml")]) == 0
    assert f"ExecStart={sys.executable} -u -m deployctl.sim" in capsys.readouterr().out


def test_diff_lists_flag_changes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "qwen35", "baseline", "candidate", "-i", EXAMPLE]) == 1  # they differ, as diff(1) says
    assert capsys.readouterr().out == (
        "qwen35: baseline -> candidate\n"
        "flags:\n"
        "  + --enable-fused-moe-sum-all-reduce\n"
        "  + --enable-flashinfer-allreduce-fusion\n"
    )


def test_diff_unit_is_a_unified_diff(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "glm5", "baseline", "candidate", "--unit", "-i", EXAMPLE]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["--- sglang-glm5.service (baseline)", "+++ sglang-glm5.service (candidate)"]
    assert "+    --enable-flashinfer-allreduce-fusion \\" in out
    assert "\033[" not in "".join(out)


def test_diff_exit_code_says_whether_they_differ(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "glm5", "baseline", "baseline", "-i", EXAMPLE, "-q"]) == 0
    assert main(["diff", "glm5", "baseline", "candidate", "-i", EXAMPLE, "-q"]) == 1
    assert main(["diff", "glm5", "baseline", "candidate", "-i", EXAMPLE, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["same"] is False


@pytest.mark.parametrize("verb", ["validate", "render", "diff"])
def test_every_verb_has_help_with_an_example(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([verb, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and f"deployctl {verb} " in out and "--inventory" in out
