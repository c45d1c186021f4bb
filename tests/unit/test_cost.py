"""The price of a promote in GPU time (decisions.cost) and what the ledger says each promote spent."""

from __future__ import annotations

import io

import pytest
from support.promote import memory_ledger, plan
from support.runner_fakes import adapters

from deployctl.console.output import TerminalProgress
from deployctl.decisions import machine as m
from deployctl.decisions.cost import (
    DEFAULT_RESTARTS, DEFAULT_START_S, DEFAULT_TRIAL_S, STARTS, STARTS_ONE_LEVEL, PastPromote, estimate, eta,
    server_gpus, spent,
)
from deployctl.decisions.evidence import bench_key
from deployctl.inventory.policy import BenchPolicy, JudgePolicy, LevelRule, Policy
from deployctl.judge import starts
from deployctl.live.runner import Runner

FIVE = Policy(bench=BenchPolicy(concurrency=[1, 4, 16, 32, 64]), judge=JudgePolicy(min_trials=2, max_trials=5))


def test_the_starts_a_side_are_the_judges():
    assert (STARTS, STARTS_ONE_LEVEL) == (starts.STARTS, starts.STARTS_ONE_LEVEL)


def test_with_no_history_the_estimate_rests_on_defaults_and_says_so():
    cost = estimate(FIVE, (), gpus=8)
    assert cost.basis.startswith("no history on this host: defaults")
    assert cost.expected_trials == 2 * 5 * 2 and cost.expected_starts == DEFAULT_RESTARTS
    assert cost.expected_s == 20 * DEFAULT_TRIAL_S + DEFAULT_RESTARTS * DEFAULT_START_S
    assert cost.expected_gpu_h == pytest.approx(cost.expected_s * 8 / 3600)


def test_the_worst_case_is_the_fixed_design_then_every_critical_level_on_every_start_over_starts():
    cost = estimate(FIVE, (), gpus=1)
    # 5 levels × 5 trials a side, then C2 and B2 at every critical level × 5; starts C1, C2 and the rollback.
    assert (cost.worst_trials, cost.worst_starts) == (50 + 2 * 25, 3)
    one = Policy(bench=BenchPolicy(concurrency=[1, 64]), judge=JudgePolicy(
        max_trials=4, levels={1: LevelRule(role="advisory")}))
    cost = estimate(one, (), gpus=1)
    # One critical level asks for three starts a side: C2, C3, B2, B3 measure it; C1, C2, C3, the rollback, B3.
    assert (cost.worst_trials, cost.worst_starts) == (2 * 2 * 4 + 4 * 4, 5)


def test_history_prices_trials_and_starts_at_what_this_host_spent():
    history = [PastPromote(trials=20, trial_s=400.0, starts=2, start_s=600.0, baseline_trials=10, baseline_s=100.0),
               PastPromote(trials=30, trial_s=600.0, starts=3, start_s=900.0, baseline_trials=14, baseline_s=140.0)]
    cost = estimate(FIVE, history, gpus=8)
    assert cost.basis == "from 2 promote(s) on this host; a fresh baseline"
    assert (cost.expected_trials, cost.expected_starts, cost.start_s) == (25.0, 2.5, 300.0)
    # A fresh baseline: their mean, 12 trials in 120 s; the candidate's side: their mean, 13 trials in 380 s.
    assert cost.expected_trial_s == 120 + 380 and cost.expected_s == 500 + 2.5 * 300
    # Worst: half of the 100 trials at the baseline's 10 s, half at the candidate's side's 760 s / 26.
    assert cost.worst_s == pytest.approx(50 * (10 + 760 / 26) + 3 * 300)
    assert cost.worst_gpu_h == pytest.approx(cost.worst_s * 8 / 3600)
    assert spent(history[0], gpus=8) == pytest.approx(1000 * 8 / 3600)
    said = " ".join(cost.describe())
    assert "GPU-hours" in said and "from 2 promote(s) on this host" in said
    assert cost.to_dict()["expected"]["wall_s"] == cost.expected_s


def test_a_baseline_expected_reused_is_priced_at_its_confirmation_trials_and_fresh_ones_at_their_own():
    fresh = PastPromote(trials=20, trial_s=400.0, starts=2, start_s=600.0, baseline_trials=12, baseline_s=240.0)
    reused = PastPromote(trials=11, trial_s=220.0, starts=2, start_s=600.0, baseline_trials=5, baseline_s=100.0,
                         reused=True)
    # The candidate's side: (20 − 12 + 11 − 5) / 2 = 7; a fresh baseline: 12 (the one fresh promote's).
    first = estimate(FIVE, [fresh, reused], gpus=1)
    assert (first.expected_trials, first.expected_trial_s) == (12 + 7, 240 + 140)
    again = estimate(FIVE, [fresh, reused], gpus=1, reuse=True)
    # Confirmation trials at the baseline's 20 s a trial.
    assert (again.expected_trials, again.expected_trial_s) == (5 + 7, 5 * 20 + 140)
    assert again.basis.endswith("confirmation trial a critical level")
    assert estimate(FIVE, (), gpus=1, reuse=True).expected_trials == 5 + 10


@pytest.mark.parametrize(("flags", "gpus"), [({"tp": 4}, 4), ({"tp": 4, "dp": 2}, 8), ({"tp-size": "2"}, 2),
                                              ({}, 8), ({"enable-fusion": True}, 8)])
def test_a_server_spans_tp_times_dp_gpus_else_the_whole_host(flags, gpus):
    assert server_gpus(flags, 8) == gpus


async def test_a_promote_leaves_in_the_ledger_what_it_spent_and_the_next_estimate_reads_it():
    p = plan()
    with memory_ledger() as ledger:
        prev = ledger.begin_release(deployment=p.deployment, kind="adopted", unit_name=p.unit_name,
                                    unit_text=p.known_good_text, unit_hash=p.known_good_hash, who="t",
                                    finished=True, live=True)
        rid = ledger.begin_release(deployment=p.deployment, kind="promote", unit_name=p.unit_name,
                                   unit_text=p.candidate_text, unit_hash=p.candidate_hash, who="t",
                                   profile=p.profile, previous_id=prev, host=p.host)
        out = await Runner(ledger, adapters(), p, rid, previous_release_id=prev).run(m.start())
        assert out.state.result is m.Result.KEPT
        used = ledger.spent(rid)
        # The fakes: one start of 2 s; with nothing learned the baseline's 5 trials and the candidate's one at
        # each of two levels, 1 s each — the trials the promote counts itself.
        assert (used.starts, used.start_s) == (1, 2.0)
        assert (used.trials, used.trial_s) == (12, 12.0) and used.trials == out.evidence.trials(5).run
        assert (used.baseline_trials, used.baseline_s, used.reused) == (10, 10.0, False)
        assert ledger.past_promotes(deployment=p.deployment, host=p.host, bench_key=bench_key(p.policy)) == [used]
        assert ledger.past_promotes(deployment=p.deployment, host="elsewhere", bench_key=bench_key(p.policy)) == []


def test_the_eta_is_what_is_left_of_the_expected_time_and_past_it_the_worst_case_bounds_the_wait():
    cost = estimate(FIVE, [PastPromote(trials=20, trial_s=1200.0, starts=2, start_s=600.0, baseline_trials=10,
                                       baseline_s=600.0)], gpus=8)
    assert cost.expected_s == 1800.0 and cost.worst_s == 100 * 60 + 3 * 300
    assert eta(cost, 600.0) == "ETA 20 min (expected 30 min)"
    assert eta(cost, 1900.0) == "past the expected 30 min; worst case 115 min"


def test_each_progress_step_line_ends_with_the_eta_once_the_price_is_known():
    out = io.StringIO()  # not a terminal: cron mail and the journal get one plain line a step
    progress = TerminalProgress(out)
    progress.step(m.Phase.PREFLIGHT, "pre-flight")
    progress.expect(estimate(FIVE, (), gpus=8))
    progress.step(m.Phase.BASELINE, "measuring the baseline")
    first, second = out.getvalue().splitlines()
    assert "ETA" not in first
    assert second.startswith("[") and second.endswith("measuring the baseline · ETA 30 min (expected 30 min)")
