"""Fatal signals that are not a Python exception, cut lines, contradicting cues, and what the text says."""

from __future__ import annotations

from pathlib import Path

from deployctl.startup.parser import parse_lines
from deployctl.startup.text import render_report
from deployctl.startup.wrappers import Unwrapper

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"
TS = "[2026-04-12 07:00:00"
BEGIN = "Capture cuda graph begin. This can take up to several minutes. avail mem=14.02 GB"
NO_IMAGE = "CUDA error (/sgl-kernel/csrc/gemm/nvfp4_scaled_mm.cu:201): no kernel image is available for execution on the device"


def test_a_kernels_cuda_error_after_capture_began_is_a_failure() -> None:
    report = parse_lines([f"{TS} TP0] {BEGIN}", f"{TS} TP5] {BEGIN}", NO_IMAGE])
    assert (report.outcome, report.failure.kind, report.phase) == ("failed", "cuda_error", "cuda_graphs")
    assert report.failure.message == NO_IMAGE
    assert report.cuda_graph.state == "failed"


def test_torch_watchdog_and_terminate_lines_name_the_rank() -> None:
    watchdog = ("[rank5]:[E1201 12:00:00.123456 1234 ProcessGroupNCCL.cpp:1682] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
                "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
                "encountered")
    report = parse_lines([f"{TS} TP5] {BEGIN}", watchdog])
    assert (report.failure.kind, report.failure.ranks, report.failed_ranks) == ("cuda_error", (5,), ("TP5",))
    report = parse_lines([f"{TS} TP1] {BEGIN}", "terminate called after throwing an instance of 'c10::Error'",
                          "  what():  CUDA error: an illegal memory access was encountered"])
    assert report.failure.message == "CUDA error: an illegal memory access was encountered"
    report = parse_lines([f"{TS} TP1] Init torch distributed begin.",
                          "Failed: NCCL error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:88 'unhandled cuda error'"])
    assert report.failure.kind == "nccl"


def test_the_cuda_runtimes_own_words_are_a_failure_whoever_printed_them() -> None:
    line = ("cudaLaunchKernelEx(rms_norm_kernel<float>): no kernel image is available for execution on the device")
    report = parse_lines([f"{TS} TP0] {BEGIN}", line])
    assert (report.failure.kind, report.failure.message) == ("cuda_error", line)
    glued = parse_lines([f"{TS} TP0] {BEGIN}", "\rCapturing batches (bs=8 avail_mem=1.0 GB):   0%| | 0/4 [00:00<?, ?it/s]"
                         "CUDA error (/sgl-kernel/build/_deps/repo-flash-attention-src/hopper/flash_fwd_launch_template.h:166"
                         "): no kernel image is available for execution on the device"])
    assert glued.failure.kind == "cuda_error" and "flash_fwd_launch_template.h:166" in glued.failure.message
    triton = parse_lines(["Traceback (most recent call last):", '  File "/x/sglang/srt/layers/a.py", line 1, in f',
                          "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered"])
    assert triton.failure.kind == "cuda_error"


def test_a_collective_timeout_is_an_nccl_failure_on_its_rank() -> None:
    line = ("[rank6]:[E1201 12:10:00.000000 77 ProcessGroupNCCL.cpp:632] [Rank 6] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran "
            "for 600012 milliseconds before timing out.")
    report = parse_lines([f"{TS} TP6] {BEGIN}", line])
    assert (report.failure.kind, report.failed_ranks) == ("nccl", ("TP6",))
    assert report.failure.message.startswith("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5")


def test_prose_about_errors_is_no_failure() -> None:
    lines = [f"{TS} TP0] {BEGIN}", "CUDA kernel errors might be asynchronously reported at some other API call",
             "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
             f"{TS}] NCCL error handling: set TORCH_NCCL_ASYNC_ERROR_HANDLING=1"]
    assert parse_lines(lines).outcome == "starting"


def test_a_capture_failure_of_any_reason_fails_the_graph_with_its_reason() -> None:
    lines = [f"{TS} TP2] {BEGIN}", f"{TS} TP2] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 654, in __init__',
             "Exception: Capture cuda graph failed: Assertion failed: num_tokens % 4 == 0", "Possible solutions:"]
    report = parse_lines(lines)
    assert (report.failure.kind, report.phase, report.failure.ranks) == ("cuda_graph_failed", "cuda_graphs", (2,))
    assert (report.cuda_graph.state, report.cuda_graph.reason) == ("failed", "Assertion failed: num_tokens % 4 == 0")
    prefill = parse_lines(["Exception: Capture prefill CUDA graph failed: CUDA error: an illegal memory access "
                           "was encountered"])
    assert prefill.failure.kind == "cuda_graph_failed" and prefill.piecewise_cuda_graph.state == "failed"


def test_the_capture_failure_replaces_the_kernel_error_it_wraps() -> None:
    report = parse_lines([f"{TS} TP3] {BEGIN}", NO_IMAGE, f"{TS} TP3] Scheduler hit an exception: Traceback (most "
                          "recent call last):", '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 1',
                          f"Exception: Capture cuda graph failed: {NO_IMAGE}"])
    assert report.failure.kind == "cuda_graph_failed" and report.failure.ranks == (3,)


def test_every_death_of_a_process_is_a_failure() -> None:
    cut = parse_lines([f"{TS} DP3 TP3 EP3] Scheduler hit an exception: Traceback (most recent call last):"])
    assert cut.outcome == "failed" and cut.failed_ranks == ("DP3 TP3 EP3",)
    assert "log ends before its exception line" in cut.failure.message
    dead = parse_lines([f"{TS} TP0] Init torch distributed begin.", f"{TS}] Rank 1 scheduler is dead. Please check if "
                        "there are relevant logs.", f"{TS}] Exit code: -9"])
    assert (dead.failure.kind, dead.failed_ranks) == ("rank_died", ("TP1",))
    quit_ = parse_lines([f"{TS} TP0] Init torch distributed begin.", f"{TS}] Received sigquit from a child process. "
                         "It usually means the child failed."])
    assert quit_.outcome == "failed"
    controller = parse_lines([f"{TS}] DataParallelController hit an exception: Traceback (most recent call last):",
                              '  File "/x/sglang/srt/managers/data_parallel_controller.py", line 5, in run', "EOFError"])
    assert controller.outcome == "failed"
    exited = parse_lines(["svc  | " + f"{TS} TP0] Init torch distributed begin.", "svc exited with code 137"])
    assert (exited.failure.kind, exited.phase) == ("process_exit", "distributed_init")
    assert parse_lines(["svc  | " + f"{TS} TP0] Init torch distributed begin.", "svc exited with code 0"]).outcome \
        == "starting"


def test_a_crash_below_python_is_a_failure() -> None:
    report = parse_lines([f"{TS} TP0] {BEGIN}", "Fatal Python error: Segmentation fault", "",
                          "Current thread 0x00007f3c (most recent call first):",
                          '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 400 in capture'])
    assert (report.outcome, report.failure.kind, report.phase) == ("failed", "crashed", "cuda_graphs")
    killed = parse_lines([f"{TS} TP0] {BEGIN}", f"{TS}] Received sigquit from a child process. It usually means "
                          "the child failed.", "Killed"])
    assert killed.outcome == "failed" and "sigquit" in killed.failure.message
    assert parse_lines([f"{TS} TP0] {BEGIN}", "Killed"]).failure.kind == "crashed"
    assert parse_lines(["Killed"]).sglang_log is False  # a lone shell word is no SGLang log


def test_a_checkpoints_own_quantisation_is_read_from_the_moe_config_name() -> None:
    report = parse_lines(open(LOGS / "08-qwen3-235b-fp8-tp4-v0.4.10.post2.log", encoding="utf-8"))
    assert (report.quantization, report.quantization_source) == ("fp8_w8a8", "moe_kernel_config")


def test_a_draft_without_its_own_path_is_named_by_its_class() -> None:
    report = parse_lines(open(LOGS / "01-qwen35-122b-tp4-mtp-baseline-v0.5.10.log", encoding="utf-8"))
    spec = report.speculative
    assert (spec.algorithm, spec.draft_model, spec.draft_model_class) == ("EAGLE", None, "Qwen3_5ForCausalLMMTP")
    assert "speculative EAGLE (own draft layers Qwen3_5ForCausalLMMTP, 3 steps" in render_report(report)


def test_a_cut_last_line_is_no_version_evidence() -> None:
    head = [f"{TS} TP0] Init torch distributed ends. elapsed=2.31 s, mem usage=0.61 GB"]
    cut = parse_lines(head + [f"{TS} TP0] Capture cuda graph begin. This can take up to several mi"])
    whole = parse_lines(head)
    assert cut.sglang_version_range == whole.sglang_version_range == "0.5.8.post1 … 0.5.22"
    assert not any("without avail mem" in cue for cue in cut.sglang_version_cues)
    # the same cue on a line that is followed by another stands
    old = parse_lines([f"{TS} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.float16, avail mem=12.00 GB",
                       f"{TS} TP0] Memory pool end. avail mem=3.00 GB"])
    assert any("without mem usage" in cue for cue in old.sglang_version_cues)
    cut_old = parse_lines([f"{TS} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.float16, avail mem=12.00 GB"])
    assert not cut_old.sglang_version_cues


def test_contradicting_cues_are_reported_as_such() -> None:
    report = parse_lines([f"{TS} TP0] Init torch distributed ends. elapsed=2.31 s, mem usage=0.61 GB",
                          f"{TS} TP0] Capture cuda graph begin. This can take up to several minutes.",
                          f"{TS} TP0] Memory pool end. avail mem=3.00 GB"])
    assert report.sglang_version is None and report.sglang_version_range is None
    assert "0.5.8.post1 or newer" in report.sglang_version_contradiction
    assert "0.4.10.post1 or older" in report.sglang_version_contradiction
    assert "cues contradict" in render_report(report).splitlines()[0]


def test_a_version_the_log_states_is_taken_when_the_format_allows_it() -> None:
    init = f"{TS} TP0] Init torch distributed ends. elapsed=2.31 s, mem usage=0.61 GB"
    report = parse_lines(["Python: 3.12.3", "sglang: 0.5.9", "sgl_kernel: 0.3.21", init])
    assert (report.sglang_version, report.sglang_version_source) == ("0.5.9", "log_exact")
    assert "stated in the log" in render_report(report).splitlines()[0]
    tagged = parse_lines(["docker run --gpus all lmsysorg/sglang:v0.5.10-cu129 python3 -m sglang.launch_server", init])
    assert tagged.sglang_version == "0.5.10"
    clash = parse_lines(["sglang: 0.4.6.post4", init])
    assert clash.sglang_version is None and "0.4.6.post4" in clash.sglang_version_contradiction
    assert parse_lines(["lmsysorg/sglang:latest", init]).sglang_version is None


def test_the_capture_size_list_line_gives_the_sizes() -> None:
    report = parse_lines([f"{TS} TP0] {BEGIN}", f"{TS} TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
                          "\rCapturing batches (bs=32 avail_mem=13.90 GB):  14%|#| 1/7 [00:01<00:06,  1.01it/s]"])
    assert report.cuda_graph.batch_sizes == (32, 24, 16, 8, 4, 2, 1)
    cut = parse_lines([f"{TS} TP0] {BEGIN}", f"{TS} TP0] Capture cuda graph bs [1, 2, 4, 8, 1"])
    assert cut.cuda_graph.batch_sizes == ()


def test_the_split_without_a_dump_comes_from_the_rank_prefixes() -> None:
    lines = [f"{TS} DP{d} TP{t} EP{t}] Init torch distributed begin." for t in range(8) for d in (t // 2,)]
    report = parse_lines(lines)
    assert (report.parallelism.tp, report.parallelism.dp, report.parallelism.ep) == (8, 4, 8)
    assert render_report(report).splitlines()[0].endswith("· TP8 DP4 EP8 (from the ranks seen)")


def test_an_unknown_phase_is_not_argument_parsing() -> None:
    text = render_report(parse_lines(["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]))
    assert text.startswith("FAILED: oom during an unknown phase")
    assert "argument parsing" not in text


def test_an_underscore_flag_is_told_its_hyphen_spelling() -> None:
    report = parse_lines(["usage: sglang serve [-h] [--reasoning-parser {qwen3,deepseek-r1}]",
                          "sglang serve: error: unrecognized arguments: --reasoning_parser qwen3"])
    text = render_report(report)
    assert "use --reasoning_parser → --reasoning-parser" in text
    assert "does not have the flag" not in text
    other = render_report(parse_lines(["sglang serve: error: unrecognized arguments: --enable-foo"]))
    assert "does not have the flag" in other


def test_unwrapper_shapes_and_negatives() -> None:
    unwrap = Unwrapper().unwrap
    assert unwrap("sglang-1  | [2026-01-01 00:00:00 TP0] x") == "[2026-01-01 00:00:00 TP0] x"
    assert unwrap("sglang-1  |   File \"/a.py\", line 1, in f") == "  File \"/a.py\", line 1, in f"
    assert unwrap("sglang-1  |") == ""
    assert unwrap("2026-01-01T00:00:00.123456789Z [2026-01-01 00:00:00] y") == "[2026-01-01 00:00:00] y"
    assert unwrap("Dec 01 12:00:00 gpu-7 sglang[42]:   File \"/a.py\"") == "  File \"/a.py\""
    assert unwrap("2026-12-01T12:00:00+00:00 gpu-7 sglang[42]: [2026-01-01 00:00:00] v") == "[2026-01-01 00:00:00] v"
    assert unwrap("2026-12-01T12:00:00.5Z gpu-7 sglang[42]: [2026-01-01 00:00:00] v") == "[2026-01-01 00:00:00] v"
    assert unwrap("2026-12-01T12:00:00.5Z launch_server.py: error: x") == "launch_server.py: error: x"
    assert unwrap("> > [2026-01-01 00:00:00] z") == "[2026-01-01 00:00:00] z"
    assert unwrap("\x1b[36msglang-1  | \x1b[0m[2026-01-01 00:00:00] c") == "[2026-01-01 00:00:00] c"
    assert unwrap("[pod/sglang-0/sglang] [2026-01-01 00:00:00 TP1] w") == "[2026-01-01 00:00:00 TP1] w"
    assert unwrap("[rank3]:   File \"/a.py\", line 1") == "  File \"/a.py\", line 1"
    assert unwrap("[rank3]:[W1201 12:00:00.1 ProcessGroupNCCL.cpp:1] x") == "[rank3]:[W1201 12:00:00.1 ProcessGroupNCCL.cpp:1] x"
    plain = Unwrapper()
    for line in ("Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]", "a | b",
                 "Model config | hidden_size=4096", "  |  ", "| col | col |", "x  | y"):
        assert plain.unwrap(line) == line
    assert plain.wrapped == 0


def test_a_kernel_error_on_a_data_parallel_only_rank_is_named_by_its_dp_rank() -> None:
    report = parse_lines([f"{TS} DP0] {BEGIN}", f"{TS} DP5] {BEGIN}", f"{TS} DP5] {NO_IMAGE.split('] ', 1)[-1]}"])
    assert (report.failure.kind, report.failure.ranks, report.failure.rank_kind) == ("cuda_error", (5,), "DP")
