"""SGLANG_SIM_FAULT parsing and the performance model's pure parts."""

from __future__ import annotations

import pytest

from deployctl.sim.faults import FaultSpecError, parse_faults
from deployctl.sim.throughput import build, parse_swing
from deployctl.sim.world import host_from_env, world


def test_fault_spec_combines_items() -> None:
    faults = parse_faults("hang:capture, crash_after:50,error_rate:0.02,stall_streams,slow_start:3,nccl")
    assert faults.hang_phase == "capture" and faults.crash_after == 50 and faults.error_rate == 0.02
    assert faults.stall_streams and faults.slow_start == 3.0 and faults.start == {"nccl"}
    assert parse_faults(None) == parse_faults("")
    assert parse_faults("hang:cuda_graph").hang_phase == "capture"


@pytest.mark.parametrize("bad", ["hang:lunch", "crash_after:x", "oom", "nccl:1"])
def test_bad_fault_spec_names_the_accepted_forms(bad: str) -> None:
    with pytest.raises(FaultSpecError, match="hang:<args|init"):
        parse_faults(bad)


def test_forced_fusion_scales_throughput_and_power() -> None:
    model = world()["models"]["lukealonso/GLM-5-NVFP4"]
    normal = build(model, {"SGLANG_SIM_NOISE": "0"}, 84, 600, cuda_graph=False, speculative=False)
    graphs = build(model, {"SGLANG_SIM_NOISE": "0"}, 84, 600, cuda_graph=True, speculative=False)
    assert graphs.decode_step_s(64) == pytest.approx(normal.decode_step_s(64) * 0.75)
    forced = build(model, {"SGLANG_SIM_NOISE": "0", "SGLANG_SIM_FORCE_AR_FUSION": "1"}, 84, 600, cuda_graph=False, speculative=False)
    assert forced.decode_step_s(64) == pytest.approx(normal.decode_step_s(64) / 0.13)
    assert normal.power_w(1.0, 64) == pytest.approx(250)
    assert forced.power_w(1.0, 64) == pytest.approx(125)
    assert normal.power_w(0.0, 0) == 84


def test_noise_is_seedable_and_about_the_configured_sigma() -> None:
    model = world()["models"]["Qwen/Qwen3.5-122B-A10B"]
    factors = [build(model, {"SGLANG_SIM_SEED": str(s)}, 84, 600, True, True).factor for s in range(400)]
    assert build(model, {"SGLANG_SIM_SEED": "3"}, 84, 600, True, True).factor == factors[3]
    mean = sum(factors) / len(factors)
    sigma = (sum((f - mean) ** 2 for f in factors) / len(factors)) ** 0.5
    assert 0.011 < sigma < 0.02


def test_swing_spec_reads_requests_and_factors() -> None:
    assert parse_swing("8:1,0.5,0.25") == (8, (1.0, 0.5, 0.25))
    assert parse_swing(None) == parse_swing("") == (0, ())
    model = world()["models"]["lukealonso/GLM-5-NVFP4"]
    perf = build(model, {"SGLANG_SIM_SWING": "4:1,0.5"}, 84, 600, cuda_graph=False, speculative=False)
    assert (perf.swing_every, perf.swing) == (4, (1.0, 0.5))


@pytest.mark.parametrize("bad", ["8", "0:1", "8:", "8:1,-1", "x:1", "8:1,nan"])
def test_bad_swing_spec_names_the_accepted_form(bad: str) -> None:
    with pytest.raises(ValueError, match="<requests>:<factor>"):
        parse_swing(bad)


def test_host_from_env_reads_the_contract_variables() -> None:
    host = host_from_env({"SGLANG_SIM_GPU_NAME": "NVIDIA H100 80GB HBM3", "SGLANG_SIM_GPU_COUNT": "4",
                          "SGLANG_SIM_COMPUTE_CAPABILITY": "sm90", "SGLANG_SIM_POWER_LIMIT_W": "650", "SGLANG_SIM_P2P": "1"})
    assert host.gpu.sm_major == 9 and host.count == 4 and host.gpu.power_limit_w == 650 and host.p2p
    default = host_from_env({})
    assert default.gpu.name == "NVIDIA RTX PRO 6000 Blackwell Server Edition" and default.gpu.sm_major == 12


def test_allreduce_fusion_only_helps_where_its_arch_gate_passes() -> None:
    model = world()["models"]["Qwen/Qwen3.5-122B-A10B"]
    env = {"SGLANG_SIM_NOISE": "0"}
    flags = {"enable_flashinfer_allreduce_fusion": True}
    plain = build(model, env, 84, 600, True, True, {}, "sm120")
    assert build(model, env, 84, 600, True, True, flags, "sm120").factor == plain.factor
    assert build(model, env, 84, 600, True, True, flags, "sm90").factor == pytest.approx(plain.factor * 1.04)


def test_simulator_imports_nothing_from_the_controller() -> None:
    import ast
    from pathlib import Path

    import deployctl.sim

    for path in Path(deployctl.sim.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert not name.startswith("deployctl") or name.startswith("deployctl.sim"), (path.name, name)


def test_batch_stall_reads_a_rate_and_optional_seconds() -> None:
    assert (parse_faults("batch_stall:0.08").batch_stall, parse_faults("batch_stall:0.08").batch_stall_s) == (0.08, 0.9)
    assert parse_faults("batch_stall:0.3:1.5").batch_stall_s == 1.5
    with pytest.raises(FaultSpecError, match="batch_stall:<p>"):
        parse_faults("batch_stall:2")
