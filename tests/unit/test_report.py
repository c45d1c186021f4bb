"""Operator output: the plan, the startup diff, the table, the verdict, what was done, the release id."""

from __future__ import annotations

import io
from dataclasses import replace

from support.promote import bench, memory_ledger, plan

from deployctl.console.output import TerminalProgress, emit
from deployctl.judge.outcome import LevelState, JudgeOutcome
from deployctl.judge.starts import StartsVerdict
from deployctl.judge.stats import DEFAULT_RESTART
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import Evidence, JudgeResult, LevelRow, PromoteOutcome
from deployctl.decisions.state import PHASE_WIDTH
from deployctl.decisions.report import (
    history_lines,
    level_rows,
    outcome_json,
    outcome_lines,
    plan_lines,
    release_lines,
    table_lines,
)


def _outcome(result=m.Result.REJECTED, **ev):
    state = m.State(phase=m.Phase.DONE, result=result, reasons=("C=64: −87.0 % (95 % CI −88 … −86 %), limit −5 %",),
                    done=("installed candidate as a trial", "rolled back"))
    evidence = Evidence(**ev)
    evidence.timings.update(startup_wait=3.0, traffic=5.0)
    return PromoteOutcome(7, state, plan(profile_diff=("+ --enable-flashinfer-allreduce-fusion",)), evidence, 9.0)


def test_table_has_the_operators_columns():
    rows = level_rows(bench({1: 120.0, 64: 1500.0}), bench({1: 121.2, 64: 195.0}))
    lines = table_lines(rows)
    assert [c.strip() for c in lines[0].split("|")] == ["C", "baseline tok/s", "candidate tok/s", "change", "verdict"]
    assert "+1.0 %" in lines[2] and "-87.0 %" in lines[3]


def test_judge_rows_win_over_plain_means():
    judged = (LevelRow(64, 1500.0, 195.0, -87.0, LevelState.FAIL, "beyond −5 %"),)
    assert level_rows(bench({64: 1.0}), bench({64: 2.0}), judged) == list(judged)


def test_outcome_lines_tell_the_whole_story():
    out = _outcome(baseline=bench({1: 120.0, 64: 1500.0}), candidate=bench({1: 120.0, 64: 195.0}),
                   startup_diff=("max_running_requests 48 → 26 (attributed to --enable-fused-moe-sum-all-reduce)",),
                   judge=JudgeResult(JudgeOutcome.FAIL, ()))
    text = "\n".join(outcome_lines(out))
    for expected in ("+ --enable-flashinfer-allreduce-fusion", "48 → 26", "verdict: FAIL", "−87.0 %",
                     "rolled back", "release 7", "exit 10", "controller overhead 1.00 s"):
        assert expected in text, expected


def test_a_startup_gate_failure_is_printed_once() -> None:
    failure = "effective max_running_requests fell from 48 to 26 (−45.8 %, more than the 10 % allowed)"
    out = _outcome(gate_failures=(failure,))
    out = replace(out, state=replace(out.state, reasons=(f"startup gate: {failure}", "no drift: as before")))
    text = "\n".join(outcome_lines(out))
    assert text.count(failure) == 1 and f"startup gate FAIL: {failure}" in text and "  - no drift: as before" in text


def test_outcome_json_is_serialisable_and_complete():
    import json

    data = json.loads(json.dumps(outcome_json(_outcome(baseline=bench({1: 1.0}), candidate=bench({1: 1.0})))))
    assert data["result"] == "rejected" and data["exit_code"] == 10 and data["release"] == 7
    assert data["levels"][0]["concurrency"] == 1 and data["timings_s"]["controller_overhead"] == 1.0


def test_benchmark_time_and_what_reuse_saved_in_text_and_json():
    import json

    from deployctl.judge.reuse import ReuseAccount

    reuse = ReuseAccount(reused_from=3, age_s=1500.0, confirmation_trials=2, baseline_trials=10, trial_s=170.0)
    out = _outcome(baseline=bench({1: 1.0}), candidate=bench({1: 1.0}), baseline_reused_from=3, reuse=reuse)
    out.evidence.timings.update({"bench:confirmation": 340.0, "bench:candidate": 850.0, "bench:verify": 170.0})
    text = "\n".join(outcome_lines(out))
    assert ("baseline: reused the measurement of release 3 (25 min old), checked by 2 confirmation trial(s) "
            "instead of 10 baseline trials: 1360 s of benchmark saved") in text
    assert "benchmark time 1360 s (confirmation 340 s, candidate 850 s, verification 170 s)" in text
    data = json.loads(json.dumps(outcome_json(out)))["benchmark"]
    assert data["total_s"] == 1360.0 and data["reuse"]["saved_s"] == 1360.0 and data["reuse"]["age_s"] == 1500.0
    fresh = _outcome(baseline=bench({1: 1.0}), fresh_because=("the GPU driver changed: 570.86 → 575.51",))
    fresh.evidence.timings["bench:baseline"] = 850.0
    text = "\n".join(outcome_lines(fresh))
    assert "baseline: measured fresh, because the GPU driver changed: 570.86 → 575.51" in text
    assert outcome_json(fresh)["benchmark"]["reuse"] is None


def test_the_trials_run_are_counted_against_the_fixed_design():
    # Two levels, max_trials 5: the fixed design runs 5 + 5 at each, 20 trials.
    fresh = _outcome(baseline=bench({1: 1.0, 64: 1.0}, trials=2), candidate=bench({1: 1.0, 64: 1.0}, trials=3))
    assert "trials 10 (baseline 4, candidate 6) of the 20 a fixed 5 + 5 design runs at these 2 levels: 50 %" \
        in "\n".join(outcome_lines(fresh))
    assert outcome_json(fresh)["benchmark"]["trials"] == {"baseline": 4, "confirmation": 0, "candidate": 6,
                                                          "second_start": 0, "verification": 0, "fixed_design": 20}
    # A reused baseline: its stored trials were not run today, its confirmation trials were.
    reused = _outcome(baseline=bench({1: 1.0, 64: 1.0}, trials=4), candidate=bench({1: 1.0, 64: 1.0}, trials=2),
                      baseline_reused_from=3, confirmation_trials=2)
    assert outcome_json(reused)["benchmark"]["trials"] == {"baseline": 0, "confirmation": 2, "candidate": 4,
                                                           "second_start": 0, "verification": 0, "fixed_design": 20}
    # Rejected before any candidate trial (a startup gate): nothing to compare with the fixed design.
    gated = _outcome(baseline=bench({1: 1.0}, trials=2))
    assert "fixed" not in "\n".join(outcome_lines(gated)) and outcome_json(gated)["benchmark"]["trials"] is None


def test_a_verdict_over_server_starts_counts_the_second_starts_trials():
    # C1 3 a level and B1 2 at two levels; C2 and the verification over starts 2 at one critical level each.
    over = StartsVerdict(JudgeOutcome.INCONCLUSIVE, ("INCONCLUSIVE over server starts",), DEFAULT_RESTART)
    decided = _outcome(baseline=bench({1: 1.0, 64: 1.0}, trials=2), candidate=bench({1: 1.0, 64: 1.0}, trials=3),
                       candidate_again=[bench({64: 1.0}, trials=2)], verify=bench({64: 1.0}, trials=2), starts=over)
    assert "trials 14 (baseline 4, candidate 6, candidate's later starts 2, verification over starts 2) of the 20" \
        in "\n".join(outcome_lines(decided))
    assert outcome_json(decided)["benchmark"]["trials"] == {"baseline": 4, "confirmation": 0, "candidate": 6,
                                                            "second_start": 2, "verification": 2, "fixed_design": 20}
    # A plain rollback's verification is not part of deciding: the fixed design verifies its rollbacks too.
    plain = _outcome(baseline=bench({1: 1.0, 64: 1.0}, trials=2), candidate=bench({1: 1.0, 64: 1.0}, trials=3),
                     verify=bench({64: 1.0}, trials=1))
    assert outcome_json(plain)["benchmark"]["trials"]["verification"] == 0


def test_the_progress_phase_column_fits_every_phase_name():
    out = io.StringIO()
    progress = TerminalProgress(out)
    for phase in m.Phase:
        progress.step(phase, "the step")
    progress.detail("a trial")
    lines = out.getvalue().splitlines()
    assert PHASE_WIDTH == max(len(p.value) for p in m.Phase) >= len("ROLLBACK_FAILED")
    # every step's text starts in one column, and a detail line is indented to it
    assert {line.index("the step") for line in lines[:-1]} == {lines[-1].index("a trial")}
    assert "SECOND_START" in lines[[p for p in m.Phase].index(m.Phase.SECOND_START)]


def test_rollback_failed_says_what_to_do():
    text = "\n".join(outcome_lines(_outcome(result=m.Result.ROLLBACK_FAILED)))
    assert "manual action needed" in text and "journalctl -u sglang-qwen.service" in text


def test_plan_lines_show_diff_restart_and_policy():
    text = "\n".join(plan_lines(plan(profile_diff=("~ mem-fraction-static 0.9 → 0.92",))))
    assert "~ mem-fraction-static 0.9 → 0.92" in text and "would restart: sglang-qwen.service" in text
    assert "C=1,64" in text and "max_running_requests may drop ≤ 10 %" in text
    assert "restart offset: a FAIL that a 2 % offset a server start could explain, a PASS it could hide twice the " \
           "limit behind, or a final INCONCLUSIVE, is decided over server starts" in text


def test_history_and_show():
    with memory_ledger() as led:
        rid = led.begin_release(deployment="qwen", kind="promote", unit_name="u.service", unit_text="[Service]\n",
                                unit_hash="abc" * 10, who="alice (sudo)", profile="candidate")
        led.save_bench(rid, "baseline", bench({1: 100.0}), unit_hash="x", bench_key="k")
        led.save_bench(rid, "candidate", bench({1: 90.0}), unit_hash="y", bench_key="k")
        led.finish(rid, result="rejected", verdict="FAIL", reasons=["C=1: −10 %"])
        hist = history_lines(led.history("qwen"))
        assert hist[0].split()[:2] == ["id", "when"] and "rejected" in hist[1] and "alice (sudo)" in hist[1]
        led.record(rid, "INSTALL", "intent", "InstallTrial")
        led.record(rid, "INSTALL", "outcome", "Failed", {"reasons": ["read-only file system"]})
        shown = "\n".join(release_lines(led.get(rid), led.benches(rid), led.events(rid)))
        assert "INSTALL".ljust(PHASE_WIDTH) + " intent  InstallTrial" in shown and "outcome Failed: read-only file system" in shown
        assert "C=1: −10 %" in shown and "-10.0 %" in shown and "[Service]" in shown
    assert history_lines([]) == ["no releases recorded yet"]


def test_emit_plain_when_not_a_terminal():
    buf = io.StringIO()
    emit(["a", "b"], stream=buf)
    assert buf.getvalue() == "a\nb\n"


def test_live_release_line():
    from deployctl.adapters.ledger import live_release
    from deployctl.decisions.report import live_release_line

    with memory_ledger() as led:
        assert "none recorded" in live_release_line(live_release(led, "qwen"))
        rid = led.begin_release(deployment="qwen", kind="promote", unit_name="u", unit_text="x", unit_hash="h",
                                who="alice (sudo)", profile="neutral")
        led.finish(rid, result="kept", verdict="PASS", reasons=[])
        led.mark_live(rid)
        line = live_release_line(live_release(led, "qwen"), installed_hash="h")
        assert line.startswith(f"live release {rid}: neutral (promote ") and "alice (sudo)" in line
        assert "edited by hand" in live_release_line(live_release(led, "qwen"), installed_hash="other")


def test_aborted_headline_says_whether_it_rolled_back():
    rolled = _outcome(result=m.Result.ABORTED)
    assert any(line.startswith("ABORTED: rolled back") for line in outcome_lines(rolled))
    state = m.State(phase=m.Phase.DONE, result=m.Result.ABORTED, reasons=("x", "nothing on the host was changed"))
    untouched = PromoteOutcome(1, state, plan(), Evidence(), 1.0)
    assert any(line.startswith("ABORTED: nothing was changed") for line in outcome_lines(untouched))


def test_telemetry_per_level_baseline_beside_candidate_with_the_levels_notes():
    from dataclasses import replace

    from deployctl.bench.result import LevelResult, LevelTelemetry
    from deployctl.decisions.report import telemetry_lines

    def with_telemetry(result, watts, notes=()):
        levels = tuple(LevelResult(lv.concurrency, tuple(
            replace(t, telemetry=LevelTelemetry("simulated", gpu_power_w=w, gpu_power_limit_w=600.0, gpu_util_pct=61.0),
                    notes=notes)
            for t, w in zip(lv.trials, watts))) for lv in result.levels)
        return replace(result, levels=levels)

    base = with_telemetry(bench({64: 1500.0}, trials=2), [240.0, 260.0])
    cand = with_telemetry(bench({64: 195.0}, trials=2), [125.0, 125.0], notes=("above the server's capacity",))
    assert telemetry_lines(base, cand) == [
        "telemetry per level (mean over its trials):",
        "  C=64: baseline GPU power 250 W of 600 W (42 %), SM 61 % (simulated);"
        " candidate GPU power 125 W of 600 W (21 %), SM 61 % (simulated)",
        "  C=64: note: above the server's capacity",
    ]
    assert telemetry_lines(bench({64: 1.0}), bench({64: 1.0})) == []
    lines = outcome_lines(_outcome(baseline=base, candidate=cand))
    assert any(line.startswith("  C=64: baseline GPU power 250 W") for line in lines)
