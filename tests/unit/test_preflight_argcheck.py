"""The argparse-equivalent flag check, on the flag tables extracted from the real SGLang wheels.

The GLM-5 command is incident B's known-good launch; what each version does with it is
sglang-flag-facts.md §5 (0.5.9 lacks two flags, 0.5.10 accepts it, 0.5.23 renamed --nsa-*).
Every expected message is cross-checked against a real ``argparse`` parser built from the same table.
"""

from __future__ import annotations

import argparse
import shlex

import pytest

from deployctl.preflight.argcheck import (
    PythonStyle,
    check_argv,
    first_error,
    parsed_values,
    render_error,
)
from deployctl.preflight.flagtable import (
    FlagSpec,
    FlagTable,
    shipped_table,
    shipped_versions,
)

GLM5 = shlex.split(
    "--model lukealonso/GLM-5-NVFP4 --served-model-name glm-5 --reasoning-parser glm45 --tool-call-parser glm47 "
    "--trust-remote-code --tp 8 --mem-fraction-static 0.92 --max-running-requests 1024 --kv-cache-dtype auto "
    "--quantization modelopt_fp4 --attention-backend flashinfer --fp8-gemm-backend cutlass "
    "--nsa-decode-backend trtllm --nsa-prefill-backend trtllm --moe-runner-backend flashinfer_cutlass "
    "--disable-cuda-graph --disable-radix-cache --host 0.0.0.0 --port 8000"
)
# The Qwen3.5 experiment of incident A adds these two.
EXPERIMENT = ["--enable-fused-moe-sum-all-reduce", "--disable-piecewise-cuda-graph"]


def table(version: str) -> FlagTable:
    found = shipped_table(version)
    assert found is not None, f"no shipped flag table for {version}"
    return found


def fatal(problems):
    return [p for p in problems if p.fatal]


def test_shipped_tables_cover_the_simulated_versions() -> None:
    assert shipped_versions() == ["0.4.10.post2", "0.5.9", "0.5.10", "0.5.23"]
    assert shipped_table("0.4.10").sglang_version == "0.4.10.post2"  # as SGLANG_SIM_VERSION resolves it
    assert shipped_table("0.5.1") is None


@pytest.mark.parametrize(
    ("version", "options", "actions"),
    [("0.5.9", 341, 331), ("0.5.10", 365, 354), ("0.5.23", 559, 531)],
)
def test_shipped_table_counts_match_the_facts(version: str, options: int, actions: int) -> None:
    # sglang-flag-facts.md §5 counts SGLang's own arguments; argparse adds -h/--help on top.
    t = table(version)
    assert len(t.option_strings) - 2 == options
    assert len(t.flags) - 1 == actions


def test_glm5_is_accepted_by_0_5_10() -> None:
    problems = check_argv(table("0.5.10"), GLM5 + EXPERIMENT)
    assert fatal(problems) == []
    assert first_error(problems) is None


def test_glm5_with_the_experiment_is_refused_by_0_5_9_naming_both_flags() -> None:
    t = table("0.5.9")
    problems = fatal(check_argv(t, GLM5 + EXPERIMENT))
    assert sorted(p.option for p in problems) == sorted(EXPERIMENT)
    assert {p.kind for p in problems} == {"unknown"}
    line = render_error(t, first_error(problems))
    assert line == ("launch_server.py: error: unrecognized arguments: "
                    "--enable-fused-moe-sum-all-reduce --disable-piecewise-cuda-graph")


def test_glm5_is_refused_by_0_5_23_naming_the_renamed_nsa_flags() -> None:
    t = table("0.5.23")
    problems = check_argv(t, GLM5 + ["--disable-piecewise-cuda-graph"])
    unknown = sorted(p.option for p in problems if p.kind == "unknown")
    assert unknown == ["--disable-piecewise-cuda-graph", "--nsa-decode-backend", "--nsa-prefill-backend"]
    assert render_error(t, first_error(problems)) == (
        "sglang serve: error: unrecognized arguments: --nsa-decode-backend trtllm --nsa-prefill-backend trtllm "
        "--disable-piecewise-cuda-graph")
    deprecated = {p.option for p in problems if p.kind == "deprecated"}
    assert "--disable-cuda-graph" in deprecated
    assert t.exact("--dsa-decode-backend") is not None and t.exact("--dsa-prefill-backend") is not None


def test_bare_cuda_graph_max_bs_is_ambiguous_in_0_5_23() -> None:
    problems = check_argv(table("0.5.23"), ["--model-path", "m", "--cuda-graph-max-bs", "64"])
    (problem,) = fatal(problems)
    assert problem.kind == "ambiguous"
    assert problem.message == ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                               "--cuda-graph-max-bs-prefill")


def test_tp_is_an_abbreviation_in_every_version() -> None:
    for version in ("0.5.9", "0.5.10", "0.5.23"):
        problems = check_argv(table(version), ["--model", "m", "--tp", "8"])
        assert [p.kind for p in problems] == ["abbreviation"]
        assert problems[0].matches == ("--tp-size",)


def test_invalid_choice_quotes_argparse_per_python_version() -> None:
    t = FlagTable("x", "launch_server.py", "test", (
        FlagSpec(("--nsa-decode-backend",), "nsa_decode_backend", "store", None, choices=("flashmla_kv", "fa3")),))
    old = check_argv(t, ["--nsa-decode-backend", "trtllm"], PythonStyle((3, 11, 7)))
    new = check_argv(t, ["--nsa-decode-backend", "trtllm"], PythonStyle((3, 13, 1)))
    assert old[0].message == ("argument --nsa-decode-backend: invalid choice: 'trtllm' "
                              "(choose from 'flashmla_kv', 'fa3')")
    assert new[0].message == "argument --nsa-decode-backend: invalid choice: 'trtllm' (choose from flashmla_kv, fa3)"


def test_parsed_values_resolve_aliases_and_abbreviations() -> None:
    values = parsed_values(table("0.5.9"), GLM5)
    assert values["tensor_parallel_size"] == "8"
    assert values["disable_cuda_graph"] is True
    assert values["model_path"] == "lukealonso/GLM-5-NVFP4"


# -- cross-check against real argparse ------------------------------------------------------------


class _ArgparseError(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise _ArgparseError(message)


def real_parser(t: FlagTable) -> argparse.ArgumentParser:
    parser = _RaisingParser(prog=t.prog, add_help=False, allow_abbrev=t.allow_abbrev)
    types = {"int": int, "float": float}
    for flag in t.flags:
        if flag.action == "BooleanOptionalAction":
            names = [o for o in flag.option_strings if not o.startswith("--no-")]
            parser.add_argument(*names, dest=flag.dest, action=argparse.BooleanOptionalAction)
        elif flag.nargs == 0:
            parser.add_argument(*flag.option_strings, dest=flag.dest, action="store_const", const=True)
        else:
            kwargs = {"dest": flag.dest, "type": types.get(flag.value_type, str), "required": flag.required}
            if flag.nargs is not None:
                kwargs["nargs"] = flag.nargs
            if flag.choices is not None:
                kwargs["choices"] = (flag.choices if flag.value_type in types
                                     else [str(c) if c is not None else c for c in flag.choices])
            parser.add_argument(*flag.option_strings, **kwargs)
    return parser


CASES = [
    GLM5,
    GLM5 + EXPERIMENT,
    GLM5 + ["--cuda-graph-max-bs", "64"],
    ["--model", "m", "--tp", "eight"],
    ["--model", "m", "--kv-cache-dtype", "fp9"],
    ["--model", "m", "--disable-radix-cache", "true"],
    ["--model", "m", "--disable-radix-cache=1"],
    ["--model", "m", "--port"],
    ["--tp", "8"],
    ["--model", "m", "--no-such-flag", "x", "--page-size", "64"],
    ["--model", "m", "--attention-backend", "fa3", "--page-size", "sixty"],
    ["--model=m", "--mem-fraction-static=0.9", "--speculative-algorithm", "NEXTN"],
]


@pytest.mark.parametrize("version", ["0.5.9", "0.5.10", "0.5.23"])
@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[-3:]) for c in CASES])
def test_first_error_is_what_argparse_prints(version: str, argv: list[str]) -> None:
    t = table(version)
    try:
        real_parser(t).parse_args(argv)
        expected = None
    except _ArgparseError as exc:
        expected = str(exc)
    found = first_error(check_argv(t, argv))
    assert (found.message if found else None) == expected
