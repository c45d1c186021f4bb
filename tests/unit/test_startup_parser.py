"""The parser on hand-built lines (from the format facts), beyond what the fixture files cover."""

from __future__ import annotations

import tracemalloc

from deployctl.startup.parser import StartupParser, parse_lines
from deployctl.startup.serverargs import parse_server_args

TS = "2026-02-19 13:40:"


def at(second: int, text: str, rank: str = "") -> str:
    tag = f" {rank}" if rank else ""
    return f"[{TS}{second:02d}{tag}] {text}"


DUMP = ("server_args=ServerArgs(model_path='Qwen/Qwen3.5-122B-A10B', tp_size=4, max_running_requests=48, "
        "chunked_prefill_size=8192, disable_cuda_graph=False, disable_piecewise_cuda_graph=True, "
        "speculative_algorithm='EAGLE', json_model_override_args='{\"a\": [1, 2], \"b\": \"x, y\"}', "
        "cuda_graph_bs=[1, 2, 4], served_model_name='q(3.5)', nnodes=1)")
STARTUP = [
    at(1, DUMP),
    at(8, "Init torch distributed begin.", "TP0"),
    at(10, "Init torch distributed ends. elapsed=2.71 s, mem usage=0.58 GB", "TP0"),
    at(10, "Load weight begin. avail mem=94.36 GB", "TP0"),
    at(30, "Load weight end. elapsed=20.00 s, type=Qwen3_5MoeForConditionalGeneration, avail mem=35.57 GB, mem usage=58.79 GB.", "TP0"),
    at(31, "Mamba Cache is allocated. max_mamba_cache_size: 132, conv_state size: 0.29GB, ssm_state size: 8.21GB ", "TP0"),
    at(31, "KV Cache is allocated. #tokens: 319488, K size: 1.83 GB, V size: 1.83 GB", "TP0"),
    at(31, "Memory pool end. avail mem=14.15 GB", "TP0"),
    at(32, "Capture cuda graph begin. This can take up to several minutes. avail mem=13.98 GB", "TP0"),
    at(40, "Capture cuda graph end. Time elapsed: 8.00 s. mem usage=0.86 GB. avail mem=13.12 GB.", "TP0"),
    at(41, "max_total_num_tokens=319488, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=26, context_len=262144, available_gpu_mem=11.09 GB", "TP0"),
    at(42, "INFO:     Started server process [1]"),
    at(42, "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"),
    at(43, 'INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK'),
    at(44, "The server is fired up and ready to roll!"),
]


def test_report_any_time_and_non_destructive() -> None:
    parser = StartupParser()
    for line in STARTUP[:4]:
        parser.feed(line)
    mid = parser.report()
    assert (mid.outcome, mid.phase) == ("starting", "load_weights")
    assert mid.phases[-1].complete is False
    assert mid.configured_max_running_requests == 48 and mid.max_running_requests is None
    assert parser.report() == mid
    for line in STARTUP[4:]:
        parser.feed(line)
    done = parser.report()
    assert done.ready and done.phase == "ready"
    assert (done.max_running_requests, done.configured_max_running_requests, done.max_mamba_cache_size) == (26, 48, 132)
    assert done.total_seconds == 43.0
    assert done.phase_seconds("load_weights") == 20.0
    assert done.cuda_graph.state == "captured" and done.cuda_graph.seconds == 8.0
    assert done.warmup_request == "POST /generate"
    assert done.server_args["json_model_override_args"] == '{"a": [1, 2], "b": "x, y"}'
    assert done.server_args["served_model_name"] == "q(3.5)" and done.server_args["nnodes"] == 1


def test_unknown_lines_and_garbage_are_ignored() -> None:
    noise = ["", "\x00\x01binary", "[not a timestamp] hello", at(5, "Something new in 0.6.0", "TP0"),
             "}{)(][", "[2026-02-19 13:40:05 XX9] odd prefix"]
    report = parse_lines(noise + STARTUP + noise)
    assert report.ready and report.failure is None


def test_truncated_dump_keeps_the_fields_before_the_cut() -> None:
    fields, shape = parse_server_args(DUMP[:120])
    assert shape == "dataclass"
    assert fields["model_path"] == "Qwen/Qwen3.5-122B-A10B" and fields["tp_size"] == 4
    assert "chunked_prefill_size" not in fields  # the cut field is dropped, not half-read


def test_dict_dump_with_a_non_literal_value() -> None:
    message = "server_args={'model_path': 'm', 'mode': <Mode.A: 1>, 'cuda_graph_config': {'decode': {'backend': 'full'}}, 'tp_size': 8}"
    fields, shape = parse_server_args(message)
    assert shape == "dict"
    assert fields["tp_size"] == 8 and fields["cuda_graph_config"] == {"decode": {"backend": "full"}}
    assert fields["mode"] == "<Mode.A: 1>"


def test_server_info_gives_the_version_and_the_effective_value() -> None:
    info = {"version": "0.5.11", "internal_states": [{"effective_max_running_requests_per_dp": 30}]}
    report = parse_lines(STARTUP[:3], server_info=info)
    assert (report.sglang_version, report.sglang_version_source) == ("0.5.11", "server_info")
    assert report.max_running_requests == 30 and report.effective_max_running_requests_source == "server_info"


def test_argparse_errors() -> None:
    report = parse_lines(["usage: sglang serve [-h] --model-path MODEL_PATH",
                          "sglang serve: error: unrecognized arguments: --foo 3 --bar"])
    assert report.failure.kind == "unknown_flag"
    assert report.failure.unknown_flags == ("--foo", "--bar")
    ambiguous = parse_lines(["launch_server.py: error: ambiguous option: --cuda-graph-max-bs could match "
                             "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"])
    assert ambiguous.failure.kind == "bad_flag" and ambiguous.failure.unknown_flags == ()


def test_value_error_while_resolving_flags_is_a_bad_flag() -> None:
    report = parse_lines([
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/server_args.py", line 2450, in _handle_speculative_decoding',
        '    raise ValueError(',
        "ValueError: trtllm_mha backend does not support speculative decoding with topk > 1",
    ])
    assert report.failure.kind == "bad_flag"
    assert report.failure.message == "trtllm_mha backend does not support speculative decoding with topk > 1"


def test_rank_is_dead_before_0_5_10_and_sigquit_alone() -> None:
    report = parse_lines([at(1, DUMP), at(30, "Rank 3 scheduler is dead. Please check if there are relevant logs."),
                          at(30, "Exit code: -9")])
    assert (report.failure.kind, report.failure.rank) == ("rank_died", 3)
    quit_only = parse_lines([at(1, DUMP), at(9, "Received sigquit from a child process. It usually means the child failed.")])
    assert quit_only.failure.kind == "exception"


def test_a_specific_cause_replaces_a_generic_one_and_ranks_merge() -> None:
    lines = [at(1, DUMP), at(9, "Received sigquit from a child process. It usually means the child failed.")]
    for rank in (1, 0):
        lines += [at(9, "Scheduler hit an exception: Traceback (most recent call last):", f"TP{rank}"),
                  '  File "/x/pynccl_wrapper.py", line 376, in NCCL_CHECK',
                  "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", ""]
    report = parse_lines(lines)
    assert report.failure.kind == "nccl" and report.failure.ranks == (0, 1) and report.failure.rank == 1


def test_crash_after_ready() -> None:
    report = parse_lines(STARTUP + [at(59, "Subprocess scheduler_0 (pid=123) crashed with exit code -9. Triggering SIGQUIT for cleanup...")])
    assert report.outcome == "failed" and report.failure.kind == "crashed" and report.phase == "ready"


def test_0_5_23_prefill_graph_disabled_automatically() -> None:
    dump = "server_args={'tp_size': 4, 'cuda_graph_config': {'decode': {'backend': 'full'}, 'prefill': {'backend': 'disabled'}}}"
    report = parse_lines([at(1, dump), at(40, "Disable prefill CUDA graph because cuda_graph_config resolved "
                                             "prefill.backend='disabled' (multimodal model)", "TP0")])
    assert report.piecewise_cuda_graph.state == "disabled" and report.piecewise_cuda_graph.auto_set is True


def test_memory_stays_flat_while_following() -> None:
    parser = StartupParser()
    for line in STARTUP:
        parser.feed(line)
    decode = at(50, "Decode batch, #running-req: 26, #token: 9000, token usage: 0.03, cuda graph: True, gen throughput (token/s): 900.00", "TP0")
    tracemalloc.start()
    for i in range(2000):
        parser.feed(decode)
        parser.feed(f"a distinct bare warning number {i}")
        parser.feed(at(51, f"The flag --old-{i} is deprecated"))
    small, _ = tracemalloc.get_traced_memory()
    for i in range(2000, 20000):
        parser.feed(decode)
        parser.feed(f"a distinct bare warning number {i}")
        parser.feed(at(51, f"The flag --old-{i} is deprecated"))
    large, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert large - small < 64 * 1024, (small, large)
    report = parser.report()
    assert len(report.notices) <= 64 and len(report.deprecations) <= 64 and report.lines == len(STARTUP) + 60000


def test_a_multi_line_exception_message_is_one_exception() -> None:
    report = parse_lines([
        at(1, DUMP),
        at(9, "Scheduler hit an exception: Traceback (most recent call last):", "TP1"),
        '  File "/x/torch/distributed/distributed_c10d.py", line 4392, in barrier',
        "    work = group.barrier(opts=opts)",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        "Last error:",
        "socketStartConnect: Connect to 10.0.0.2<45677> failed : Software caused connection abort",
        "",
    ])
    assert report.failure.kind == "nccl" and report.failure.rank == 1
    assert report.failure.message.startswith("NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356")
    assert report.failure.evidence[-3].startswith("ncclSystemError")


def test_a_file_appended_across_restarts_reports_the_last_start() -> None:
    from pathlib import Path

    logs = Path(__file__).resolve().parent.parent / "data" / "logs"
    failed = (next(logs.glob("04-*.log"))).read_bytes().decode().split("\n")
    good = (next(logs.glob("03-*.log"))).read_bytes().decode().split("\n")
    report = parse_lines(failed + good)
    alone = parse_lines(good)
    assert report.ready and report.failure is None and report.earlier_starts == 1
    assert report.notices == alone.notices and report.phases == alone.phases
    assert report.max_running_requests == 1024


def test_0_5_23_deprecated_disable_cuda_graph_disables_both_graphs() -> None:
    dump = ("server_args={'tp_size': 4, 'disable_cuda_graph': True, 'cuda_graph_config': "
            "{'decode': {'backend': 'disabled'}, 'prefill': {'backend': 'disabled'}}}")
    report = parse_lines([
        at(0, "\x1b[1;33m--disable-cuda-graph is deprecated; use --cuda-graph-backend-decode=disabled "
              "--cuda-graph-backend-prefill=disabled\x1b[0m"),
        at(1, dump),
        at(40, "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
               "(--disable-cuda-graph)", "TP0"),
    ])
    assert report.cuda_graph.state == "disabled"
    assert (report.piecewise_cuda_graph.state, report.piecewise_cuda_graph.auto_set) == ("disabled", False)
    assert report.deprecations[0].flags[0] == "--disable-cuda-graph"
