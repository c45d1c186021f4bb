"""Flag extraction on miniature SGLang source trees of both generations (tests/data/preflight/src-*).

The real wheels are covered by tests/adapters/test_flag_extraction_wheels.py; these pin each rule of
sglang-flag-facts.md §5 "How flags are defined" on a tree small enough to read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.errors import InputError
from deployctl.preflight.extract import extract_flag_table
from deployctl.preflight.flagtable import FlagTable
from deployctl.preflight.sources import DirSource

DATA = Path(__file__).resolve().parent.parent / "data" / "preflight"


@pytest.fixture(scope="module")
def old() -> FlagTable:
    return extract_flag_table(DirSource(DATA / "src-argparse"), "0.5.9-mini")


@pytest.fixture(scope="module")
def new() -> FlagTable:
    return extract_flag_table(DirSource(DATA / "src-fields"), "0.5.23-mini")


def test_add_argument_generation(old: FlagTable) -> None:
    assert old.prog == "launch_server.py" and old.allow_abbrev
    model = old.exact("--model")
    assert model is old.exact("--model-path") and model.required and model.dest == "model_path"
    assert old.exact("--tp-size").dest == "tensor_parallel_size" and old.exact("--tp-size").value_type == "int"
    assert old.exact("--attention-backend").choices == ("triton", "flashinfer", "fa3")
    assert old.exact("--nsa-decode-backend").choices == ("flashmla_kv", "fa3", "trtllm")  # relative import + starred
    assert old.exact("--sampling-backend").choices == ("flashinfer", "pytorch")  # a set, sorted
    assert old.exact("--reasoning-parser").choices == ("glm45", "qwen3")  # DetectorMap.keys()
    assert old.exact("--page-size").choices == (16, 32, 64)
    assert old.exact("--cuda-graph-bs").nargs == "+"
    assert old.exact("--disable-radix-cache").nargs == 0


def test_boolean_optional_adds_the_no_form(old: FlagTable, new: FlagTable) -> None:
    assert old.exact("--no-enable-thing") is old.exact("--enable-thing")
    assert new.exact("--no-enable-tf32-matmul") is new.exact("--enable-tf32-matmul")


def test_custom_action_nargs_and_deprecation(old: FlagTable) -> None:
    flag = old.exact("--enable-old-thing")
    assert flag.nargs == 0 and flag.deprecated == ""


def test_runtime_choices_are_marked_dynamic(old: FlagTable) -> None:
    plugin = old.exact("--plugin")
    assert plugin.choices is None and plugin.choices_dynamic


def test_annotated_field_generation(new: FlagTable) -> None:
    assert new.prog == "sglang serve"
    assert new.exact("--model") is new.exact("--model-path") and new.exact("--model").required
    assert new.exact("--tensor-parallel-size").dest == "tp_size"
    assert new.exact("--dsa-decode-backend").choices == ("flashmla_kv", "trtllm")  # Literal → choices
    assert new.exact("--page-size").choices == (16, 32, 64, 128) and new.exact("--page-size").value_type == "int"
    assert new.exact("--disable-radix-cache").action == "store_true"  # bool → store_true
    cuda_bs = new.exact("--cuda-graph-bs-decode")
    assert cuda_bs.nargs == "+" and cuda_bs.value_type == "int"  # List[int] → nargs="+"
    assert new.exact("--cuda-graph-backend-decode").choices == ("full", "breakable", "disabled")  # class attr tuple
    assert new.exact("--fp8-gemm-backend").dest == "fp8_gemm_runner_backend"  # cli_name


def test_fields_without_cli_are_skipped(new: FlagTable) -> None:
    for hidden in ("--hidden-knob", "--rank", "--plain-field"):
        assert new.exact(hidden) is None


def test_manual_arguments_after_the_derived_ones(new: FlagTable) -> None:
    assert new.exact("--tool-call-parser").choices == ("auto", "glm47", "qwen")  # helper function's 2nd return
    assert new.exact("--disable-cuda-graph").deprecated == "--cuda-graph-backend-decode=disabled"
    assert new.exact("--enable-flashinfer-allreduce-fusion").deprecated == "--flashinfer-allreduce-fusion-backend=auto"
    names = [f.name for f in new.flags]
    assert names.index("--fp8-gemm-backend") < names.index("--tool-call-parser")


def test_ambiguous_prefix_after_a_split(new: FlagTable) -> None:
    assert new.prefix_matches("--cuda-graph-max-bs") == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]
    assert new.resolve("--cuda-graph-max-bs") is None


def test_table_json_round_trip(new: FlagTable) -> None:
    again = FlagTable.from_json(new.to_json())
    assert again.flags == new.flags and again.prog == new.prog and again.sglang_version == new.sglang_version


def test_a_tree_without_server_args_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="server_args.py is missing"):
        extract_flag_table(DirSource(tmp_path))
