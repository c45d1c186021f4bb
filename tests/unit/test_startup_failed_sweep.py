"""A failed start is never "starting": every failed fixture, plain and behind every log wrapper, and
every prefix of it from its first fatal line on; wrappers change nothing in a plain log's facts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from deployctl.startup.parser import StartupParser, parse_lines

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs"


def _expect(name: str) -> dict:
    return json.loads((LOGS / f"{name}.expect.json").read_text())


def _lines(name: str) -> list[str]:
    with open(LOGS / f"{name}.log", encoding="utf-8", newline="\n") as stream:
        return list(stream)


ALL = sorted(p.name.removesuffix(".expect.json") for p in LOGS.glob("*.expect.json"))
FAILED = [name for name in ALL if _expect(name)["outcome"] == "failed"]
# Fixtures whose lines carry no wrapper of their own (the journald, compose, kubectl and quoted ones do).
PLAIN = [name for name in ALL if not any(w in name for w in ("journal", "compose", "kubectl", "quoted"))]


def _compose(line: str) -> str:
    return "sglang-1  | " + line if line.strip() else "sglang-1  |\n"


def _kubectl(line: str) -> str:
    return "2026-01-01T00:00:00.123456789Z " + line


def _journal(line: str) -> str:
    return "Jan 01 00:00:00 gpu-7 sglang[4242]: " + line


def _pod(line: str) -> str:
    return "[pod/sglang-0/sglang] " + line


def _quoted(line: str) -> str:
    return "> " + line


def _all_of_them(line: str) -> str:
    return _quoted(_compose(_kubectl(line)))


WRAPPERS: dict[str, Callable[[str], str]] = {
    "plain": lambda line: line, "compose": _compose, "kubectl": _kubectl, "journal": _journal, "quoted": _quoted, "pod": _pod,
    "quoted+compose+kubectl": _all_of_them,
}


@pytest.mark.parametrize("wrapper", sorted(WRAPPERS))
@pytest.mark.parametrize("name", FAILED)
def test_no_failed_fixture_reports_starting(name: str, wrapper: str) -> None:
    """Fed line by line: once the report says failed it says so to the end, and the end is the
    fixture's failure (kind, message, ranks), whatever wrapper the lines came through."""
    expect = _expect(name)
    parser = StartupParser()
    failed_at = None
    lines = _lines(name)
    # A report per line costs: from the last 60 lines on (every fixture's fatal lines are in them).
    watch_from = len(lines) - 60 if wrapper in ("plain", "quoted+compose+kubectl") else len(lines) - 1
    for number, line in enumerate(lines):
        parser.feed(WRAPPERS[wrapper](line))
        if number < watch_from:
            continue
        report = parser.report()
        if report.outcome == "failed" and failed_at is None:
            failed_at = number
        assert failed_at is None or report.outcome == "failed", (name, wrapper, number, line)
    report = parser.report()
    assert report.outcome == "failed" and report.failure is not None, (name, wrapper)
    assert (report.failure.kind, report.failure.message) == (expect["failure_kind"], expect["failure_reason"])
    if "failing_ranks" in expect:
        assert list(report.failure.ranks) == expect["failing_ranks"]
    if "phase" in expect:
        assert report.phase == expect["phase"]


_FACTS = ("outcome", "phase", "failure", "scheduler", "kv_cache", "cuda_graph", "piecewise_cuda_graph",
          "moe_config_warnings", "ranks", "failed_ranks", "parallelism", "quantization", "speculative",
          "sglang_version", "sglang_version_range", "listening", "warmup_request", "server_args", "phases",
          "notices")


@pytest.mark.parametrize("wrapper", ["compose", "journal", "pod", "quoted+compose+kubectl"])
@pytest.mark.parametrize("name", PLAIN)
def test_a_wrapper_changes_no_fact(name: str, wrapper: str) -> None:
    plain = parse_lines(_lines(name)).to_dict()
    wrapped = parse_lines([WRAPPERS[wrapper](line) for line in _lines(name)]).to_dict()
    for key in _FACTS:
        assert wrapped[key] == plain[key], (name, wrapper, key)


@pytest.mark.parametrize("name", PLAIN)
def test_a_plain_log_is_not_unwrapped(name: str) -> None:
    """No line of a plain fixture looks like a wrapped one to the parser."""
    assert parse_lines(_lines(name)).unwrapped_lines == 0, name


def test_a_line_that_merely_holds_a_bar_is_not_cut() -> None:
    lines = ["[2026-03-07 06:00:00] server_args=ServerArgs(model_path='m', tp_size=1",
             "summary  | not a container prefix: a bare notice",
             "[2026-03-07 06:00:01] Init torch distributed begin."]
    report = parse_lines(lines)
    assert "summary  | not a container prefix: a bare notice" in report.notices
