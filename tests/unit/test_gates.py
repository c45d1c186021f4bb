"""Startup gates on hand-built reports (from the facts) and on the shared fixture logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.inventory.policy import StartupGates
from deployctl.judge.gates import check_startup_gates
from deployctl.startup.parser import (
    CudaGraph,
    MoeWarning,
    PiecewiseCudaGraph,
    SchedulerSummary,
    StartupFailure,
    StartupReport,
    parse_lines,
)

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
MOE_FILE = "E=256,N=256,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition.json"


def report(mrr: int | None = 48, tokens: int | None = 827520, *, graph: str = "captured", piecewise: str = "captured",
           piecewise_reason: str | None = None, moe: tuple[MoeWarning, ...] = (), outcome: str = "ready",
           failure: StartupFailure | None = None, phase: str | None = "ready") -> StartupReport:
    sched = None
    if mrr is not None and tokens is not None:
        sched = SchedulerSummary(rank=0, max_total_num_tokens=tokens, chunked_prefill_size=8192,
                                 max_prefill_tokens=16384, max_running_requests=mrr, context_len=262144,
                                 available_gpu_mem_gb=10.6)
    return StartupReport(outcome=outcome, phase=phase, failure=failure, scheduler=sched,
                         cuda_graph=CudaGraph(graph), moe_config_warnings=moe,
                         piecewise_cuda_graph=PiecewiseCudaGraph(piecewise, reason=piecewise_reason))


def test_the_incident_capacity_drop_fails_naming_both_numbers():
    v = check_startup_gates(report(48), report(26), StartupGates())
    assert not v.passed
    assert v.failures == ["effective max_running_requests fell from 48 to 26 (−45.8 %, more than the 10 % allowed)"]


def test_a_drop_within_the_limit_passes():
    assert check_startup_gates(report(48), report(44), StartupGates()).passed  # −8.3 %
    assert check_startup_gates(report(48), report(96), StartupGates()).passed


def test_a_limit_of_none_switches_a_gate_off():
    gates = StartupGates(max_running_requests_drop_pct=None, max_total_num_tokens_drop_pct=None)
    assert check_startup_gates(report(48, 800000), report(26, 300000), gates).passed


def test_kv_capacity_drop_fails():
    v = check_startup_gates(report(tokens=827520), report(tokens=319488), StartupGates())
    assert v.failures == [
        "KV cache capacity (max_total_num_tokens) fell from 827520 to 319488 (−61.4 %, more than the 25 % allowed)"
    ]


@pytest.mark.parametrize("state", ["disabled", "failed"])
def test_cuda_graphs_must_not_become_disabled(state):
    v = check_startup_gates(report(), report(graph=state), StartupGates())
    assert v.failures == [f"CUDA graphs became {state} (baseline: captured)"]
    assert check_startup_gates(report(), report(graph=state), StartupGates(cuda_graph_must_stay_enabled=False)).passed


def test_piecewise_graphs_disabled_names_the_reason():
    v = check_startup_gates(report(), report(piecewise="disabled", piecewise_reason="speculative decoding disables it"),
                            StartupGates())
    assert v.failures == ["piecewise CUDA graphs became disabled (baseline: captured): speculative decoding disables it"]


def test_disabled_on_both_sides_is_no_change():
    assert check_startup_gates(report(graph="disabled"), report(graph="disabled"), StartupGates()).passed


def test_a_new_moe_warning_fails_and_a_known_one_does_not():
    warn = MoeWarning(kind="default_config", config_file=MOE_FILE, ranks=(0, 1, 2, 3))
    v = check_startup_gates(report(), report(moe=(warn,)), StartupGates())
    assert v.failures == [
        "new warning, not in the baseline: no tuned MoE kernel config for this GPU, Triton's default is used "
        f"({MOE_FILE}) on ranks 0, 1, 2, 3"
    ]
    assert check_startup_gates(report(moe=(warn,)), report(moe=(warn,)), StartupGates()).passed
    assert check_startup_gates(report(), report(moe=(warn,)), StartupGates(new_failure_warnings=False)).passed


def test_a_candidate_that_did_not_start_fails_before_anything_else():
    failure = StartupFailure(kind="oom_kv_cache", message="Not enough memory.", rank=2)
    v = check_startup_gates(report(), report(None, outcome="failed", failure=failure), StartupGates())
    assert v.failures == ["the candidate did not start on TP rank 2: oom_kv_cache: Not enough memory."]
    v = check_startup_gates(None, report(None, outcome="starting", phase="cuda_graphs"), StartupGates())
    assert v.failures == ["the candidate never reported ready (last phase: cuda_graphs)"]


def test_without_a_baseline_only_the_start_is_checked():
    assert check_startup_gates(None, report(graph="disabled"), StartupGates()).passed


def test_facts_missing_on_one_side_are_noted_once_not_failed():
    v = check_startup_gates(report(48), report(None), StartupGates())
    assert v.passed
    assert v.notes == (
        "effective max_running_requests not checked: the candidate's startup log does not report it",
        "KV cache capacity (max_total_num_tokens) not checked: the candidate's startup log does not report it",
    )


def test_reports_as_dicts_are_accepted():
    v = check_startup_gates(report(48).to_dict(), report(26).to_dict(), StartupGates())
    assert not v.passed and "from 48 to 26" in v.failures[0]


def _parsed(prefix: str) -> StartupReport:
    path = next(LOGS.glob(f"{prefix}-*.log"))
    return parse_lines(path.read_text(errors="replace").splitlines())


def test_fixture_logs_baseline_against_fusion():
    v = check_startup_gates(_parsed("01"), _parsed("02"), StartupGates())
    assert v.failures[0] == "effective max_running_requests fell from 48 to 26 (−45.8 %, more than the 10 % allowed)"


def test_fixture_logs_failed_starts():
    assert "oom_kv_cache" in check_startup_gates(_parsed("01"), _parsed("04"), StartupGates()).failures[0]
    assert "unknown_flag" in check_startup_gates(_parsed("01"), _parsed("06"), StartupGates()).failures[0]
    assert "model_not_found" in check_startup_gates(None, _parsed("10"), StartupGates()).failures[0]


def test_a_data_parallel_only_candidate_that_did_not_start_names_its_dp_rank():
    # DP8 with tp 1: SGLang tags each scheduler "[… DP3]"; every one of them is TP rank 0.
    log = (LOGS / "38-qwen3-8b-dp8-oom-on-dp3-v0.5.9.log").read_text().splitlines()
    v = check_startup_gates(report(), parse_lines(log), StartupGates())
    assert v.failures[0].startswith("the candidate did not start on DP rank 3: oom: CUDA out of memory.")
