"""Sequential boundaries: the error spent over the looks, and what the judge does with them."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtri

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.sequential import _z_boundaries, decide, look_boundary, spend
from deployctl.judge.stats import NoiseEstimate
from deployctl.judge.verdict import LevelState, JudgeOutcome, judge

sys.path.insert(0, str(Path(__file__).parent))
from test_judge import BASE, sweep  # noqa: E402


def crossing_rates(n_baseline: int, lo: int, hi: int, bounds: tuple[float, ...]) -> list[float]:
    """Monte Carlo under no change: how often each look is the first to cross its boundary."""
    rng = np.random.default_rng(11)
    runs = 200_000
    mb = rng.normal(size=(runs, n_baseline)).mean(axis=1)
    cand = rng.normal(size=(runs, hi))
    crossed = np.zeros(runs, bool)
    rates = []
    for k, n in enumerate(range(lo, hi + 1)):
        z = (cand[:, :n].mean(axis=1) - mb) / math.sqrt(1 / n_baseline + 1 / n)
        new = (z > bounds[k]) & ~crossed
        rates.append(float(new.mean()))
        crossed |= new
    return rates


@pytest.mark.parametrize("n_baseline,rho", [(5, 1.0), (3, 2.0), (6, 3.0)])
def test_each_look_spends_exactly_its_share_of_the_error(n_baseline, rho):
    alpha = 0.025
    bounds = _z_boundaries(n_baseline, 2, 5, alpha, rho)
    rates = crossing_rates(n_baseline, 2, 5, bounds)
    info = [1 / (1 / n_baseline + 1 / n) for n in range(2, 6)]
    spent = [spend(alpha, i / info[-1], rho) for i in info]
    expected = [spent[0]] + [b - a for a, b in zip(spent, spent[1:])]
    assert rates == pytest.approx(expected, abs=0.0008)
    assert sum(rates) == pytest.approx(alpha, abs=0.001)


def test_one_look_is_the_fixed_design_and_bonferroni_would_be_wider():
    assert _z_boundaries(5, 3, 3, 0.01, 2.0) == pytest.approx((float(-ndtri(0.01)),), abs=1e-6)
    bounds = _z_boundaries(5, 2, 5, 0.01, 2.0)
    assert max(bounds) < float(-ndtri(0.01 / 4))  # the looks share trials, so each gets more than α/4


def test_a_look_past_the_budget_uses_the_last_boundary_and_t_widens_it():
    last = look_boundary(5, 9, 2, 5, 10_000, false_fail=0.01, miss=0.05, rho=2.0)
    assert (last.look, last.looks) == (4, 4)
    few_df = look_boundary(5, 5, 2, 5, 8, false_fail=0.01, miss=0.05, rho=2.0)
    assert few_df.fail_t > last.fail_t and few_df.fail_tail == pytest.approx(last.fail_tail)


def test_decide_fails_only_beyond_the_limit_and_passes_only_clear_of_twice_it():
    b = look_boundary(5, 2, 2, 5, 10_000, false_fail=0.01, miss=0.05, rho=2.0)
    limit = -math.log(0.95)
    regression = np.array([0.30, 0.04, 0.0, 0.07])
    failed, passed = decide(regression, 0.005, b, limit)
    assert failed.tolist() == [True, False, False, True]
    assert passed.tolist() == [False, True, True, False]
    failed, passed = decide(0.07, 0.05, b, limit)  # plain floats too
    assert not failed and not passed


def test_a_quiet_hosts_learned_noise_decides_what_two_trials_alone_cannot():
    cand = sweep({64: [900.0, 1000.0]})
    alone = judge(sweep({64: BASE}), cand, JudgePolicy())
    learned = judge(sweep({64: BASE}), cand, JudgePolicy(), {64: NoiseEstimate(0.01, 24)})
    assert alone.outcome is JudgeOutcome.INCONCLUSIVE and alone.more_trials == {64: 1}
    assert learned.outcome is JudgeOutcome.FAIL and learned.final
    assert "24 of them from this host's earlier measurements" in learned.levels[0].checks[0].interval.test


def test_a_noisy_hosts_learned_noise_asks_for_more_trials():
    cand = sweep({64: [955.0, 985.0]})
    alone = judge(sweep({64: BASE}), cand, JudgePolicy())
    noisy = judge(sweep({64: BASE}), cand, JudgePolicy(), {64: NoiseEstimate(0.06, 24)})
    assert alone.outcome is JudgeOutcome.PASS
    assert noisy.outcome is JudgeOutcome.INCONCLUSIVE and noisy.more_trials == {64: 1}


def test_a_decided_level_is_not_measured_again_while_another_is_unclear():
    v = judge(sweep({16: BASE, 64: BASE}), sweep({16: [998.0, 1003.0], 64: [900.0, 1000.0]}), JudgePolicy())
    states = {lv.concurrency: lv.state for lv in v.levels}
    assert states == {16: LevelState.PASS, 64: LevelState.UNKNOWN}
    assert v.more_trials == {64: 1}
    assert "sequential look 1 of 4" in v.levels[0].checks[0].interval.test
