"""The simulator's startup logs carry the facts the fixture expectations name (built from the
expectations' command, env and version, then compared fact by fact, not line by line)."""

from __future__ import annotations

import ast
import re
import shlex

import pytest
from support.simlog import expectation, simulate

from deployctl.sim import cli, startup
from deployctl.sim.resolve import resolve
from deployctl.sim.world import host_from_env

READY = "The server is fired up and ready to roll!"


def _dump(log: str) -> dict:
    line = next(l for l in log.splitlines() if "server_args=" in l)
    text = line.split("server_args=", 1)[1]
    if text.startswith("{"):
        return ast.literal_eval(text)
    call = ast.parse(text, mode="eval").body
    assert isinstance(call, ast.Call) and call.func.id == "ServerArgs"
    return {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}


def _scheduler(log: str) -> dict:
    match = re.search(r"\[[^]]* TP0\] max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
                      r"max_running_requests=(\d+), context_len=(\d+), available_gpu_mem=([\d.]+) GB", log)
    assert match, "no scheduler summary"
    keys = ("max_total_num_tokens", "chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "context_len")
    return dict(zip(keys, map(int, match.groups()[:5])))


def _ranks_with(log: str, text: str) -> list[int]:
    return sorted({int(m.group(1)) for m in re.finditer(r"\[[^]]* TP(\d+)\] " + re.escape(text), log)})


@pytest.mark.parametrize("prefix", ["01", "02", "03", "08"])
def test_ready_logs_carry_the_expected_facts(prefix: str) -> None:
    expect = expectation(prefix)
    log, code = simulate(expect)
    assert code is None and log.rstrip().endswith(READY)
    dump = _dump(log)
    for key, value in (expect.get("server_args") or {}).items():
        if value is None:
            assert key not in dump or dump[key] is None, key
        else:
            assert dump[key] == value, key
    summary = _scheduler(log)
    for key in ("chunked_prefill_size", "max_prefill_tokens", "max_running_requests", "context_len"):
        assert summary[key] == expect["scheduler_summary"][key], key
    assert summary["max_running_requests"] == expect["effective_max_running_requests"]
    assert f"Uvicorn running on {expect['listening']} (Press CTRL+C to quit)" in log
    method_path = expect["warmup_request"].split(" (")[0]
    assert f'"{method_path} HTTP/1.1" 200 OK' in log


@pytest.mark.parametrize("prefix", ["01", "02", "03", "08"])
def test_cuda_graph_piecewise_and_moe_warnings(prefix: str) -> None:
    expect = expectation(prefix)
    log, _ = simulate(expect)
    tp = expect.get("server_args", {}).get("tp_size") or int(re.search(r"--tp (\d+)", expect["command"]).group(1))
    capture_ranks = _ranks_with(log, "Capture cuda graph begin.")
    assert capture_ranks == (list(range(tp)) if expect["cuda_graph"]["state"] == "captured" else [])
    piecewise_ranks = _ranks_with(log, "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set")
    auto = expect["piecewise_cuda_graph"].get("auto_set") and expect["piecewise_cuda_graph"]["state"] == "disabled"
    assert piecewise_ranks == (list(range(tp)) if auto else [])
    for warning in expect["moe_config_warnings"]:
        text = ("Using default MoE kernel config." if warning["kind"] == "default_config"
                else "Using MoE kernel config with down_moe=False.")
        ranks = sorted({int(m.group(1)) for m in re.finditer(
            r"\[[^]]* TP(\d+)\] " + re.escape(text) + r".*?Config file not found at \S*/" + re.escape(warning["config_file"]) + ",", log)})
        assert ranks == warning["ranks"], warning["config_file"]
        if "triton_dir" in warning:
            assert f"/{warning['triton_dir']}/{warning['config_file']}" in log
    if not expect["moe_config_warnings"]:
        assert "MoE kernel config" not in log


def test_bare_lines_come_before_any_timestamp() -> None:
    expect = expectation("03")
    log, _ = simulate(expect)
    head = log.split("[2026-01-01", 1)[0].splitlines()
    assert head == expect["bare_lines_without_timestamp"]
    log01, _ = simulate(expectation("01"))
    head01 = log01.split("[2026-01-01", 1)[0]
    assert "UserWarning: 'python -m sglang.launch_server' is still supported" in head01
    assert "Max running requests is reset to 48 for speculative decoding." in head01
    assert "Spec v2 is enabled for eagle/eagle3 speculative decoding" in head01


def test_incident_candidate_caps_running_requests_at_26_from_132_mamba_slots() -> None:
    log, _ = simulate(expectation("02"))
    assert "max_mamba_cache_size: 132," in log
    assert _dump(log)["max_running_requests"] == 48
    assert _scheduler(log)["max_running_requests"] == 26


def test_tqdm_meters_use_carriage_returns_and_glue_other_lines() -> None:
    log, _ = simulate(expectation("01"))
    assert "\rLoading safetensors checkpoint shards:   0% Completed | 0/" in log
    assert "s/it][2026-01-01 00:00:00] Using default HuggingFace chat template" in log
    assert re.search(r"\rCapturing batches \(bs=48 avail_mem=[\d.]+ GB\):   0%\|          \| 0/23 \[00:00<\?, \?it/s\]\[2026-01-01 00:00:00 TP0\] Using default MoE", log)


@pytest.mark.parametrize("prefix", ["04", "10"])
def test_failure_endings(prefix: str) -> None:
    expect = expectation(prefix)
    log, code = simulate(expect)
    assert READY not in log
    reason = expect["failure_reason"]
    if expect["failure_kind"] == "oom_kv_cache":
        assert code == -9
        assert _ranks_with(log, "Scheduler hit an exception: Traceback") == expect["failing_ranks"]
        assert log.count("RuntimeError: " + reason) == len(expect["failing_ranks"])
        assert log.rstrip().endswith("Received sigquit from a child process. It usually means the child failed.")
    else:
        assert code == 1
        assert "[2026-01-01" not in log
        assert reason in log.splitlines()[-2]


def test_mem_fraction_too_small_fails_like_sglang_per_version() -> None:
    expect = dict(expectation("04"))
    for version, text in (("0.5.10", "Current value: mem_fraction_static=0.55"),
                          ("0.5.9", "Current value: self.server_args.mem_fraction_static=0.55")):
        expect["sglang_version"] = {"true_version": version}
        log, code = simulate(expect)
        assert code == -9 and text in log


def test_version_formats_differ_where_sglang_does() -> None:
    base = expectation("01")
    log_d, _ = simulate(base)
    assert "Load weight end. elapsed=" in log_d and ", dtype=" not in log_d.split("Load weight end.")[1].split("\n")[0]
    e = dict(base, sglang_version={"true_version": "0.5.23"},
             command=base["command"].replace(" --mamba-scheduler-strategy extra_buffer", ""))
    log_e, code = simulate(e)
    assert code is None
    assert "server_args={'model_path': 'Qwen/Qwen3.5-122B-A10B'" in log_e
    assert "Init parallel begin." in log_e and "KV Cache is allocated. dtype: " in log_e
    assert "Disable piecewise CUDA graph" not in log_e


@pytest.mark.parametrize("fault,text,code", [
    ("nccl", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", -9),
    ("oom_cuda_graph", "Exception: Capture cuda graph failed: CUDA out of memory.", -9),
    ("rank_killed", "RuntimeError: Rank 3 scheduler died during initialization (exit code: -9).", 1),
    ("model_not_found", "is not a local folder and is not a valid model identifier", 1),
])
def test_fault_endings(fault: str, text: str, code: int) -> None:
    log, exit_code = simulate(expectation("01"), faults=fault)
    assert exit_code == code and text in log and READY not in log


def test_forced_fusion_on_glm5_costs_only_its_small_workspace() -> None:
    # incident B: the patched gate initialised FlashInfer's workspace on all 8 ranks and the server
    # served; the workspace is a few hundred MB, so the KV pool barely moves (the startup gate passes)
    expect = expectation("03")
    argv = shlex.split(expect["command"])
    argv = argv[argv.index("sglang.launch_server") + 1:]
    host = host_from_env({"SGLANG_SIM_GPU_COUNT": "8"})
    plain = resolve("0.5.9", cli.parse("0.5.9", argv), host, expect["env"])
    forced = resolve("0.5.9", cli.parse("0.5.9", argv + ["--enable-flashinfer-allreduce-fusion"]), host,
                     {**expect["env"], "SGLANG_SIM_FORCE_AR_FUSION": "1"})
    assert forced.failure is None and forced.memory is not None and plain.memory is not None
    drop = 1 - forced.memory.kv_tokens / plain.memory.kv_tokens
    assert 0 < drop < 0.03
    assert forced.effective_mrr == plain.effective_mrr


def test_tuned_moe_configs_exist_off_sm120_and_fusion_workspace_only_costs_memory() -> None:
    expect = expectation("01")
    argv = shlex.split(expect["command"])
    argv = argv[argv.index("sglang.launch_server") + 1:]
    host = host_from_env({"SGLANG_SIM_GPU_NAME": "NVIDIA H200", "SGLANG_SIM_GPU_COUNT": "4"})
    resolved = resolve("0.5.10", cli.parse("0.5.10", argv), host, expect["env"])
    log, code = startup.render_text(startup.script(resolved, frozenset(), 1, "0.0.0.0", 8000), resolved)
    assert code is None
    assert "Performance might be sub-optimal" not in log
    assert len(_ranks_with(log, "Using MoE kernel config from ")) == 4
    assert "Custom allreduce is disabled" not in log
    assert _dump(log)["attention_backend"] == "triton"


def test_unknown_model_fails_unless_mapped_to_a_preset() -> None:
    argv = ["--model-path", "my-org/my-model", "--tp", "4"]
    host = host_from_env({"SGLANG_SIM_GPU_COUNT": "4"})
    for env, ready in (({}, False), ({"SGLANG_SIM_MODEL": "Qwen/Qwen3.5-122B-A10B"}, True)):
        resolved = resolve("0.5.10", cli.parse("0.5.10", argv), host, env)
        log, code = startup.render_text(startup.script(resolved, frozenset(), 1, "0.0.0.0", 8000), resolved)
        assert (code is None) == ready
        assert ("OSError: my-org/my-model is not a local folder" in log) != ready


def test_expert_parallel_ranks_carry_both_tags() -> None:
    argv = ["--model-path", "lukealonso/GLM-5-NVFP4", "--tp", "8", "--ep", "8", "--disable-cuda-graph"]
    resolved = resolve("0.5.10", cli.parse("0.5.10", argv), host_from_env({}), {})
    log, _ = startup.render_text(startup.script(resolved, frozenset(), 1, "0.0.0.0", 8000), resolved)
    assert "[2026-01-01 00:00:00 TP3 EP3] Load weight begin." in log
    assert "[2026-01-01 00:00:00 TP0 EP0] max_total_num_tokens=" in log
