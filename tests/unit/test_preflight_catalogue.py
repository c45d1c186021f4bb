"""The knowledge catalogue: its data validates, and its rules say what sglang-flag-facts.md says."""

from __future__ import annotations

import pytest

from deployctl.preflight.catalogue import (
    CatalogueInvalid,
    Context,
    FlagValues,
    evaluate,
    parse_catalogue,
    shipped_catalogue,
)
from deployctl.preflight.flagtable import shipped_table
from deployctl.preflight.versions import in_range, parse_version


def ctx(version: str | None, arch: str | None, env: dict[str, str] | None = None, **flags) -> Context:
    values = {k: v for k, v in flags.items()}
    return Context(version, arch, FlagValues(values), env or {})


def codes(findings, level=None) -> set[str]:
    return {f.code.removeprefix("catalogue:") for f in findings if level is None or f.level == level}


def test_shipped_catalogue_parses_and_every_entry_names_its_source() -> None:
    cat = shipped_catalogue()
    assert len(cat.rules) >= 20
    for rule in cat.rules:
        assert rule.source and rule.message, rule.id
    for rep in cat.replacements:
        assert rep.source and rep.note, rep.flag


@pytest.mark.parametrize("version", ["0.5.8", "0.5.9", "0.5.10", "0.5.11", "0.5.23"])
@pytest.mark.parametrize("arch", ["sm120", "sm121"])
def test_allreduce_fusion_has_no_effect_off_sm90_sm100_in_every_version(version: str, arch: str) -> None:
    found = evaluate(shipped_catalogue(), ctx(version, arch, enable_flashinfer_allreduce_fusion=True, tp_size=8))
    warn = [f for f in found if f.code == "catalogue:ar-fusion-no-effect"]
    assert len(warn) == 1 and warn[0].level == "WARN"
    assert "SM90/SM100" in warn[0].message and "layers/communicator.py" in warn[0].source


@pytest.mark.parametrize("arch", ["sm90", "sm100", "sm103"])
def test_allreduce_fusion_is_fine_where_the_gate_passes(arch: str) -> None:
    found = evaluate(shipped_catalogue(), ctx("0.5.23", arch, enable_flashinfer_allreduce_fusion=True, tp_size=8))
    assert not {c for c in codes(found) if c.startswith("ar-fusion")}


def test_allreduce_fusion_breaks_startup_on_0_5_23_sm120_only_with_tp_above_1() -> None:
    cat = shipped_catalogue()
    tp8 = evaluate(cat, ctx("0.5.23", "sm120", enable_flashinfer_allreduce_fusion=True, tp_size=8))
    tp1 = evaluate(cat, ctx("0.5.23", "sm120", enable_flashinfer_allreduce_fusion=True, tp_size=1))
    assert "ar-fusion-startup-failure" in codes(tp8, "ERROR")
    assert "ar-fusion-startup-failure" not in codes(tp1)
    assert "ar-fusion-startup-failure" not in codes(
        evaluate(cat, ctx("0.5.10", "sm120", enable_flashinfer_allreduce_fusion=True, tp_size=8)))


def test_workspace_side_effect_is_0_5_11_only() -> None:
    cat = shipped_catalogue()
    for version, expected in (("0.5.10", False), ("0.5.11", True), ("0.5.11.post1", True), ("0.5.23", False)):
        found = evaluate(cat, ctx(version, "sm120", enable_flashinfer_allreduce_fusion=True))
        assert ("ar-fusion-workspace" in codes(found)) is expected, version


def test_fused_moe_sum_does_nothing_outside_the_triton_runner() -> None:
    cat = shipped_catalogue()
    cutlass = evaluate(cat, ctx("0.5.10", "sm120", enable_fused_moe_sum_all_reduce=True,
                                moe_runner_backend="flashinfer_cutlass"))
    triton = evaluate(cat, ctx("0.5.10", "sm120", enable_fused_moe_sum_all_reduce=True, moe_runner_backend="triton"))
    assert "fused-moe-sum-not-triton" in codes(cutlass, "WARN")
    assert "flashinfer_cutlass" in next(f.message for f in cutlass if f.code.endswith("fused-moe-sum-not-triton"))
    assert "fused-moe-sum-not-triton" not in codes(triton)


def test_fp8_gemm_backend_is_ignored_by_nvfp4_models() -> None:
    found = evaluate(shipped_catalogue(), ctx("0.5.9", "sm120", fp8_gemm_backend="cutlass",
                                              quantization="modelopt_fp4"))
    assert "fp8-gemm-backend-nvfp4" in codes(found, "INFO")
    assert not codes(found, "WARN") and not codes(found, "ERROR")


def test_fa3_on_blackwell_will_not_start() -> None:
    assert "attention-fa3-arch" in codes(evaluate(shipped_catalogue(), ctx("0.5.9", "sm120", attention_backend="fa3")),
                                         "ERROR")
    assert not codes(evaluate(shipped_catalogue(), ctx("0.5.9", "sm90", attention_backend="fa3")), "ERROR")


def test_speculative_decoding_side_effects() -> None:
    found = evaluate(shipped_catalogue(), ctx("0.5.10", "sm120", speculative_algorithm="NEXTN"))
    assert {"spec-max-running-requests-48", "spec-disables-piecewise"} <= codes(found, "INFO")
    explicit = evaluate(shipped_catalogue(), ctx("0.5.11", "sm120", speculative_algorithm="NEXTN",
                                                 max_running_requests="64"))
    assert "spec-max-running-requests-48" not in codes(explicit)
    assert "spec-disables-piecewise" not in codes(explicit)


def test_environment_variables_sglang_overrides() -> None:
    cat = shipped_catalogue()
    found = evaluate(cat, ctx("0.5.9", "sm120", env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"}))
    assert "env-cuda-device-max-connections" in codes(found, "WARN")
    assert "env-spec-v2-removed" in codes(evaluate(cat, ctx("0.5.23", "sm120", env={"SGLANG_ENABLE_SPEC_V2": "1"})))
    assert "env-spec-v2-removed" not in codes(evaluate(cat, ctx("0.5.10", "sm120", env={"SGLANG_ENABLE_SPEC_V2": "1"})))


def test_versioned_rules_are_skipped_when_the_version_is_unknown() -> None:
    found = evaluate(shipped_catalogue(), ctx(None, "sm120", enable_flashinfer_allreduce_fusion=True, tp_size=8))
    assert codes(found, "WARN") == {"ar-fusion-no-effect"}
    assert not codes(found, "ERROR")


def test_flag_lookup_goes_through_the_flag_table_like_argparse() -> None:
    # "tp" is an abbreviation of --tp-size; 0.5.9 stores it as tensor_parallel_size, 0.5.23 as tp_size.
    for version, dest in (("0.5.9", "tensor_parallel_size"), ("0.5.23", "tp_size")):
        table = shipped_table(version)
        values = FlagValues({dest: "8", "enable_flashinfer_allreduce_fusion": True}, table)
        assert values.get("tp-size") == (True, "8")
        assert values.get("tensor-parallel-size") == (True, "8")


def test_renames_are_data() -> None:
    cat = shipped_catalogue()
    assert cat.replacement_for("nsa-decode-backend", "0.5.23").instead == "--dsa-decode-backend"
    assert cat.replacement_for("nsa-decode-backend", "0.5.10") is None
    assert cat.replacement_for("disable-piecewise-cuda-graph", "0.5.9").note.startswith("added in 0.5.10")
    assert cat.replacement_for("disable-piecewise-cuda-graph", "0.5.9").instead is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("schema_version: 2\n", "schema_version"),
        ("schema_version: 1\nrules:\n- {id: a, level: FATAL, message: m, source: s, when: {}}\n", "level"),
        ("schema_version: 1\nrules:\n- {id: a, level: WARN, message: m, source: s, when: {gpu: x}}\n", "unknown"),
        ("schema_version: 1\nrules:\n- {id: a, level: WARN, message: m, when: {}}\n", "source"),
        ("schema_version: 1\nrules:\n- {id: a, level: WARN, message: m, source: s, versions: '~0.5', when: {}}\n",
         "version"),
        ("schema_version: 1\nrules:\n- {id: a, level: WARN, message: m, source: s, when: {}}\n"
         "- {id: a, level: WARN, message: m, source: s, when: {}}\n", "twice"),
    ],
)
def test_malformed_catalogue_entries_are_refused(text: str, problem: str) -> None:
    with pytest.raises(CatalogueInvalid, match=problem):
        parse_catalogue(text)


def test_version_ordering() -> None:
    assert parse_version("0.5.10rc1") < parse_version("0.5.10") < parse_version("0.5.10.post1") < parse_version(
        "0.5.11")
    assert parse_version("0.5.9") < parse_version("0.5.10")
    assert in_range("0.5.11", ">=0.5.11,<0.5.23") and not in_range("0.5.23", ">=0.5.11,<0.5.23")
    assert in_range("0.5.23", None)
