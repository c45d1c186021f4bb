"""Splitting a mangled captured stream into records: prefixes, \\r meters, ANSI, journald, long lines."""

from __future__ import annotations

from deployctl.startup.lines import Rank, simple_record, split_records


def records(line: str) -> list[tuple[str, str | None, str]]:
    return [(r.text, r.ts, r.rank.label if r.rank else "") for r in split_records(line)]


def test_plain_prefix_and_rank_parts_in_either_order() -> None:
    assert records("[2026-02-19 13:40:18 TP2] Init torch distributed begin.") == [
        ("Init torch distributed begin.", "2026-02-19 13:40:18", "TP2")]
    # 0.4.x order (DP TP EP PP) and 0.5.x order (DP PP ATTN_CP MOE_DP TP EP) give the same Rank
    (a,) = split_records("[2025-08-12 11:20:19 DP1 TP3 EP3 PP0] x")
    (b,) = split_records("[2026-02-19 13:40:18 DP1 PP0 TP3 EP3] x")
    assert a.rank == b.rank == Rank(tp=3, dp=1, pp=0, ep=3)
    (c,) = split_records("[2026-10-31 09:00:00 DP0 PP1 ATTN_CP2 MOE_DP1 TP5 EP5] y")
    assert c.rank == Rank(tp=5, dp=0, pp=1, ep=5, attn_cp=2, moe_dp=1)
    assert c.rank.label == "DP0 PP1 ATTN_CP2 MOE_DP1 TP5 EP5"


def test_millisecond_timestamps() -> None:
    (rec,) = split_records("[2026-02-19 13:40:18.042 TP0] Load weight begin. avail mem=94.36 GB")
    assert (rec.ts, rec.ms, rec.rank.tp, rec.text) == ("2026-02-19 13:40:18", 42, 0, "Load weight begin. avail mem=94.36 GB")


def test_records_glued_after_progress_meters_are_found_anywhere() -> None:
    line = ("\r  0%|          | 0/23 [00:00<?, ?it/s]\rCapturing batches (bs=48 avail_mem=13.98 GB):   0%|"
            "          | 0/23 [00:00<?, ?it/s][2026-02-19 13:43:01 TP0] Using default MoE kernel config.\n")
    got = list(split_records(line))
    assert [r.fragment for r in got] == [True, True, False]
    assert got[1].text.startswith("Capturing batches (bs=48")
    assert got[2].text == "Using default MoE kernel config." and got[2].rank == Rank(tp=0)
    assert simple_record(line) is None


def test_two_records_glued_without_a_meter() -> None:
    got = records("[2026-02-19 13:40:22 TP0] a[2026-02-19 13:40:22] b")
    assert got == [("a", "2026-02-19 13:40:22", "TP0"), ("b", "2026-02-19 13:40:22", "")]


def test_ansi_colours_are_removed() -> None:
    (rec,) = split_records("[2026-10-31 09:00:02] \x1b[1;33m--disable-cuda-graph is deprecated\x1b[0m")
    assert rec.text == "--disable-cuda-graph is deprecated"
    (bare,) = split_records("\x1b[33mWarning: something\x1b[0m")
    assert bare.text == "Warning: something" and bare.ts is None


def test_journald_prefixes_are_removed() -> None:
    for prefix in ("Feb 19 13:40:18 gpu01 python3[2481337]: ",
                   "Feb  9 13:40:18.123456 gpu01 python3[2481337]: ",
                   "2026-02-19T13:40:18+0000 gpu01 python3[2481337]: ",
                   "2026-02-19T13:40:18.123456+00:00 gpu01 sglang-qwen[77]: ",
                   "Thu 2026-02-19 13:40:18 UTC gpu01 python3[2481337]: ",
                   "[  123.456789] gpu01 python3[2481337]: "):
        assert records(prefix + "[2026-02-19 13:40:18 TP1] Init torch distributed begin.") == [
            ("Init torch distributed begin.", "2026-02-19 13:40:18", "TP1")], prefix
        assert records(prefix + "Max running requests is reset to 48.") == [("Max running requests is reset to 48.", None, "")]


def test_uvicorn_level_is_dropped() -> None:
    assert records("[2026-02-19 13:43:59] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")[0][0] \
        == "Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
    assert records("[2026-02-21 09:09:44] ERROR:    [Errno 98] error while attempting to bind")[0][0] \
        == "[Errno 98] error while attempting to bind"


def test_bare_lines_and_traceback_frames_stay_whole() -> None:
    assert records('  File "/x/scheduler.py", line 3130, in run_scheduler_process') == [
        ('  File "/x/scheduler.py", line 3130, in run_scheduler_process', None, "")]
    assert records("usage: launch_server.py [-h] --model-path MODEL_PATH") == [
        ("usage: launch_server.py [-h] --model-path MODEL_PATH", None, "")]


def test_a_20_kb_line_is_one_record() -> None:
    body = "x" * 20_000
    (rec,) = split_records(f"[2026-02-19 13:44:01 TP0] Decode batch, {body}\n")
    assert rec.text == f"Decode batch, {body}"
    assert simple_record(f"[2026-02-19 13:44:01 TP0] Decode batch, {body}") == rec
