"""The pure parts of the bench module: what it reads from the server, merging trials, the table."""

from __future__ import annotations

import pytest

from deployctl.bench.result import (
    BenchResult,
    LevelResult,
    Percentiles,
    TrialResult,
    merge_results,
)
from deployctl.bench.table import render_table
from deployctl.errors import InputError
from deployctl.load.sweep import server_facts


def trial(c: int, n: int = 0, *, tok_s: float = 100.0, invalid: str | None = None, failed: int = 0,
          notes: tuple[str, ...] = ()) -> TrialResult:
    return TrialResult(
        concurrency=c, trial=n, started_at=0.0, wall_s=10.0, requests_ok=2 * c, requests_failed=failed,
        output_tokens=int(tok_s * 10), input_tokens=1000, output_tok_s=tok_s, input_tok_s=100.0,
        per_request_tok_s=Percentiles(mean=tok_s / c), ttft_s=Percentiles(p50=0.0105, p99=0.2),
        itl_s=Percentiles(p50=0.008, p99=0.012), tpot_s=Percentiles(), e2e_s=Percentiles(), invalid_reason=invalid,
        notes=notes,
    )


def sweep(*levels: LevelResult, out: int = 1000) -> BenchResult:
    return BenchResult(url="u", model="m", input_tokens=1000, output_tokens=out, started_at=0.0, levels=levels)


def test_server_facts_take_the_effective_capacity_not_the_cli_value() -> None:
    info = {"version": "0.5.10", "served_model_name": "qwen3.5", "max_running_requests": 48, "dp_size": 2,
            "internal_states": [{"effective_max_running_requests_per_dp": 13}]}
    facts = server_facts(info, {"model_path": "Qwen/Qwen3.5"}, ["x"])
    assert facts == {"model": "qwen3.5", "version": "0.5.10", "capacity": 26, "vocab_size": None}


def test_server_facts_fall_back_step_by_step() -> None:
    assert server_facts({"max_running_requests": 48}, {}, ["served"])["capacity"] == 48
    assert server_facts({}, {"model_path": "/models/glm", "vocab_size": 154880}, []) == {
        "model": "/models/glm", "version": None, "capacity": None, "vocab_size": 154880}


def test_merge_appends_renumbered_trials_and_new_levels() -> None:
    a = sweep(LevelResult(1, (trial(1), trial(1, 1))), LevelResult(4, (trial(4),)))
    b = sweep(LevelResult(4, (trial(4), trial(4, 1))), LevelResult(16, (trial(16),)))
    merged = merge_results(a, b)
    assert [(lv.concurrency, [t.trial for t in lv.trials]) for lv in merged.levels] == [
        (1, [0, 1]), (4, [0, 1, 2]), (16, [0])]


def test_merge_refuses_different_shapes() -> None:
    with pytest.raises(InputError):
        merge_results(sweep(LevelResult(1, (trial(1),))), sweep(LevelResult(1, (trial(1),)), out=200))


def test_table_has_the_operators_columns_and_notes_invalid_trials() -> None:
    result = sweep(LevelResult(1, (trial(1, tok_s=121.9),)),
                   LevelResult(64, (trial(64, tok_s=1572.4, failed=3, invalid="failures: 3 of 131"),)))
    lines = render_table(result).splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:-1]] == [
        "C", "Agg tok/s", "Per-req tok/s", "Tokens", "Wall(s)", "Ok", "TTFT p50/p99 (ms)", "ITL p50/p99 (ms)"]
    assert [c.strip() for c in lines[2].split("|")[1:-1]] == [
        "1", "121.9", "121.9", "1219", "10.0", "2", "10.5 / 200.0", "8.0 / 12.0"]
    assert lines[3].split("|")[1].strip() == "64 [1]" and "128 (3 failed)" in lines[3]
    assert lines[4] == "[1] C=64 trial 0: invalid: failures: 3 of 131"


def test_table_numbers_a_levels_note_once_for_all_its_trials() -> None:
    note = "above the server's capacity: it runs at most 48 requests at once"
    result = sweep(LevelResult(64, (trial(64, notes=(note,)), trial(64, 1, notes=(note,), invalid="x"))))
    lines = render_table(result).splitlines()
    assert lines[2].split("|")[1].strip() == "64 [1]"
    assert lines[3].split("|")[1].strip() == "64 [2][1]"
    assert lines[4:] == ["[1] C=64: " + note, "[2] C=64 trial 1: invalid: x"]


def test_results_written_before_trial_notes_and_client_still_load() -> None:
    import json
    from dataclasses import asdict

    client = {"client_cpu_pct": 12.0, "peak_streaming": 4}
    old = asdict(sweep(LevelResult(4, (trial(4),))))
    t = old["levels"][0]["trials"][0]
    del t["notes"], t["client"]
    t["telemetry"] = {"source": "client", "details": {"client": client}}
    loaded = BenchResult.from_dict(json.loads(json.dumps(old))).levels[0].trials[0]
    assert loaded.client == client and loaded.telemetry is None and loaded.notes == ()
    t["telemetry"] = {"source": "nvml", "gpu_power_w": 250.0, "details": {"samples": 3, "client": client}}
    loaded = BenchResult.from_dict(json.loads(json.dumps(old))).levels[0].trials[0]
    assert loaded.client == client and loaded.telemetry.details == {"samples": 3}
    fresh = sweep(LevelResult(4, (trial(4, notes=("n",)),)))
    assert BenchResult.from_dict(json.loads(json.dumps(fresh.to_dict()))) == fresh
