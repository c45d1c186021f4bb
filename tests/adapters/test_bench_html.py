"""`deployctl bench --html FILE --format markdown` against a fake SGLang over real HTTP."""

from __future__ import annotations

import json

from svgcheck import points
from support.sglang import FakeSglang

from deployctl.bench.result import BenchResult


def test_bench_writes_the_sweeps_charts_and_prints_markdown(threaded_server, tmp_path, capsys) -> None:
    from deployctl.cli import main

    url = threaded_server(FakeSglang())
    page, raw = tmp_path / "sweep.html", tmp_path / "r.json"
    code = main(["bench", "--url", url, "-c", "1,2", "--input-tokens", "8", "--output-tokens", "10", "--warmup", "0",
                 "--trials", "2", "-o", str(raw), "--html", str(page), "--format", "markdown"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| C | Trial | Agg tok/s | Per-req tok/s | Tokens | Wall(s) | Ok | Note |" in out
    assert "\n|" + "---:|" * 7 + ":---|\n" in out  # GitHub-flavoured delimiter row: numbers right, the note left
    result = BenchResult.from_dict(json.loads(raw.read_text()))
    html = page.read_text()
    assert len(points(html, "trials-this-run")) == 4
    for t in (t for lv in result.levels for t in lv.trials):
        assert f"{t.output_tok_s:.1f}" in html and f"| {t.output_tok_s:.1f} |" in out
    assert 'id="chart-telemetry"' in html and ("unavailable" in html or "measured" in html)
