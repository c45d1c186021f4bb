"""Startup diffs: every changed fact, explained from the reports and the flag catalogue."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from deployctl.startup.diff import (
    catalogue,
    diff_startups,
    flag_differences,
    mamba_ratio,
    unexplained_flags,
)
from deployctl.startup.parser import StartupReport, parse_lines
from deployctl.units.profilediff import ProfileDiff

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


def load(prefix: str) -> StartupReport:
    (path,) = LOGS.glob(f"{prefix}-*.log")
    with open(path, encoding="utf-8", newline="\n") as stream:
        return parse_lines(stream)


BASE, FUSION = load("01"), load("02")


def test_the_incident_line() -> None:
    changes = diff_startups(BASE, FUSION, host="sm120")
    first = changes[0]
    assert first.fact == "max_running_requests" and (first.before, first.after) == (48, 26)
    assert first.text == (
        "max_running_requests 48 → 26 (−46%): capped by the mamba cache size on hybrid models "
        "(max_mamba_cache_size 473 → 132, 132 // 5 = 26); the candidate adds enable_flashinfer_allreduce_fusion "
        "(its fusion is gated to SM90/SM100, its memory cost is not: with it the server sizes smaller pools on any GPU)")
    assert "none of these can act" not in first.text  # the story pre-flight tells too: no effect as a fusion, a memory cost
    facts = {c.fact for c in changes}
    assert {"max_total_num_tokens", "max_mamba_cache_size", "cuda_graph.max_bs"} <= facts
    assert "outcome" not in facts and "configured_max_running_requests" not in facts


def test_fused_moe_sum_is_linked_to_no_fact_and_says_why() -> None:
    changes = diff_startups(BASE, FUSION, host="sm120")
    unlinked = unexplained_flags(changes, flag_differences(BASE, FUSION, host="sm120"))
    assert [d.flag for d in unlinked] == ["enable_fused_moe_sum_all_reduce"]
    assert "Triton" in unlinked[0].phrase


def test_gate_notes_follow_the_host_and_the_version() -> None:
    host = SimpleNamespace(gpus=SimpleNamespace(compute_capability="sm100"))
    on_sm100 = diff_startups(BASE, FUSION, host=host)[0]
    assert on_sm100.text.endswith("the candidate adds enable_flashinfer_allreduce_fusion")
    off_gate = flag_differences(BASE, FUSION, host={"gpus": {"compute_capability": "12.0"}})
    assert next(d for d in off_gate if d.flag == "enable_flashinfer_allreduce_fusion").effective is False  # as a fusion
    assert diff_startups(BASE, FUSION, host={"gpus": {"compute_capability": "12.0"}})[0].explanations[0].flag.effective
    unknown = diff_startups(BASE, FUSION)[0]
    assert "takes effect only on SM90/SM100/SM103" in unknown.text
    v0511 = diff_startups(replace(BASE, sglang_version="0.5.11"), replace(FUSION, sglang_version="0.5.11"), host="sm120")[0]
    assert "0.5.11 acts on any architecture" in v0511.text


def test_profile_diff_flags_are_used_with_cli_names() -> None:
    same_args = replace(FUSION, server_args=BASE.server_args)
    diff = ProfileDiff(flags_added={"enable-flashinfer-allreduce-fusion": True, "enable-fused-moe-sum-all-reduce": True},
                       env_changed={"SGLANG_ENABLE_SPEC_V2": ("0", "1")})
    change = diff_startups(BASE, same_args, profile_diff=diff, host="sm120")[0]
    named = [e.flag.flag for e in change.explanations]
    assert named[0] == "env:SGLANG_ENABLE_SPEC_V2"  # effective ones first
    assert "enable_flashinfer_allreduce_fusion" in named
    assert all(e.flag.source == "profile" for e in change.explanations)


def test_no_change_no_lines_and_json_reports_diff_the_same() -> None:
    assert diff_startups(BASE, BASE) == []
    again = StartupReport.from_dict(json.loads(json.dumps(FUSION.to_dict())))
    assert [c.text for c in diff_startups(BASE, again, host="sm120")] == \
           [c.text for c in diff_startups(BASE, FUSION, host="sm120")]


def test_a_failed_candidate_is_one_line_not_one_per_missing_fact() -> None:
    ready, oom = load("03"), load("04")
    changes = diff_startups(ready, oom, host="sm120")
    assert [c.fact for c in changes] == ["outcome"]
    assert changes[0].text.startswith("outcome ready → failed: oom_kv_cache: Not enough memory.")
    assert "mem_fraction_static 0.92 → 0.55" in changes[0].text


def test_mamba_ratio_rules() -> None:
    assert mamba_ratio({"disable_radix_cache": True, "mamba_scheduler_strategy": "extra_buffer"}) == 1
    assert mamba_ratio({"mamba_scheduler_strategy": "no_buffer"}) == 3
    assert mamba_ratio({"mamba_scheduler_strategy": "extra_buffer"}) == 5
    assert mamba_ratio({"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": True}) == 4


def test_catalogue_names_only_known_fields() -> None:
    from deployctl.startup.serverargs import known_field_sets

    known = set().union(*known_field_sets().values())
    cat = catalogue()
    names = set(cat["memory_flags"]) | set(cat["gates"]) | {f for reasons in cat["facts"].values() for f in reasons}
    unknown = {n for n in names if not n.startswith("env:") and n not in known}
    assert not unknown, unknown


def test_gates_from_the_shared_interaction_catalogue() -> None:
    from deployctl.facts.interactions import arch_gate, field_name

    assert field_name("--fp8-gemm-backend") == "fp8_gemm_runner_backend" and field_name("tp") == "tp_size"
    assert arch_gate("attention_backend", "fa3").archs == ("sm80", "sm86", "sm89", "sm90")
    assert arch_gate("attention_backend", "triton") is None
    assert arch_gate("fp8_gemm_runner_backend", "cutlass", "0.5.23").archs == ("sm120",)
    diff = ProfileDiff(flags_changed={"attention-backend": ("triton", "fa3")})
    (moved,) = flag_differences(BASE, BASE, diff, host="sm120")
    assert moved.effective is False
    assert moved.phrase == "attention_backend triton → fa3 (outside its architecture gate on SM120: SM80/SM86/SM89/SM90 only)"
