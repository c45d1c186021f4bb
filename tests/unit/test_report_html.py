"""The HTML report and the markdown table, from a recorded promote (the forced-fusion candidate)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from svgcheck import affine_residual, points, svgs
from testpaths import DATA

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.verdict import judge
from deployctl.decisions.records import Event, Release, StoredBench
from deployctl.reporting.changes import release_changes
from deployctl.reporting.history import ReleaseRuns, history_chart, history_page
from deployctl.reporting.markdown import comparison_markdown, sweep_markdown
from deployctl.reporting.page import bench_page, release_page
from deployctl.reporting.story import Run, bench_story, release_story

POLICY = JudgePolicy(min_trials=2, max_trials=5, baseline_trials=3, limit_pct=10)


@pytest.fixture(scope="module")
def records():
    data = json.loads((DATA / "report" / "glm5-forced-fusion.json").read_text())
    known_good, release = (Release(**r) for r in data["releases"])
    events = [Event(**e) for e in data["events"]]
    benches = [StoredBench(**b) for b in data["benches"]]
    return known_good, release, events, benches


@pytest.fixture(scope="module")
def page(records):
    known_good, release, events, benches = records
    story = release_story(release, benches, events, policy=POLICY)
    return release_page(story, release_changes(release, known_good, events), policy_note="intervals under POLICY")


def _result(benches, role) -> BenchResult:
    return BenchResult.from_dict(next(b for b in benches if b.role == role).result)


def test_the_verdict_and_why_come_first(page, records):
    _, release, _, _ = records
    verdict = re.search(r'<p class="verdict bad" id="verdict">(.*?)</p>', page)
    assert verdict and verdict.group(1) == f"REJECTED: {release.reasons[0]}"
    assert page.index('id="verdict"') < page.index('id="what-changed"') < page.index('id="chart-throughput"')


def test_every_chart_is_there_with_its_numbers_under_it(page):
    for key in ("throughput", "latency", "per-request", "telemetry", "timeline"):
        figure = re.search(rf'<figure class="chart" id="chart-{key}".*?</figure>', page, re.DOTALL)
        assert figure, key
        assert "<svg" in figure.group(0) and '<table class="numbers">' in figure.group(0), key
    assert len(svgs(page)) == 5


def test_the_page_fetches_nothing(page):
    assert not re.search(r"<script|<link|<img|<iframe|\bsrc=|@import", page)
    assert not re.search(r'href="(?!#)|url\((?!#)', page)  # only in-page references (SVG clip paths, markers)


def test_every_trial_is_a_point_placed_by_its_own_value(page, records):
    *_, benches = records
    for role in ("baseline", "candidate"):
        result = _result(benches, role)
        values = [t.output_tok_s for lv in result.levels for t in lv.trials if t.valid]
        drawn = points(page, f"trials-{role}")
        assert len(drawn) == len(values)
        slope, worst = affine_residual(values, [y for _, y in drawn])
        assert slope < 0 and worst < 0.5, (role, worst)  # SVG y grows downwards
        assert all(f"{v:.1f}" in page for v in values)


def test_the_judges_interval_per_level_matches_what_it_says(page, records):
    _, _, _, benches = records
    # The judge's words on the stored trials: "C=2: −86.5 % (95 % CI −86.9 … −86.1 %), limit −10 %: …"
    # (judged again: the recorded words are those of the deployctl that ran the promote)
    verdict = judge(_result(benches, "baseline"), _result(benches, "candidate"), POLICY)
    for reason in verdict.reasons:
        said = re.match(r"C=(\d+): ([−+][\d.]+) % \(95 % CI ([−+][\d.]+) … ([−+][\d.]+) %\)", reason)
        if said:
            c, change, low, high = said.groups()
            row = re.search(rf"<tr><td>{c}</td>.*?</tr>", page).group(0)
            assert f"{change.replace('−', '-')} %" in row
            assert f"{low.replace('−', '-')} … {high.replace('−', '-')} %" in row
            assert len(points(page, f"interval-C{c}")) == 1


def test_telemetry_says_simulated_and_draws_power_against_the_limit(page):
    figure = re.search(r'<figure class="chart" id="chart-telemetry".*?</figure>', page, re.DOTALL).group(0)
    assert "baseline: simulated" in figure and "candidate: simulated" in figure
    assert 'id="power_w-candidate"' in figure and "power limit" in figure


def test_telemetry_unavailable_is_said_plainly(records):
    known_good, release, events, benches = records
    bare = [replace(b, result={**b.result, "telemetry_samples": []}) for b in benches]
    html = release_page(release_story(release, bare, events, policy=POLICY), None)
    assert "baseline: GPU telemetry unavailable (no GPU samples were recorded)" in html


def test_timeline_has_the_promotes_phases_in_order(page):
    figure = re.search(r'<figure class="chart" id="chart-timeline".*?</figure>', page, re.DOTALL).group(0)
    phases = re.findall(r"<tr><td>([a-z]+)</td><td>[\d.]+</td>", figure)
    assert phases[:3] == ["plan", "preflight", "baseline"] and "bench" in phases and phases[-1] == "verify"


def test_what_changed_shows_the_flag_and_the_startup_attribution(page):
    # The adopted known-good unit has no recorded flags: the unit texts are compared instead.
    assert re.search(r'<pre id="profile-diff">[^<]*\n\+ +--enable-flashinfer-allreduce-fusion', page)
    assert re.search(r'<pre id="startup-diff">[^<]*max_total_num_tokens', page)
    assert '<pre id="gates">passed</pre>' in page


def test_profile_diff_from_recorded_flags(records):
    known_good, release, events, _ = records
    before = replace(known_good, flags={"tp": 8, "mem-fraction-static": 0.9}, profile="baseline")
    after = replace(release, flags={"tp": 8, "mem-fraction-static": 0.92, "enable-flashinfer-allreduce-fusion": True})
    lines = release_changes(after, before, events).profile_diff
    assert "  + --enable-flashinfer-allreduce-fusion" in lines
    assert "  ~ --mem-fraction-static 0.9  ->  0.92" in lines


def test_text_is_escaped(records):
    known_good, release, events, benches = records
    odd = replace(release, reasons=["<script>alert(1)</script> & more"])
    html = release_page(release_story(odd, benches, events, policy=POLICY), None)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_markdown_puts_baseline_and_candidate_side_by_side(records):
    _, release, events, benches = records
    text = comparison_markdown(release_story(release, benches, events, policy=POLICY))
    lines = text.splitlines()
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert header[:6] == ["C", "Agg tok/s (baseline)", "Per-req tok/s (baseline)", "Tokens (baseline)",
                          "Wall(s) (baseline)", "Ok (baseline)"]
    assert header[-2:] == ["Change", "Verdict"] and lines[3] == "|" + "---:|" * 12 + ":---|"
    rows = {r.split("|")[1].strip(): [c.strip() for c in r.strip("|").split("|")] for r in lines[4:6]}
    assert lines[7].startswith("_recomputed under ")  # the records are from before verdicts were stored
    assert rows.keys() == {"2", "8"} and all(r[-1] == "FAIL" and r[-2].startswith("-8") for r in rows.values())


def test_one_sweep_page_and_markdown(records):
    *_, benches = records
    result = _result(benches, "candidate")
    html = bench_page(bench_story(result), "bench")
    assert len(points(html, "trials-this-run")) == sum(len(lv.trials) for lv in result.levels)
    md = sweep_markdown(result).splitlines()
    assert md[0].startswith("| C | Trial | Agg tok/s | Per-req tok/s | Tokens | Wall(s) | Ok")
    assert len(md) == 2 + sum(len(lv.trials) for lv in result.levels)


def test_history_marks_rejected_candidates(records):
    known_good, release, _, benches = records
    runs = {b.role: BenchResult.from_dict(b.result) for b in benches}
    html = history_page("glm5-sim", [ReleaseRuns(release, runs), ReleaseRuns(known_good, {})])
    assert len(points(html, "rejected-C8")) == 1 and len(points(html, "live-C8")) == 1


def test_a_candidate_stopped_before_the_benchmark_still_gets_its_story(records):
    known_good, release, events, benches = records
    gated = replace(release, result="rejected", reasons=["startup gate: effective max_running_requests fell from 48 to 26"])
    failed = [*events[:11], Event(events[11].at, "STARTUP", "outcome", "Failed",
                                  {"reasons": ["startup gate: effective max_running_requests fell from 48 to 26"]})]
    baseline_only = [b for b in benches if b.role == "baseline"]
    html = release_page(release_story(gated, baseline_only, failed, policy=POLICY), release_changes(gated, known_good, failed))
    assert "REJECTED: startup gate: effective max_running_requests fell from 48 to 26" in html
    assert re.search(r'<pre id="gates">startup gate: effective max_running_requests fell', html)
    assert points(html, "trials-baseline") and 'id="trials-candidate"' not in html and "interval-C" not in html


def test_history_marks_only_rejected_releases_rejected_what_is_live_now_and_why_trials_were_set_aside(records):
    known_good, release, _, benches = records
    runs = {b.role: BenchResult.from_dict(b.result) for b in benches}
    cand = runs["candidate"]
    first = cand.levels[0]
    bad = replace(first.trials[0], invalid_reason="3 of 4 requests failed (error rate 75 % > 10 %)")
    runs_with_bad = {**runs, "candidate": replace(cand, levels=(replace(first, trials=(bad, *first.trials[1:])),
                                                               *cand.levels[1:]))}
    passed = replace(release, id=release.id + 1, kind="bisect", result="passed")
    live = replace(known_good, live=True)
    items = [ReleaseRuns(release, runs_with_bad), ReleaseRuns(passed, runs), ReleaseRuns(live, {"baseline": runs["baseline"]})]
    html = history_page("glm5-sim", items)
    assert len(points(html, "rejected-C8")) == 1  # the rejected promote; not the bisect trial that passed
    assert len(points(html, "tried-C8")) == 1 and 'id="live-now"' in html
    table = history_chart(items).table
    by_id = {row[0]: row for row in table.rows}
    assert table.header[-2:] == ("live now", "trials set aside")
    assert by_id[str(live.id)][-2] == "live now" and by_id[str(release.id)][-2] == "—"
    assert f"candidate C={first.concurrency} trial {bad.trial}: 3 of 4 requests failed" in by_id[str(release.id)][-1]
    page = release_page(release_story(release, [], [], policy=POLICY), None)  # no sweep: nothing set aside
    assert "set aside" not in page
    story = release_story(release, [], [], policy=POLICY)
    story = replace(story, runs=(*story.runs, Run("candidate", runs_with_bad["candidate"])))
    assert f"set aside (not judged, not drawn): candidate C={first.concurrency} trial {bad.trial}: 3 of 4" in \
        release_page(story, None)
