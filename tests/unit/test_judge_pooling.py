"""Pooling the noise of a sweep's levels, and the guard that keeps a far noisier level apart."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats
from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.pooling import SHOCK_ALPHA, far_noisier, shared_spreads, shares_shock, trial_effect
from deployctl.judge.stats import Spread, effective_df, log_ratio_interval, spread
from deployctl.judge.sweep import false_fail_per_test
from deployctl.judge.verdict import LevelState, JudgeOutcome, judge

LEVELS = (1, 4, 16, 32, 64)


def test_spread_is_the_within_side_sum_of_squares_of_the_logs():
    s = spread([100.0, 110.0], [90.0, 99.0, 95.0])
    logs = [math.log(v) for v in (90.0, 99.0, 95.0)]
    m = sum(logs) / 3
    assert s.df == 3
    assert s.ss == pytest.approx(math.log(1.1) ** 2 / 2 + sum((x - m) ** 2 for x in logs))


def test_each_level_borrows_the_other_levels_spread():
    spreads = {c: Spread(0.001 * (i + 1), 2) for i, c in enumerate(LEVELS)}
    shared = shared_spreads(spreads)
    assert shared[64].levels == (1, 4, 16, 32)
    assert shared[64].spread.df == 8 and shared[64].spread.ss == pytest.approx(0.010)
    assert all(s.alone is None for s in shared.values())


def test_the_guard_is_a_one_sided_f_test_at_its_alpha():
    rest = Spread(8 * 0.02 ** 2, 8)
    crit = scipy_stats.f.ppf(0.99, 2, 8)
    just_below = Spread(2 * 0.02 ** 2 * crit * 0.999, 2)
    just_above = Spread(2 * 0.02 ** 2 * crit * 1.001, 2)
    assert far_noisier(just_below, rest) is None
    assert far_noisier(just_above, rest) == pytest.approx(math.sqrt(crit * 1.001))
    assert far_noisier(Spread(1e-9, 2), rest) is None  # quieter than the rest is never a danger
    assert far_noisier(Spread(0.01, 0), rest) is None  # nothing to test


def test_a_far_noisier_level_stands_alone_and_the_others_keep_pooling_it():
    spreads = {**{c: Spread(2 * 0.01 ** 2, 2) for c in LEVELS[:-1]}, 64: Spread(2 * 0.08 ** 2, 2)}
    shared = shared_spreads(spreads)
    assert shared[64].spread.df == 0 and "C=64: its trials spread 8.0× more" in shared[64].alone
    assert shared[1].spread.df == 8 and 64 in shared[1].levels


def test_pooling_gives_a_one_look_interval_the_df_of_the_whole_sweep():
    base, cand = [1000.0, 1010.0], [995.0, 1003.0]
    alone = log_ratio_interval(base, cand, 0.95)
    pooled = log_ratio_interval(base, cand, 0.95, shared=Spread(8 * 0.005 ** 2, 8))
    assert alone.df == 2 and pooled.df == 10 and pooled.shared_df == 8
    assert "8 of them from the sweep's other levels" in pooled.test
    assert pooled.high - pooled.low < alone.high - alone.low


def test_a_brand_new_host_decides_a_neutral_sweep_in_two_trials_a_side():
    # Five levels of 2 + 2 trials at ~3 % noise, the levels' trials not moving together: alone each has
    # 2 df (t₀.₉₉ = 6.96) and asks for more; pooled they have 10 and pass.
    values = {c: ([1000.0 + i, 960.0 + i][::-1 if i % 2 else 1], [1013.0 - i, 973.0 - i][::1 if i % 3 else -1])
              for i, c in enumerate(LEVELS)}
    base = sweep({c: b for c, (b, _) in values.items()})
    cand = sweep({c: k for c, (_, k) in values.items()})
    v = judge(base, cand, JudgePolicy())
    assert v.outcome is JudgeOutcome.PASS and v.final
    assert all(lv.checks[0].interval.df == 10 for lv in v.levels)
    one = judge(sweep({64: values[64][0]}), sweep({64: values[64][1]}), JudgePolicy())
    assert one.outcome is JudgeOutcome.INCONCLUSIVE and one.more_trials == {64: 1}


def test_levels_that_move_together_trial_by_trial_count_as_one_not_five():
    # The same spreads, but trial 1 is high and trial 2 low at every level: a shock the levels share.
    # The pooled σ is the same; its degrees of freedom are the trials' (one a side), not the levels'.
    values = {c: ([1000.0 + i, 960.0 + i], [1013.0 - i, 973.0 - i]) for i, c in enumerate(LEVELS)}
    base = sweep({c: b for c, (b, _) in values.items()})
    cand = sweep({c: k for c, (_, k) in values.items()})
    v = judge(base, cand, JudgePolicy())
    assert v.outcome is JudgeOutcome.INCONCLUSIVE and v.more_trials == {c: 1 for c in LEVELS}
    interval = v.levels[0].checks[0].interval
    assert interval.df == pytest.approx(2.0, abs=0.05)
    assert "10 pooled, 2 effective: the levels share a per-trial shock" in interval.test


def test_the_trial_effect_carries_a_shared_shock_and_its_f_test_decides_whether_it_counts():
    shocked = [{c: {0: 0.02 + 0.001 * i, 1: -0.02 - 0.001 * i} for i, c in enumerate(LEVELS)}]
    effect = trial_effect(shocked)
    assert effect.df == 1 and effect.ss == pytest.approx(5 * 2 * 0.022 ** 2, rel=1e-9)
    assert trial_effect([{64: {0: 0.0, 1: 0.1}}]).df == 0  # one level: nothing shared to see
    rest = Spread(8 * 0.01 ** 2, 8)
    crit = scipy_stats.f.ppf(1 - SHOCK_ALPHA, 1, 8)
    assert shares_shock(Spread(0.01 ** 2 * crit * 1.001, 1), rest)
    assert not shares_shock(Spread(0.01 ** 2 * crit * 0.999, 1), rest)
    # Without that evidence the levels keep their full df; with it, the Satterthwaite df of the parts.
    spreads = {c: Spread(0.0004, 2) for c in LEVELS}
    assert shared_spreads(spreads, shock=Spread(0.0001, 2))[64].components == ()
    parts = shared_spreads(spreads, shock=Spread(0.0015, 2))[64].components
    assert parts == (Spread(0.0015, 2), Spread(pytest.approx(0.0005), 8))
    assert effective_df([(p.ss, p.df) for p in parts]) == pytest.approx(0.002 ** 2 / (0.0015 ** 2 / 2 + 0.0005 ** 2 / 8))


def test_a_noisy_level_is_judged_on_its_own_trials_with_a_note():
    quiet = {c: ([1000.0, 1002.0], [1001.0, 1003.0]) for c in LEVELS[:-1]}
    base = sweep({**{c: b for c, (b, _) in quiet.items()}, 64: [900.0, 1100.0]})
    cand = sweep({**{c: k for c, (_, k) in quiet.items()}, 64: [1000.0, 1010.0]})
    v = judge(base, cand, JudgePolicy())
    c64 = next(lv for lv in v.levels if lv.concurrency == 64)
    assert c64.state is LevelState.UNKNOWN and c64.checks[0].interval.df == 2
    assert any("judged on its own trials" in n for n in v.notes)


def test_the_false_fail_rate_is_split_over_the_decisive_tests():
    policy = JudgePolicy(levels={1: {"role": "advisory"}}, ttft_p99_limit_pct=20)
    assert false_fail_per_test(JudgePolicy(), LEVELS) == pytest.approx(0.002)
    assert false_fail_per_test(policy, LEVELS) == pytest.approx(0.01 / 8)  # 4 critical levels × 2 checks
    assert false_fail_per_test(JudgePolicy(), (64,)) == 0.01
