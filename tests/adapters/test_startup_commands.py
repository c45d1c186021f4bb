"""The startup-report and startup-diff verbs, through the real CLI entry point."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from deployctl.cli import main
from deployctl.errors import ExitCode

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


def log(prefix: str) -> str:
    (path,) = LOGS.glob(f"{prefix}-*.log")
    return str(path)


def test_report_human(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["startup-report", log("02")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("READY in 3m51s · sglang 0.5.10 … 0.5.22 (from the log format)")
    assert "max_running_requests 26 (configured 48; hybrid-model cap: max_mamba_cache_size 132 // 5)" in out[1]


def test_report_failure_has_hint_and_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["startup-report", log("04")]) == ExitCode.FAILED  # a failed start: nonzero, the report printed
    out = capsys.readouterr().out
    assert out.startswith("FAILED: oom_kv_cache on TP0-7 during kv_cache")
    assert "hint: weights leave no room for the KV cache" in out
    assert "RuntimeError: Not enough memory." in out


def test_report_header_parallelism_ranks_quantisation_speculative(capsys: pytest.CaptureFixture[str]) -> None:
    """The header names the split, the failed ranks, the quantisation and the draft model, in text and JSON."""
    assert main(["startup-report", log("33")]) == ExitCode.FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("FAILED: cuda_graph_failed on TP1 EP1, TP3 EP3 during cuda_graphs")
    assert out[0].endswith("· TP4 EP4")
    assert "  model     quantization fp8 · speculative EAGLE (draft lmsys/Qwen3-235B-Eagle3, 3 steps, topk 1, " \
           "4 draft tokens)" in out
    assert any(line.startswith("  graphs    CUDA graph failed (CUDA error: an illegal memory access") for line in out)
    assert main(["startup-report", log("30"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parallelism"] == {"tp": 8, "dp": 8, "ep": 8, "pp": 1, "nnodes": 1, "dp_attention": True,
                                   "source": "server_args"}
    assert (data["quantization"], data["quantization_source"]) == ("fp8", "server_args")
    assert data["failed_ranks"] == [] and data["speculative"] is None and data["unwrapped_lines"] > 0
    assert main(["startup-report", log("35")]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith("· TP2 PP4 · http://0.0.0.0:30000")


def test_report_json_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = Path(log("08")).read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["startup-report", "-", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ready"] is True and report["max_running_requests"] == 2048
    assert report["moe_config_warnings"][0]["block_shape"] == "[128, 128]"


def test_report_bad_inputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["startup-report", str(tmp_path / "missing.log")]) == 2
    assert main(["startup-report"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a report"}')
    assert main(["startup-report", str(bad)]) == 2
    assert "not a startup report" in capsys.readouterr().err


def test_diff_of_logs_and_of_saved_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["startup-diff", log("01"), log("02"), "--arch", "sm120"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].startswith("max_running_requests 48 → 26 (−46%): capped by the mamba cache size")
    assert "flag differences linked to no changed fact:" in text
    for prefix in ("01", "02"):
        assert main(["startup-report", log(prefix), "--json"]) == 0
        (tmp_path / f"{prefix}.json").write_text(capsys.readouterr().out)
    assert main(["startup-diff", str(tmp_path / "01.json"), str(tmp_path / "02.json"), "--arch", "sm120", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["changes"][0]["text"] == text.splitlines()[0]
    assert data["unlinked_flags"][0]["flag"] == "enable_fused_moe_sum_all_reduce"


def test_report_refuses_a_file_that_is_no_sglang_log(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    files = {"random.bin": bytes(range(256)) * 16,
             "unit.service": b"[Unit]\nDescription=x\n[Service]\nExecStart=/usr/bin/python -m sglang.launch_server\n",
             "access.log": b'127.0.0.1 - - [01/Dec/2026:12:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.5.0"\n'}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert main(["startup-report", str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert "is not an SGLang startup log" in err and "STARTING" not in err


def test_diff_of_two_models_warns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["startup-diff", log("03"), log("08")]) == 0
    captured = capsys.readouterr()
    assert "warning: A and B are different models (lukealonso/GLM-5-NVFP4 vs Qwen/" in captured.err
    assert main(["startup-diff", log("03"), log("08"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"][0].startswith("A and B are different models")
    assert main(["startup-diff", log("01"), log("02")]) == 0
    assert "warning" not in capsys.readouterr().err
