"""The A-B-A reading after a drift: the candidate against the restored baseline decides whether the
verdict against the baseline before stands, or the drift leaves it in doubt (inconclusive)."""

from __future__ import annotations

from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.aba import aba_check
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.drift import drift_check

POLICY = JudgePolicy(limit_pct=10)
BEFORE = sweep({2: [1000.0, 1010.0, 995.0], 8: [3000.0, 3020.0, 2990.0]})


def test_the_after_baseline_as_slow_as_the_candidate_is_drift_not_a_rejection():
    candidate = sweep({2: [800.0, 806.0, 797.0], 8: [2400.0, 2410.0]})
    after = sweep({2: [802.0]})
    assert drift_check(BEFORE, after, POLICY).drift
    aba = aba_check(candidate, after, JudgeOutcome.FAIL, POLICY)
    assert not aba.stands
    assert "may explain the rejection" in aba.reasons[0] and aba.reasons[1].startswith("C=2: candidate")


def test_a_candidate_worse_than_both_baselines_is_still_rejected():
    candidate = sweep({2: [500.0, 504.0, 498.0]})
    after = sweep({2: [900.0]})  # the host got 10 % slower too; the candidate halved
    aba = aba_check(candidate, after, JudgeOutcome.FAIL, POLICY)
    assert aba.stands and "rejection stands" in aba.reasons[0]


def test_a_pass_against_a_slower_host_stands_and_one_against_a_faster_one_is_in_doubt():
    candidate = sweep({2: [1000.0, 1004.0, 998.0]})
    assert aba_check(candidate, sweep({2: [850.0]}), JudgeOutcome.PASS, POLICY).stands
    doubt = aba_check(candidate, sweep({2: [1300.0]}), JudgeOutcome.PASS, POLICY)
    assert not doubt.stands and "may explain the pass" in doubt.reasons[0]


def test_no_common_level_leaves_the_verdict_in_doubt():
    aba = aba_check(sweep({8: [2400.0, 2410.0]}), sweep({2: [802.0]}), JudgeOutcome.FAIL, POLICY)
    assert not aba.stands and "no level" in aba.reasons[0]
