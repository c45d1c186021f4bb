"""The false-fail split over levels that move together: the largest of correlated tests, not Bonferroni."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri
from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.multiplicity import effective_tests, per_test_rate
from deployctl.judge.pooling import shock_correlation
from deployctl.judge.stats import Spread
from deployctl.judge.sweep import false_fail_per_test, sweep_correlation
from deployctl.judge.verdict import judge

LEVELS = (1, 4, 16, 32, 64)


def test_independent_levels_keep_bonferronis_split():
    assert effective_tests(5, 0.0, np.inf) == 5.0
    assert effective_tests(5, 0.04, 3.0) == 5.0  # rounded down to no correlation
    assert effective_tests(1, 0.9, 3.0) == 1.0
    assert false_fail_per_test(JudgePolicy(), LEVELS, correlation=0.0) == pytest.approx(0.002)


@pytest.mark.parametrize("r", [0.5, 0.8, 0.95])
def test_the_largest_of_equicorrelated_normal_tests_fails_at_most_the_candidates_rate(r):
    # Monte Carlo of five equicorrelated standard normals: at the per-test rate, the largest exceeds
    # its critical value at most 1 % of the time (a quarter test rounded up: a little under), and far
    # more often than Bonferroni's 0.2 % a test would allow.
    rng = np.random.default_rng(3)
    runs = 400_000
    z = np.sqrt(r) * rng.standard_normal((runs, 1)) + np.sqrt(1 - r) * rng.standard_normal((runs, 5))
    rate = per_test_rate(0.01, 5, r, np.inf)
    overall = float(np.mean(z.max(axis=1) > -ndtri(rate)))
    bonferroni = float(np.mean(z.max(axis=1) > -ndtri(0.002)))
    assert 0.0085 < overall <= 0.0100 + 3 * np.sqrt(0.01 / runs)
    assert bonferroni < overall and rate > 0.002


def test_a_shared_denominator_with_few_df_makes_the_levels_worth_fewer_tests():
    assert effective_tests(5, 0.8, 3.0) < effective_tests(5, 0.8, 30.0) < effective_tests(5, 0.8, np.inf) < 5
    assert effective_tests(5, 0.8, 2.4) == effective_tests(5, 0.8, 3.0)  # df rounded up: fewer tests never


def test_the_correlation_is_a_lower_confidence_bound_from_the_trial_effect():
    rest = Spread(40 * 0.2, 40)  # σ_e² = 0.2
    # θ = 1 + 5·σ_u²/σ_e² = 21 (correlation 0.8), seen with 10 df: the bound is below 0.8, above zero.
    r = shock_correlation(Spread(10 * 4.2, 10), rest, 5)
    assert 0.5 < r < 0.8
    assert shock_correlation(Spread(1000 * 4.2, 1000), Spread(4000 * 0.2, 4000), 5) == pytest.approx(0.8, abs=0.02)
    assert shock_correlation(Spread(2 * 0.2, 2), rest, 5) == 0.0  # no shock beyond chance: independent


def test_a_sweep_whose_levels_move_together_spends_more_of_the_rate_on_each_level():
    # Trial 1 high and trial 2 low at every level: a shock the levels share; the test line says how
    # many tests the levels were counted as.
    values = {c: ([1000.0 + i, 960.0 + i, 990.0 - i], [1013.0 - i, 973.0 - i, 1000.0 + i]) for i, c in enumerate(LEVELS)}
    base = sweep({c: b for c, (b, _) in values.items()})
    cand = sweep({c: k for c, (_, k) in values.items()})
    v = judge(base, cand, JudgePolicy())
    test = v.levels[0].checks[0].interval.test
    assert "over 5 tests" not in test and "= 0.01 over" in test
    counted = float(test.split("= 0.01 over ")[1].split(" tests")[0])
    assert 1 <= counted < 5
    independent = {c: ([1000.0 + i, 960.0 + i][::-1 if i % 2 else 1], [1013.0 - i, 973.0 - i][::1 if i % 3 else -1])
                   for i, c in enumerate(LEVELS)}
    v = judge(sweep({c: b for c, (b, _) in independent.items()}), sweep({c: k for c, (_, k) in independent.items()}),
              JudgePolicy())
    assert "= 0.01 over 5 tests" in v.levels[0].checks[0].interval.test


def test_latency_checks_keep_an_even_split():
    policy = JudgePolicy(ttft_p99_limit_pct=20)
    assert false_fail_per_test(policy, LEVELS) == pytest.approx(0.001)
    assert false_fail_per_test(policy, LEVELS, correlation=0.9) > 0.001
    assert sweep_correlation({c: Spread(0.001, 2) for c in LEVELS}, Spread(0.0, 0)) == 0.0
