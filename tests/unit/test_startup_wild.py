"""Logs as people have them: every version's format, tail-only pastes, cut logs, files that are no log."""

from __future__ import annotations

import random

from deployctl.startup.parser import parse_lines
from deployctl.startup.version import CUES, RELEASES, Cue, decide, field_cues, in_range

SUMMARY_03 = "max_total_num_tokens=242171, max_prefill_tokens=16384, max_running_requests=4097, context_len=131072"


def test_not_an_sglang_log_is_said_so() -> None:
    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(4096)).decode("utf-8", errors="replace").split("\n")
    unit = ["[Unit]", "Description=SGLang qwen35", "[Service]", "ExecStart=/opt/sglang/bin/python -m sglang.launch_server",
            "Restart=on-failure", "[Install]", "WantedBy=multi-user.target"]
    nginx = ['127.0.0.1 - - [01/Dec/2026:12:00:00 +0000] "GET /v1/models HTTP/1.1" 200 512 "-" "curl/8.5.0"',
             '10.0.0.7 - - [01/Dec/2026:12:00:01 +0000] "POST /v1/chat/completions HTTP/1.1" 502 157 "-" "python"']
    app = ["[2026-12-01 12:00:00] INFO starting worker", "Traceback (most recent call last):",
           '  File "/srv/app.py", line 3, in <module>', "ValueError: bad config"]
    for lines in (noise, unit, nginx, app, []):
        report = parse_lines(lines)
        assert report.sglang_log is False and report.outcome in ("starting", "failed")


def test_a_tail_that_is_only_an_exception_line_is_classified() -> None:
    report = parse_lines(["RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"])
    assert report.sglang_log and report.outcome == "failed"
    assert (report.failure.kind, report.phase) == ("nccl", "distributed_init")


def test_time_only_stamps_and_the_oldest_summary() -> None:
    report = parse_lines(["[23:59:58 TP0] Capture cuda graph begin. This can take up to several minutes.",
                          f"[00:00:03 TP0] {SUMMARY_03}", "[00:00:05] The server is fired up and ready to roll!"])
    assert report.ready and report.ranks == ("TP0",)
    assert report.scheduler.chunked_prefill_size is None and report.max_running_requests == 4097
    assert report.phase_seconds("cuda_graphs") == 5.0  # across midnight
    assert report.cuda_graph.state == "captured" and report.cuda_graph.inferred  # 0.3.x prints no 'end'
    assert report.sglang_version_range == "0.3.5.post2 or older"


def test_the_summary_proves_the_pools_and_the_capture_stage() -> None:
    line = ("[2026-02-19 13:41:41 TP0] max_total_num_tokens=319488, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=26, context_len=262144, available_gpu_mem=11.09 GB")
    report = parse_lines([line])
    assert report.outcome == "starting" and report.phase == "http_server"
    assert report.cuda_graph.state == "unknown" and "passed the capture stage" in report.cuda_graph.evidence
    assert any("memory pools" in fact for fact in report.inferred)


def test_a_negative_kv_budget_is_flagged() -> None:
    report = parse_lines(["[2026-10-31 09:01:57 TP0] Use sliding window memory pool. full_layer_tokens=-4096, "
                          "swa_layer_tokens=1024"])
    assert any("negative KV token budget" in notice for notice in report.notices)


def test_version_windows_intersect_into_one_release_a_range_or_unknown() -> None:
    one = decide([CUES["'Load weight end.' with elapsed= and dtype= (0.5.8.post1 … 0.5.9)"],
                  Cue("test: from 0.5.9", "0.5.9", None)])
    assert (one.version, one.source) == ("0.5.9", "log_inferred")
    span = decide([CUES["'Load weight end.' with elapsed= and dtype= (0.5.8.post1 … 0.5.9)"]])
    assert span.version is None and span.range == "0.5.8.post1 … 0.5.9" and in_range("0.5.9", span)
    assert not in_range("0.5.10", span)
    clash = decide([CUES["'Init parallel begin.' (after 0.5.10)"], CUES["'Init nccl begin.' (until 0.3.5)"]])
    assert clash.version is None and clash.range is None and "contradict" in clash.cues[0]
    assert decide([]).range is None and decide([]).cues == ()
    told = decide([CUES["'Init nccl begin.' (until 0.3.5)"]], server_info_version="0.5.11")
    assert (told.version, told.source) == ("0.5.11", "server_info")


def test_a_cut_dump_says_nothing_about_missing_fields() -> None:
    cut = field_cues({"model_path", "tp_size"}, complete=False, label="dump")
    assert all(cue.high is None for cue in cut)
    complete = field_cues({"model_path", "tp_size"}, complete=True, label="dump")
    assert any(cue.high is not None for cue in complete)  # a complete dump without later fields is older


def test_releases_are_in_order() -> None:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.replace(".post", ".").split("."))
    assert list(RELEASES) == sorted(RELEASES, key=key) and len(set(RELEASES)) == len(RELEASES)


def test_every_rank_prefix_shape() -> None:
    lines = ["[2026-02-19 13:40:01 EP3] Init torch distributed begin.",
             "[2026-02-19 13:40:01 PP1 TP0] Init torch distributed begin.",
             "[2026-02-19 13:40:01 DP1 TP2] Init torch distributed begin.",
             "[2026-02-19 13:40:01 TP0 PP1] Init torch distributed begin.",  # 0.5.4 order
             "[13:40:01 DP0 TP0] Init nccl begin."]
    report = parse_lines(lines)
    assert report.ranks == ("EP3", "PP1 TP0", "DP0 TP0", "DP1 TP2")  # TP0 PP1 is PP1 TP0


def test_a_flag_that_disables_prefill_graphs_is_not_automatic() -> None:
    dump = ("[2026-10-31 09:00:03] server_args={'model_path': 'm', 'disable_cuda_graph': True, "
            "'cuda_graph_config': {'decode': {'backend': 'disabled'}, 'prefill': {'backend': 'disabled'}}}")
    report = parse_lines([dump, "[2026-10-31 09:00:04] The server is fired up and ready to roll!"])
    assert (report.piecewise_cuda_graph.state, report.piecewise_cuda_graph.auto_set) == ("disabled", False)
    assert report.cuda_graph.state == "disabled"
