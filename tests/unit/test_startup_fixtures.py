"""Every fact in each fixture's .expect.json is extracted exactly (shared fixtures and our own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deployctl.startup.parser import StartupReport, parse_lines
from deployctl.startup.version import VersionEvidence, in_range

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"
FIXTURES = sorted(p.name.removesuffix(".expect.json") for p in LOGS.glob("*.expect.json"))


def _parse(name: str) -> StartupReport:
    with open(LOGS / f"{name}.log", encoding="utf-8", newline="\n") as stream:
        return parse_lines(stream)


def _expect(name: str) -> dict:
    return json.loads((LOGS / f"{name}.expect.json").read_text())


@pytest.fixture(scope="module", params=FIXTURES)
def case(request: pytest.FixtureRequest) -> tuple[dict, StartupReport]:
    return _expect(request.param), _parse(request.param)


def test_outcome_and_failure(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    assert report.outcome == expect["outcome"]
    assert report.ready == (expect["outcome"] == "ready")
    if expect["outcome"] == "failed":
        assert report.failure is not None
        assert report.failure.kind == expect["failure_kind"]
        assert report.failure.message == expect["failure_reason"]
        assert report.failure.evidence, "a failure carries the lines that show it"
        if "failing_ranks" in expect:
            assert list(report.failure.ranks) == expect["failing_ranks"]
            assert report.failure.rank == expect["failing_ranks"][0]
            # a data-parallel-only server's schedulers are DP ranks (tagged "[… DP3]"), not TP0 each
            assert report.failure.rank_kind == expect.get("failing_rank_kind", "TP")
        if "unknown_flags" in expect:
            assert list(report.failure.unknown_flags) == expect["unknown_flags"]
        if "failed_ranks" in expect:
            assert list(report.failed_ranks) == expect["failed_ranks"]
    else:
        assert report.failure is None


def test_server_args(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    if expect["server_args"] is None:
        assert report.server_args is None
        return
    assert report.server_args is not None
    for key, value in expect["server_args"].items():
        assert report.server_args.get(key) == value, key
        assert type(report.server_args.get(key)) is type(value), key


def test_scheduler_summary(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    summary = expect.get("scheduler_summary")
    if summary is None:
        assert report.scheduler is None
        assert report.max_running_requests is None
        return
    assert report.scheduler is not None
    for key, value in summary.items():
        assert getattr(report.scheduler, key) == value, key
    assert report.max_running_requests == expect["effective_max_running_requests"]
    if "max_running_requests" in (expect.get("server_args") or {}):
        assert report.configured_max_running_requests == expect["server_args"]["max_running_requests"]
    assert report.max_total_num_tokens == summary["max_total_num_tokens"]
    assert report.context_len == summary["context_len"]


def test_cuda_graphs(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    assert report.cuda_graph.state == expect["cuda_graph"]["state"]
    assert report.piecewise_cuda_graph.state == expect["piecewise_cuda_graph"]["state"]
    if "auto_set" in expect["piecewise_cuda_graph"]:
        assert report.piecewise_cuda_graph.auto_set == expect["piecewise_cuda_graph"]["auto_set"]
    if "batch_sizes" in expect["cuda_graph"]:
        assert list(report.cuda_graph.batch_sizes) == expect["cuda_graph"]["batch_sizes"]
    if report.cuda_graph.state == "captured":
        sizes = report.cuda_graph.batch_sizes
        assert list(sizes) == sorted(sizes, reverse=True)
        if sizes and report.max_running_requests is not None:
            assert max(sizes) <= max(report.max_running_requests, 1) * 4  # bs is clipped to the pool


def test_moe_warnings(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    got = {(w.kind, w.config_file): w for w in report.moe_config_warnings}
    assert len(got) == len(expect["moe_config_warnings"])
    for item in expect["moe_config_warnings"]:
        warning = got[(item["kind"], item["config_file"])]
        assert list(warning.ranks) == item["ranks"]
        if "triton_dir" in item:
            assert warning.triton_dir == item["triton_dir"]
        assert warning.E is not None and warning.N is not None and warning.device_name
        assert item["config_file"].startswith(f"E={warning.E},N={warning.N},device_name={warning.device_name}")
        if warning.block_shape is not None:
            assert f"block_shape={warning.block_shape}" in item["config_file"]
        if warning.dtype is not None:
            assert f"dtype={warning.dtype}" in item["config_file"]
        assert warning.down == item["config_file"].endswith("_down.json")


def test_http_and_warmup(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    assert report.listening == expect.get("listening")
    if expect.get("warmup_request"):
        assert report.warmup_request is not None
        assert expect["warmup_request"].startswith(report.warmup_request)
    if expect["outcome"] == "ready":
        assert report.phase == "ready"
        assert [p.name for p in report.phases][-1] == "ready"
        if expect["server_args"] is not None:  # a tail-only paste does not show when the start began
            assert report.total_seconds and report.total_seconds > 0
        else:
            assert report.total_seconds is None


def test_phase_and_ranks(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    if "phase" in expect:
        assert report.phase == expect["phase"]
    if "tp_ranks" in expect:
        assert list(report.tp_ranks) == expect["tp_ranks"]
    if "ranks" in expect:
        assert list(report.ranks) == expect["ranks"]
    if "blob_lines" in expect:
        assert report.blob_lines == expect["blob_lines"]
    if "deprecated_flags" in expect:
        assert [flag for d in report.deprecations for flag in d.flags] == expect["deprecated_flags"]


def test_version(case: tuple[dict, StartupReport]) -> None:
    """Evidence, not a guess: one release only when it is the only one left, else a range or unknown;
    the true version is always inside what the report says, and the cues are given."""
    expect, report = case
    true = expect["sglang_version"]["true_version"]
    evidence = VersionEvidence(report.sglang_version, report.sglang_version_source, report.sglang_version_range,
                               report.sglang_version_cues)
    assert in_range(true, evidence), (true, report.sglang_version_range, report.sglang_version_cues)
    if report.sglang_version is not None or report.sglang_version_range is not None:
        assert report.sglang_version_cues and report.sglang_version_evidence
    if expect["sglang_version"].get("inferable_from_log"):
        assert report.sglang_version is not None or report.sglang_version_range is not None
    if "version_range" in expect["sglang_version"]:
        assert report.sglang_version_range == expect["sglang_version"]["version_range"]


def test_facts_do_not_depend_on_version_lines(case: tuple[dict, StartupReport], request: pytest.FixtureRequest) -> None:
    """Remove every line that is only a version cue (the dump, the argparse prog, the UserWarning
    preamble): the facts those lines do not carry themselves stay the same."""
    expect, report = case
    name = request.node.callspec.params["case"]
    with open(LOGS / f"{name}.log", encoding="utf-8", newline="\n") as stream:
        lines = [line for line in stream if not _version_only(line)]
    stripped = parse_lines(lines)
    for key in ("outcome", "scheduler", "kv_cache", "max_mamba_cache_size", "moe_config_warnings", "listening",
                "warmup_request", "model_class", "weights_gb", "tp_ranks", "ranks"):
        assert getattr(stripped, key) == getattr(report, key), key
    assert (stripped.failure and stripped.failure.kind) == (report.failure and report.failure.kind)
    if report.cuda_graph.state in ("captured", "failed", "capturing"):
        assert stripped.cuda_graph.state == report.cuda_graph.state


def _version_only(line: str) -> bool:
    return "server_args=" in line or "sglang serve' is the recommended entrypoint" in line \
        or "launch_server.py:51: UserWarning" in line or line.startswith("  warnings.warn(")


def test_bare_lines(case: tuple[dict, StartupReport]) -> None:
    expect, report = case
    for item in expect.get("bare_lines_without_timestamp", []):
        probe = item.split(" (", 1)[0].removesuffix(" ...").removesuffix("...")
        assert any(probe in notice for notice in report.notices), item


def test_json_round_trip(case: tuple[dict, StartupReport]) -> None:
    _, report = case
    data = json.loads(json.dumps(report.to_dict()))
    for key in ("ready", "failure", "max_running_requests", "configured_max_running_requests",
                "max_total_num_tokens", "context_len", "cuda_graph", "piecewise_cuda_graph",
                "moe_config_warnings", "sglang_version", "phases", "server_args"):
        assert key in data
    again = StartupReport.from_dict(data)
    assert again.to_dict() == report.to_dict()


def test_header(case: tuple[dict, StartupReport]) -> None:
    """Parallelism, weight quantisation and speculative decoding, where the fixture states them."""
    expect, report = case
    if "parallelism" in expect:
        assert report.parallelism is not None
        for key, value in expect["parallelism"].items():
            assert getattr(report.parallelism, key) == value, key
    if "quantization" in expect:
        assert report.quantization == expect["quantization"]
    if "speculative" in expect:
        assert report.speculative is not None
        for key, value in expect["speculative"].items():
            assert getattr(report.speculative, key) == value, key
