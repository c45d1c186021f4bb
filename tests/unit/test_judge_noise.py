"""Learning a host's noise from repeated measurements of an unchanged release."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.noise import (
    DEFAULT_RESTART_WEIGHT, RestartPair, aa_samples, baseline_plan, baseline_top_up, describe_baseline, learn,
    ROLLBACK_VERIFICATION, WATCH_AFTER_RESTART, learn_from, learn_restart, plan_z, planned_trials, restart_pair,
)
from deployctl.judge.stats import (
    DEFAULT_RESTART, DEFAULT_RESTART_SIGMA, MAX_PRIOR_DF, NoiseEstimate, RestartNoise, pool,
)
from deployctl.judge.sweep import sweep_shock
from deployctl.judge.verdict import judge

sys.path.insert(0, str(Path(__file__).parent))
from test_judge import sweep, trial  # noqa: E402


def log_sd(values: list[float]) -> float:
    logs = [math.log(v) for v in values]
    m = sum(logs) / len(logs)
    return math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))


def test_samples_pool_their_spread_not_the_distance_between_their_means():
    # Two days at different speeds (drift), each with the same small spread: σ is the spread.
    day1 = [1000.0, 1010.0, 990.0]
    day2 = [900.0, 909.0, 891.0]
    est = learn(None, [day1, day2])
    assert est.df == 4
    assert est.sigma == pytest.approx(math.sqrt((log_sd(day1) ** 2 + log_sd(day2) ** 2) / 2))


def test_a_prior_is_updated_and_its_weight_capped():
    prior = NoiseEstimate(0.03, 100)
    est = learn(prior, [[1000.0, 1001.0, 999.0, 1000.5, 999.5]])
    assert est.df == MAX_PRIOR_DF
    assert 0.01 < est.sigma < 0.03  # the quiet new sample pulls it down, the capped history still counts
    unchanged = learn(prior, [])
    assert unchanged.sigma == pytest.approx(0.03) and unchanged.df == MAX_PRIOR_DF
    assert learn(None, [[1000.0]]) is None


def test_an_outlier_trial_is_not_learned_as_noise():
    est = learn(None, [[1000.0, 1002.0, 998.0, 1001.0, 700.0]])
    assert est.df == 3 and est.sigma < 0.005


def test_the_ledger_form_round_trips_and_rejects_nonsense():
    est = NoiseEstimate(0.021, 12)
    assert NoiseEstimate.from_dict(est.to_dict()) == est
    for bad in ({"sigma": -1, "df": 3}, {"sigma": 0.02, "df": 0}, {"sigma": float("nan"), "df": 3}):
        with pytest.raises(ValueError):
            NoiseEstimate.from_dict(bad)


def test_pooling_weighs_the_prior_by_its_df_and_the_current_trials_by_theirs():
    p = pool(NoiseEstimate(0.02, 10), current_ss=0.04 ** 2 * 5, current_df=5)
    assert p.df == 15 and p.prior_df == 10
    assert p.sigma == pytest.approx(math.sqrt((10 * 0.02 ** 2 + 5 * 0.04 ** 2) / 15))
    assert pool(None, 0.0, 0) is None


def test_a_quiet_host_gets_the_minimum_baseline_a_noisy_one_more_never_past_the_budget():
    limit = -math.log(0.95)
    kw = dict(false_fail=0.01, miss=0.05, least=2, most=5)
    assert planned_trials(0.01, limit, **kw) == 2
    assert planned_trials(0.032, limit, **kw) == 3  # 1/3 + 1/5 candidate trials reach the separation, 1/2 + 1/5 not
    assert planned_trials(0.2, limit, **kw) == 5
    assert planned_trials(None, limit, **kw) == 5
    # A stricter false-fail rate needs more baseline at the same σ.
    assert planned_trials(0.03, limit, **{**kw, "false_fail": 0.002}) == 3
    assert planned_trials(0.03, limit, **kw) == 2
    # Five critical levels: sized for keeping an unchanged candidate at all five and failing a
    # regression at all five, not for each level's own FAIL (see plan_z): 2 where one level wants 3.
    assert planned_trials(0.03, limit, **{**kw, "false_fail": 0.002, "levels": 5}) == 2


def test_the_sizing_separation_is_the_textbook_one_for_one_level_and_the_sweeps_decisions_for_several():
    assert plan_z(0.01, 0.05, 1) == pytest.approx(2.3263 + 1.6449, abs=1e-3)
    # Five levels at 0.2 % each: keeping a neutral candidate at every level (0.95 ** (1/5) each) decides.
    assert plan_z(0.002, 0.05, 5) == pytest.approx(1.6449 + 2.3187, abs=1e-3)
    assert plan_z(0.002, 0.05, 0) == plan_z(0.002, 0.05, 1)


LEVELS = (1, 4, 16, 32, 64)


def turned(values: list[float], i: int) -> list[float]:
    """``values`` in another order at every other level: the levels' trials do not move together."""
    return values[i % len(values):] + values[:i % len(values)] if i % 2 else list(values)


def first_stage(spread_pct: float, levels=LEVELS) -> object:
    """Two trials a level, ``spread_pct`` apart: a σ of the logs of about spread_pct / √2 %."""
    half = spread_pct / 200
    return sweep({c: turned([1000.0 * (1 - half), 1000.0 * (1 + half)], i) for i, c in enumerate(levels)})


def test_the_first_stage_pooled_over_the_sweep_sizes_the_rest_of_the_baseline():
    policy = JudgePolicy()
    assert baseline_plan(policy, first_stage(1.0), {}) == {c: 2 for c in LEVELS}
    assert baseline_top_up(policy, first_stage(1.0), {}) == {}
    assert baseline_top_up(policy, first_stage(4.0), {}) == {}  # σ ≈ 2.8 %: 2 a level
    assert baseline_plan(policy, first_stage(6.0), {}) == {c: 5 for c in LEVELS}  # σ ≈ 4.2 %
    assert baseline_top_up(policy, first_stage(6.0), {}) == {c: 1 for c in LEVELS}  # one round at a time


def test_each_round_of_the_baseline_sharpens_the_next_plan_and_the_budget_ends_it():
    policy = JudgePolicy()
    noisy_by_chance = sweep({c: turned([970.0, 1030.0, 1000.0], i) for i, c in enumerate(LEVELS)})  # σ 3 %: 2 do
    assert baseline_top_up(policy, noisy_by_chance, {}) == {}
    really_noisy = sweep({c: [900.0, 1100.0, 1000.0, 950.0, 1050.0] for c in LEVELS})
    assert baseline_plan(policy, really_noisy, {}) == {c: 5 for c in LEVELS}
    assert baseline_top_up(policy, really_noisy, {}) == {}  # max_trials reached


def test_one_level_alone_is_too_unsure_to_plan_on_unless_the_host_has_learned_its_noise():
    policy = JudgePolicy()
    assert baseline_plan(policy, first_stage(1.0, (64,)), {}) == {64: 5}
    assert baseline_plan(policy, first_stage(1.0, (64,)), {64: NoiseEstimate(0.01, 8)}) == {64: 2}


def test_a_far_noisier_level_is_sized_on_its_own_spread_and_the_others_still_count_it():
    policy = JudgePolicy()
    quiet = {c: turned([995.0 - i, 1005.0 + i], i) for i, c in enumerate(LEVELS[:-1])}
    plan = baseline_plan(policy, sweep({**quiet, 64: [900.0, 1100.0]}), {})
    assert plan[64] == 5  # on its own: one degree of freedom, too unsure to plan on
    # The others keep its spread in their pool (leaving it out would bias their σ low): more than alone.
    assert all(plan[c] > baseline_plan(policy, sweep(quiet), {})[c] for c in LEVELS[:-1])


def test_an_explicit_baseline_count_wins_and_invalid_trials_count_against_the_budget():
    assert baseline_plan(JudgePolicy(baseline_trials=4), first_stage(1.0), {}) == {c: 4 for c in LEVELS}
    measured = sweep({64: [990.0, 1010.0, trial(64, 3, 5.0, invalid="client saturated")],
                      **{c: [990.0, 1010.0] for c in LEVELS[:-1]}})
    more = baseline_top_up(JudgePolicy(), measured, {64: NoiseEstimate(0.06, 24)})
    assert more[64] == 1  # 5 wanted, 2 valid, 3 run: one more this round
    spent = sweep({64: [990.0, 1010.0, *(trial(64, k, 5.0, invalid="client saturated") for k in (3, 4, 5))],
                   **{c: [990.0, 1010.0] for c in LEVELS[:-1]}})
    assert 64 not in baseline_top_up(JudgePolicy(), spent, {64: NoiseEstimate(0.06, 24)})  # 5 run: none left


def test_a_bench_result_is_learned_per_level_from_its_valid_trials():
    result = sweep({8: [1000.0, 1010.0, trial(8, 3, 5.0, invalid="client saturated")], 64: [500.0]})
    assert aa_samples(result, "output_tok_s") == {8: [1000.0, 1010.0]}
    known = {64: NoiseEstimate(0.02, 4)}
    learned = learn_from(known, result, "output_tok_s")
    assert learned[64] == known[64] and learned[8].df == 1


def test_the_baseline_sizing_is_said_in_the_operators_words():
    assert describe_baseline({1: 2, 64: 2}, {}) == "baseline: 2 trial(s) a level"
    assert describe_baseline({1: 2, 64: 2}, {1: 1, 64: 3}) == (
        "baseline: 2 trial(s) a level, then C=1 +1, C=64 +3 where the trials' spread, pooled over the "
        "levels, asked for more")
    assert describe_baseline({1: 5, 64: 2}, {}) == "baseline: C=1 5 trial(s), C=64 2 trial(s)"


def test_a_restart_pair_is_the_sweeps_mean_difference_and_its_within_run_variance():
    before = sweep({1: [1000.0, 1020.0], 64: [2000.0, 1960.0]})  # the levels' trials do not move together
    after = sweep({1: [1050.0], 64: [2100.0]})  # one verification trial a level, on another start
    pair = restart_pair(before, after, "output_tok_s", {})
    b1, b64 = (math.log(1000.0) + math.log(1020.0)) / 2, (math.log(2000.0) + math.log(1960.0)) / 2
    assert pair.difference == pytest.approx(((math.log(1050.0) - b1) + (math.log(2100.0) - b64)) / 2)
    effect = sweep_shock(before, None, "output_tok_s")
    assert (pair.ss, pair.df) == (pytest.approx(effect.ss), 1) and pair.scale == pytest.approx(2 * (1 + 1 / 2) / 4)
    assert restart_pair(before, sweep({16: [1.0]}), "output_tok_s", {}) is None  # no level in common


def test_restart_noise_is_learned_from_pairs_with_the_default_weighing_in():
    assert learn_restart([]) == DEFAULT_RESTART
    calm = learn_restart([RestartPair(0.0, 0.5, 0.0, 1)] * 20)
    assert calm.df == DEFAULT_RESTART_WEIGHT + 20 and "learned from 20 restart pair(s)" in calm.source
    assert calm.sigma == pytest.approx(DEFAULT_RESTART_SIGMA * math.sqrt(DEFAULT_RESTART_WEIGHT / 24))
    # Pairs 4 % apart; the within-run mean square pooled over the pairs (2e-4, scale 0.5): 2σ² ≈ 0.0016 − 0.0001.
    moved = learn_restart([RestartPair(0.04, 0.5, 1e-4, 1), RestartPair(-0.04, 0.5, 3e-4, 1)] * 10)
    expected = (DEFAULT_RESTART_WEIGHT * DEFAULT_RESTART_SIGMA ** 2 + 20 * (0.0016 - 1e-4) / 2) / 24
    assert moved.sigma == pytest.approx(math.sqrt(expected))
    assert learn_restart([RestartPair(0.0, 1.0, 1.0, 1)] * 30).sigma == 0.0  # never below zero
    assert learn_restart([RestartPair(0.0, 0.5, 0.0, 1)] * 40).df == DEFAULT_RESTART_WEIGHT + MAX_PRIOR_DF



def test_the_learned_restart_noise_says_what_measured_its_pairs():
    verified, watched = RestartPair(0.01, 0.5, 1e-4, 1, ROLLBACK_VERIFICATION), RestartPair(0.0, 0.5, 1e-4, 1, WATCH_AFTER_RESTART)
    assert learn_restart([verified, watched, verified]).source == (
        "learned from 3 restart pair(s) of this host (2 rollback verifications, 1 canary watch after a restart), "
        f"the default weighing as {DEFAULT_RESTART_WEIGHT}")
    assert learn_restart([RestartPair(0.0, 0.5, 0.0, 1)]).source == (  # nothing said, nothing claimed
        f"learned from 1 restart pair(s) of this host, the default weighing as {DEFAULT_RESTART_WEIGHT}")
    before, after = sweep({1: [1000.0, 1020.0]}), sweep({1: [1050.0]})
    assert restart_pair(before, after, "output_tok_s", {}, WATCH_AFTER_RESTART).source is WATCH_AFTER_RESTART


def test_the_restart_noise_ledger_form_round_trips_and_rejects_nonsense():
    learned = RestartNoise(0.012, 9, "learned from 5 restart pair(s)")
    assert RestartNoise.from_dict(learned.to_dict()) == learned
    assert RestartNoise.from_dict(DEFAULT_RESTART.to_dict()) == DEFAULT_RESTART
    for bad in ({"sigma": -0.01, "df": 3}, {"sigma": 0.01, "df": 0}):
        with pytest.raises(ValueError):
            RestartNoise.from_dict(bad)


def test_a_learned_restart_sigma_enlarges_the_baseline_the_default_does_not():
    policy = JudgePolicy()
    quiet = first_stage(4.0)  # σ ≈ 2.8 %: 2 trials a level with no restart variance
    assert baseline_plan(policy, quiet, {}) == {c: 2 for c in LEVELS}
    assert baseline_plan(policy, quiet, {}, DEFAULT_RESTART) == {c: 2 for c in LEVELS}
    learned = RestartNoise(0.012, 12, "learned")
    assert all(n > 2 for n in baseline_plan(policy, quiet, {}, learned).values())
    limit = -math.log(0.95)
    kw = dict(false_fail=0.002, miss=0.05, least=2, most=5, levels=5)
    assert planned_trials(0.01, limit, **kw, restart_sigma=0.03) == 5  # the restart alone exceeds the room


def test_restart_pairs_within_chance_of_no_offset_leave_the_one_start_test_at_the_default():
    # Eight pairs whose differences are what their trials alone give (Σd² = m̄·Σscale): no offset seen;
    # 3× that: seen. The learned σ_r is kept as it is (deciding over starts bounds it), the one-start
    # test and the baseline's size use the default, known, and say why.
    calm = learn_restart([RestartPair(d, 0.5, 4e-4, 2) for d in (0.02, -0.01, 0.0142, -0.0142, 0.01, -0.02, 0.0, 0.0)])
    assert not calm.seen and calm.df == DEFAULT_RESTART_WEIGHT + 8 and calm.sigma > 0
    used = calm.in_test()
    assert used.sigma == DEFAULT_RESTART_SIGMA and used.df is None and "no offset beyond chance" in used.source
    moved = learn_restart([RestartPair(d, 0.5, 4e-4, 2) for d in (0.04, -0.03, 0.03, -0.03, 0.02, -0.04, 0.03, 0.0)])
    assert moved.seen and moved.in_test() is moved
    assert DEFAULT_RESTART.in_test() is DEFAULT_RESTART
    assert RestartNoise.from_dict(calm.to_dict()) == calm
    assert RestartNoise.from_dict({"sigma": 0.01, "df": 9, "source": "older ledger row"}).seen  # as learned
    policy = JudgePolicy()
    quiet = first_stage(4.0)
    assert baseline_plan(policy, quiet, {}, RestartNoise(0.012, 12, "learned", seen=False)) == {c: 2 for c in LEVELS}
    base, cand = sweep({64: [1000.0, 1010.0, 990.0]}), sweep({64: [1000.0, 1010.0, 990.0]})
    verdict = judge(base, cand, policy, restart=RestartNoise(0.02, 12, "learned", seen=False))
    assert "restart σ 0.5 % a side (default: this host's restart pairs show no offset beyond chance" in verdict.notes[-1]
    assert verdict.noise.restart_df is None
