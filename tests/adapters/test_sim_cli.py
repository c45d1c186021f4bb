"""The simulator's command line fails exactly like SGLang's argparse, per version."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from deployctl.sim import cli

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"
GLM = ("--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --trust-remote-code --tp 8 --mem-fraction-static 0.92 "
       "--nsa-decode-backend trtllm --nsa-prefill-backend trtllm --disable-cuda-graph --disable-piecewise-cuda-graph")


def _run(argv: list[str], version: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["SGLANG_SIM_VERSION"] = version
    return subprocess.run([sys.executable, "-m", "deployctl.sim", *argv], env=env, capture_output=True, text=True, timeout=60)


def test_unknown_flag_output_is_sglangs_usage_and_error_exit_2() -> None:
    expect = json.loads((LOGS / "06-qwen35-unknown-flag-v0.5.9.expect.json").read_text())
    argv = shlex.split(expect["command"])
    result = _run(argv[argv.index("sglang.launch_server") + 1:], "0.5.9")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: launch_server.py [-h] --model-path MODEL_PATH\n")
    assert result.stderr.rstrip("\n").splitlines()[-1] == expect["failure_reason"]
    assert result.stderr == (LOGS / "06-qwen35-unknown-flag-v0.5.9.log").read_text()


@pytest.mark.parametrize("version,accepted", [("0.5.9", True), ("0.5.10", True), ("0.5.23", False)])
def test_glm5_nsa_flags_per_version(version: str, accepted: bool, capsys: pytest.CaptureFixture[str]) -> None:
    argv = shlex.split(GLM)
    if version == "0.5.9":
        argv.remove("--disable-piecewise-cuda-graph")
    if accepted:
        assert cli.parse(version, argv).values["nsa_decode_backend"] == "trtllm"
        return
    with pytest.raises(SystemExit) as exc:
        cli.parse(version, argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sglang serve ")
    assert "sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm --nsa-prefill-backend trtllm --disable-piecewise-cuda-graph" in err


def test_invalid_choice_names_the_argument_and_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse("0.5.10", ["--model-path", "m", "--attention-backend", "nope"])
    assert exc.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("sglang serve: error: argument --attention-backend: invalid choice: 'nope' (choose from ")


def test_fusion_flag_exists_from_0_5_10_on() -> None:
    argv = ["--model-path", "m", "--enable-fused-moe-sum-all-reduce"]
    assert cli.parse("0.5.10", argv).values["enable_fused_moe_sum_all_reduce"] is True
    assert cli.parse("0.5.23", argv).values["enable_fused_moe_sum_all_reduce"] is True
    with pytest.raises(SystemExit):
        cli.parse("0.5.9", argv)


def test_abbreviations_and_aliases_resolve_like_argparse() -> None:
    values = cli.parse("0.5.10", ["--model", "m", "--tp", "4", "--mem-frac", "0.8"]).values
    assert values["model_path"] == "m" and values["tp_size"] == 4 and values["mem_fraction_static"] == 0.8


def test_bare_cuda_graph_max_bs_is_ambiguous_in_0_5_23(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse("0.5.23", ["--model-path", "m", "--cuda-graph-max-bs", "8"])
    assert "ambiguous option: --cuda-graph-max-bs" in capsys.readouterr().err


def test_prog_name_per_version() -> None:
    assert cli.build_parser("0.4.10.post2").prog == "launch_server.py"
    assert cli.build_parser("0.5.9").prog == "launch_server.py"
    assert cli.build_parser("0.5.10").prog == "sglang serve"
    assert cli.canonical_version("0.4.10") == "0.4.10.post2"
    with pytest.raises(ValueError, match="not simulated"):
        cli.canonical_version("0.3.0")


def _preflight_table(version: str) -> dict:
    # tests may read the controller's tables; the simulator itself only reads its generated copy
    from deployctl.preflight.flagtable import shipped_table

    table = shipped_table(version)
    assert table is not None
    return {o: f for f in table.flags for o in f.option_strings}


@pytest.mark.parametrize("version", cli.known_versions())
def test_option_strings_choices_and_nargs_equal_the_real_wheels(version: str) -> None:
    real = _preflight_table(version)
    parser = cli.build_parser(version)
    sim = {o: a for a in parser._actions for o in a.option_strings}
    assert sorted(sim) == sorted(real)
    for option, flag in real.items():
        action = sim[option]
        assert (action.nargs == 0) == (flag.nargs == 0), option
        if flag.nargs != 0:
            assert action.nargs == flag.nargs, option
            assert (None if action.choices is None else tuple(action.choices)) == flag.choices, option
        assert sorted(action.option_strings) == sorted(flag.option_strings), option
        assert action.required == flag.required, option


def test_generated_table_is_current() -> None:
    from deployctl.sim import regen_cli

    assert regen_cli.build() == json.loads((Path(cli.__file__).with_name("cli.json")).read_text())


@pytest.mark.parametrize("version,alias,field,value", [
    ("0.4.10.post2", "--nccl-init-addr", "dist_init_addr", "10.0.0.1:5000"),
    ("0.5.9", "--speculative-draft-model", "speculative_draft_model_path", "draft"),
    ("0.5.23", "--elastic-ep-join-mode", "ep_join_mode", None),
])
def test_real_aliases_are_accepted(version: str, alias: str, field: str, value: str | None) -> None:
    real = _preflight_table(version)[alias]
    given = value if value is not None else (str(real.choices[0]) if real.choices else "x")
    parsed = cli.parse(version, ["--model-path", "m", alias, given])
    assert field in parsed.explicit


@pytest.mark.parametrize("option", ["--ep-join-mode", "--watermark-key", "--stat-loggers"])
def test_options_sglang_0_5_23_lacks_are_unrecognized(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse("0.5.23", ["--model-path", "m", option, "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sglang serve [-h] ")
    assert err.endswith(f"sglang serve: error: unrecognized arguments: {option} x\n")


def test_errors_are_argparses_own_wording(capsys: pytest.CaptureFixture[str]) -> None:
    version = "0.5.23"
    real = _preflight_table(version)
    # an int-typed flag with choices: argparse converts first, then checks the choice
    with pytest.raises(SystemExit):
        cli.parse(version, ["--model-path", "m", "--log-requests-level", "7"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    choices = ", ".join(str(c) for c in real["--log-requests-level"].choices)
    assert last.startswith("sglang serve: error: argument --log-requests-level: invalid choice: 7 (choose from ")
    assert choices.split(", ")[0] in last
    with pytest.raises(SystemExit):
        cli.parse(version, ["--model-path", "m", "--tp-size", "four"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    names = "/".join(real["--tp-size"].option_strings)
    assert last == f"sglang serve: error: argument {names}: invalid int value: 'four'"
    prefix = "--enable-hi"
    matches = [o for o in real if o.startswith(prefix)]
    assert len(matches) > 1
    with pytest.raises(SystemExit):
        cli.parse(version, ["--model-path", "m", prefix])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"sglang serve: error: ambiguous option: {prefix} could match {', '.join(matches)}"


def test_boolean_optional_flags_take_both_forms() -> None:
    parsed = cli.parse("0.5.23", ["--model-path", "m", "--no-enable-tf32-matmul"])
    assert parsed.values["enable_tf32_matmul"] is False


def test_deprecated_action_fails_when_used_like_sglangs() -> None:
    with pytest.raises(ValueError, match="--enable-piecewise-cuda-graph"):
        cli.parse("0.5.10", ["--model-path", "m", "--enable-piecewise-cuda-graph"])
