"""`deployctl report` / `show --format markdown` on a real ledger file built from a recorded promote."""

from __future__ import annotations

import json
from itertools import count

import pytest
from svgcheck import points
from testpaths import DATA

from deployctl.adapters.ledger import Ledger
from deployctl.bench.result import BenchResult
from deployctl.cli import main
from deployctl.errors import ExitCode


@pytest.fixture
def state(tmp_path):
    """Release 1 (adopted), 2 (the forced-fusion promote, rejected) and 3 (a kept promote that reused
    release 2's baseline measurement, so it saved no baseline of its own)."""
    data = json.loads((DATA / "report" / "glm5-forced-fusion.json").read_text())
    known_good, release = data["releases"]
    clock = count(release["started_at"], 0.5)
    with Ledger.open(tmp_path, clock=lambda: next(clock)) as ledger:
        first = ledger.begin_release(deployment="glm5-sim", kind="adopted", unit_name=known_good["unit_name"],
                                     unit_text=known_good["unit_text"], unit_hash=known_good["unit_hash"], who="t",
                                     finished=True, live=True, result="adopted")
        for kept in (False, True):
            rid = ledger.begin_release(deployment="glm5-sim", kind="promote", unit_name=release["unit_name"],
                                       unit_text=release["unit_text"], unit_hash=release["unit_hash"] + str(kept),
                                       who="t", profile="neutral" if kept else release["profile"], previous_id=first)
            for e in data["events"]:
                ledger.record(rid, e["phase"], e["kind"], e["name"], e["detail"])
            for b in data["benches"]:
                if not (kept and b["role"] == "baseline"):
                    ledger.save_bench(rid, b["role"], BenchResult.from_dict(b["result"]), unit_hash=b["unit_hash"], bench_key=b["bench_key"])
            ledger.finish(rid, result="kept" if kept else "rejected", verdict="PASS" if kept else "FAIL",
                          reasons=["PASS: fine"] if kept else release["reasons"])
    return tmp_path


def test_report_writes_the_page(state, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "2", "--state-dir", str(state), "-i", str(tmp_path / "none.yaml"), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text()
    assert "REJECTED: FAIL: C=2, C=8 regressed beyond the limit" in html
    # recorded before verdicts were stored: recomputed, under the default policy since there is no inventory
    assert "recomputed under the default judge policy (the inventory" in html


def test_a_reused_baseline_is_found_and_said(state, tmp_path):
    out = tmp_path / "r3.html"
    assert main(["report", "3", "--state-dir", str(state), "-o", str(out)]) == 0
    html = out.read_text()
    assert "the baseline was measured for release 2 and reused" in html
    assert len(points(html, "trials-baseline")) == 6


def test_history_marks_the_rejected_candidate(state, tmp_path):
    out = tmp_path / "h.html"
    assert main(["report", "--history", "glm5-sim", "--state-dir", str(state), "-o", str(out)]) == 0
    html = out.read_text()
    assert len(points(html, "rejected-C8")) == 1 and len(points(html, "live-C8")) == 2


def test_history_as_markdown(state, capsys):
    assert main(["report", "--history", "glm5-sim", "--state-dir", str(state), "--format", "markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("| release | kind | profile | result | C=2 live | C=8 live |")
    assert [ln.split("|")[4].strip() for ln in lines[4:]] == ["rejected", "kept"]


def test_markdown_on_report_and_show_is_the_same_table(state, capsys):
    assert main(["report", "2", "--state-dir", str(state), "--format", "markdown"]) == 0
    report = capsys.readouterr().out
    assert main(["show", "2", "--state-dir", str(state), "--format", "markdown"]) == 0
    assert capsys.readouterr().out == report and "| 8 |" in report
    assert report.splitlines()[5].endswith("| FAIL |") and "_recomputed under " in report


def test_bad_release_and_bad_path_are_input_errors(state, tmp_path, capsys):
    assert main(["report", "99", "--state-dir", str(state)]) == ExitCode.BAD_INPUT
    assert "no release 99" in capsys.readouterr().err
    code = main(["report", "2", "--state-dir", str(state), "-o", str(tmp_path / "no" / "dir" / "r.html")])
    assert code == ExitCode.BAD_INPUT and "cannot write" in capsys.readouterr().err
    assert main(["report", "--history", "nope", "--state-dir", str(state)]) == ExitCode.BAD_INPUT


def test_show_prints_every_levels_verdict_and_where_it_comes_from(state, capsys):
    assert main(["show", "2", "--state-dir", str(state), "-i", str(state / "none.yaml")]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln[:1].isdigit() and " | " in ln]
    assert len(rows) == 2 and all(r.split("|")[-1].strip() == "FAIL" for r in rows), out  # was "—"
    # recorded before verdicts were stored: recomputed, and it says so
    assert "(recomputed under the default judge policy" in out
