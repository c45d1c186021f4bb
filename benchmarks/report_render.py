"""How big a promote's HTML report is and how long it takes to render, and why matplotlib → inline SVG.

The promote is the recorded forced-fusion one (tests/data/report), blown up to a normal production
sweep: the policy's default levels C=1,4,16,32,64, five trials a side, max(4, 2×C) request samples per
trial with every inter-token gap of 1000 output tokens, and 8 GPUs sampled every 0.5 s for the whole
benchmark. Rendering (records → HTML string) is timed after one warm-up run, median of --runs runs;
the import of matplotlib is timed apart, once (a fresh process pays it once per report).

For the choice of format, the same charts are also rendered as SVG with text as glyph outlines
(matplotlib's default) and as base64 PNG at 96 dpi, and their sizes and times printed beside.

    .venv/bin/python benchmarks/report_render.py            # 5 runs
    .venv/bin/python benchmarks/report_render.py --runs 3
"""

from __future__ import annotations

import argparse
import base64
import copy
import io
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

t0 = time.perf_counter()
import matplotlib  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

IMPORT_S = time.perf_counter() - t0

from deployctl.decisions.records import Event, Release, StoredBench  # noqa: E402
from deployctl.reporting import charts, figures  # noqa: E402
from deployctl.reporting.changes import release_changes  # noqa: E402
from deployctl.reporting.page import release_page  # noqa: E402
from deployctl.reporting.story import release_story  # noqa: E402

LEVELS = (1, 4, 16, 32, 64)
TRIALS = 5
OUTPUT_TOKENS = 1000


def _scaled_bench(bench: dict, benchmark_s: float) -> dict:
    """The recorded sweep grown to LEVELS × TRIALS with full request samples and telemetry."""
    result = copy.deepcopy(bench)
    trial0 = result["levels"][0]["trials"][0]
    sample = dict(trial0["samples"][0], output_tokens=OUTPUT_TOKENS,
                  itl_s=[0.01 + 0.001 * (k % 7) for k in range(OUTPUT_TOKENS - 1)])
    levels = []
    for c in LEVELS:
        trials = []
        for k in range(TRIALS):
            scale = c ** 0.8 * (1 + 0.01 * k)
            trials.append(dict(trial0, concurrency=c, trial=k, output_tok_s=trial0["output_tok_s"] * scale,
                               samples=[dict(sample, e2e_s=sample["e2e_s"] * (1 + 0.002 * j)) for j in range(max(4, 2 * c))]))
        levels.append({"concurrency": c, "trials": trials})
    result["levels"] = levels
    gpu = result["telemetry_samples"][0]["gpus"][0]
    start = result["telemetry_samples"][0]["t"]
    result["telemetry_samples"] = [
        {"t": start + 0.5 * k, "process": result["telemetry_samples"][0]["process"],
         "gpus": [dict(gpu, index=g, power_w=100 + (k % 50), sm_util_pct=float(k % 100)) for g in range(8)]}
        for k in range(int(benchmark_s / 0.5))
    ]
    return result


def load(benchmark_s: float):
    data = json.loads((REPO / "tests" / "data" / "report" / "glm5-forced-fusion.json").read_text())
    known_good, release = (Release(**r) for r in data["releases"])
    events = [Event(**e) for e in data["events"]]
    benches = [replace(StoredBench(**b), result=_scaled_bench(b["result"], benchmark_s)) for b in data["benches"]]
    return known_good, release, events, benches


def render_report(records) -> str:
    known_good, release, events, benches = records
    return release_page(release_story(release, benches, events), release_changes(release, known_good, events))


def _median_s(fn, runs: int, clock=time.perf_counter) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = clock()
        fn()
        times.append(clock() - t)
    return statistics.median(times)


def _alternatives(records, runs: int) -> None:
    """The same charts in the two other forms considered: SVG with glyph outlines, and PNG."""
    known_good, release, events, benches = records
    story = release_story(release, benches, events)
    makers = (figures.throughput, figures.latency, figures.per_request, figures.telemetry, figures.timeline)
    original = charts.render

    def svg_paths(w, h, draw, **kw):
        saved = dict(charts._STYLE)
        charts._STYLE["svg.fonttype"] = "path"
        try:
            return original(w, h, draw, **kw)
        finally:
            charts._STYLE.update(saved)

    def png(w, h, draw, **kw):
        with matplotlib.rc_context(charts._STYLE):
            fig = Figure(figsize=(w, h))
            draw(fig)
            buf = io.BytesIO()
            FigureCanvasAgg(fig).print_png(buf)
        return "<img src='data:image/png;base64," + base64.b64encode(buf.getvalue()).decode() + "'>"

    for name, render in (("SVG, text as text (chosen)", original), ("SVG, text as outlines", svg_paths),
                         ("PNG 96 dpi, base64", png)):
        figures.render = render
        try:
            size = sum(len(m(story).svg) for m in makers)
            seconds = _median_s(lambda: [m(story) for m in makers], runs, time.process_time)
        finally:
            figures.render = original
        print(f"  {name:<28} charts {size / 1024:7.0f} KiB   {seconds * 1000:6.0f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--benchmark-s", type=float, default=300.0, help="benchmark length the telemetry covers")
    args = parser.parse_args()
    records = load(args.benchmark_s)
    print(f"a promote of {len(LEVELS)} levels × {TRIALS} trials (baseline, candidate, verify), "
          f"{int(args.benchmark_s / 0.5)} telemetry samples × 8 GPUs per sweep")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (the times scale with it)")
    print(f"import matplotlib: {IMPORT_S * 1000:.0f} ms (once per process)")
    html = render_report(records)
    wall = _median_s(lambda: render_report(records), args.runs)
    cpu = _median_s(lambda: render_report(records), args.runs, time.process_time)
    print(f"report: {len(html.encode()) / 1024:.0f} KiB, rendered in {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU"
          f" (medians of {args.runs}; CPU time is what a shared machine's load does not inflate)")
    print("the charts alone, by format (median of runs):")
    _alternatives(records, args.runs)


if __name__ == "__main__":
    main()
