"""The judge on hand-built sweeps: every outcome, every reason text, the interval against scipy's."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
from scipy import stats as scipy_stats
from support.sweeps import BASE, sweep, trial

from deployctl.inventory.policy import JudgePolicy, LevelRule
from deployctl.judge.stats import (
    DEFAULT_RESTART, NoiseEstimate, RestartNoise, effective_df, log_ratio_interval, outlier_indices,
)
from deployctl.judge.drift import drift_check, with_drift
from deployctl.judge.verdict import (
    LevelState,
    JudgeOutcome,
    judge,
    render_verdict,
)

def scaled(values: list[float], factor: float) -> list[float]:
    return [v * factor for v in values]


REASON = re.compile(
    r"^C=64: [−+±]\d+\.\d % \(95 % CI [−+±]\d+\.\d … [−+±]\d+\.\d %\), limit −5 %"
)


def test_a_clear_regression_fails_with_the_operators_sentence():
    v = judge(sweep({64: BASE}), sweep({64: [876.0, 878.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.FAIL and v.more_trials == {}
    line = v.levels[0].reason
    assert REASON.match(line), line
    assert line.startswith("C=64: −12.")
    assert line.endswith(": regressed beyond the limit")
    assert v.reasons[0] == "FAIL: C=64 regressed beyond the limit"
    check = v.levels[0].checks[0]
    assert check.interval.high < 0 and check.interval.change < -0.05
    assert "pooled t on log trial values" in check.interval.test


def test_the_incident_collapse_fails_at_the_minimum_trials():
    # GLM-5 with the patched all-reduce fusion: 1867 → 236 tok/s (−87 %).
    v = judge(sweep({64: scaled(BASE, 1.867)}), sweep({64: [236.0, 231.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.FAIL
    assert v.levels[0].reason.startswith("C=64: −87.")


def test_no_change_passes_when_the_interval_clears_the_limit():
    v = judge(sweep({64: BASE}), sweep({64: [1003.0, 999.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.PASS and v.more_trials == {}
    assert REASON.match(v.levels[0].reason)
    assert v.levels[0].reason.endswith(": not beyond the limit (−9.8 % or worse ruled out)")
    assert v.reasons[0] == "PASS: no critical level regressed beyond its limit"


def test_an_unclear_level_asks_for_one_more_trial():
    v = judge(sweep({64: BASE}), sweep({64: [900.0, 1000.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INCONCLUSIVE
    assert v.more_trials == {64: 1} and not v.final
    assert v.levels[0].state is LevelState.UNKNOWN
    assert v.levels[0].reason.endswith("; unclear after 2 trials, 1 more asked")
    assert v.reasons[0] == "INCONCLUSIVE so far: more candidate trials needed (C=64 +1)"


def test_unclear_after_the_budget_is_a_final_inconclusive():
    cand = [880.0, 1010.0, 930.0, 990.0, 905.0]
    v = judge(sweep({64: BASE}), sweep({64: cand}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INCONCLUSIVE and v.final
    assert v.levels[0].reason.endswith("; still unclear after 5 trials (max_trials 5 reached)")
    assert v.reasons[0] == "INCONCLUSIVE: C=64 still unclear with the trial budget spent"


def test_fewer_than_min_trials_asks_for_the_rest():
    v = judge(sweep({64: BASE}), sweep({64: [1000.0]}), JudgePolicy(min_trials=3))
    assert v.more_trials == {64: 2}
    assert v.levels[0].reason == "C=64: 1 valid candidate trial(s), the policy wants 3, 2 more asked"


def test_a_level_missing_on_the_candidate_is_asked_for():
    v = judge(sweep({1: BASE, 64: BASE}), sweep({1: [1001.0, 999.0]}), JudgePolicy())
    assert v.more_trials == {64: 2}


def test_invalid_trials_are_not_judged_and_a_level_without_valid_ones_is_invalid():
    bad = [trial(64, 1, 500.0, invalid="client was the limit: the load client used 97% of a CPU core"),
           trial(64, 2, 500.0, invalid="failures: 9 of 128 requests failed")]
    v = judge(sweep({64: BASE}), sweep({64: bad}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INVALID and v.more_trials == {}
    assert v.levels[0].reason == (
        "C=64: no valid candidate trial: trial 1: client was the limit: the load client used 97% of a CPU "
        "core; trial 2: failures: 9 of 128 requests failed"
    )
    assert v.reasons[0] == "INVALID: C=64 cannot be judged"


def test_no_valid_baseline_is_invalid():
    base = [trial(16, 1, 900.0, invalid="interrupted: stopped after 3 of 32 requests")]
    v = judge(sweep({16: base}), sweep({16: [900.0, 901.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INVALID
    assert v.levels[0].reason == "C=16: no valid baseline trial: trial 1: interrupted: stopped after 3 of 32 requests"


def test_one_invalid_trial_among_valid_ones_is_noted_and_counts_against_the_budget():
    cand = [trial(64, 1, 1001.0), trial(64, 2, 10.0, invalid="no requests completed"), trial(64, 3, 999.0)]
    v = judge(sweep({64: BASE}), sweep({64: cand}), JudgePolicy())
    lv = v.levels[0]
    assert lv.candidate_trials == 2 and lv.candidate_trials_run == 3
    assert "C=64: candidate trial 2 not judged: no requests completed" in v.notes


def test_levels_combine_worst_first_and_a_fail_stops_the_asking():
    v = judge(sweep({16: BASE, 64: BASE}), sweep({16: [960.0, 1000.0], 64: [700.0, 705.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.FAIL and v.more_trials == {}
    assert v.reasons[1].startswith("C=64: −29.8 %")  # the failing level first
    assert v.reasons[2].startswith("C=16: ")


def test_invalid_outranks_unknown_but_not_fail():
    bad = [trial(1, 1, 100.0, invalid="no requests completed")]
    v = judge(sweep({1: BASE, 64: BASE}), sweep({1: bad, 64: [960.0, 1000.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INVALID
    v = judge(sweep({1: BASE, 64: BASE}), sweep({1: bad, 64: [700.0, 702.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.FAIL


def test_an_advisory_level_is_reported_but_never_decides():
    policy = JudgePolicy(levels={1: LevelRule(role="advisory")})
    v = judge(sweep({1: BASE, 64: BASE}), sweep({1: [700.0, 702.0], 64: [1001.0, 1000.0]}), policy)
    assert v.outcome is JudgeOutcome.PASS
    assert any(r.startswith("advisory C=1: −29.") and r.endswith("regressed beyond the limit") for r in v.reasons)


def test_a_per_level_limit_is_used_and_shown():
    policy = JudgePolicy(levels={64: LevelRule(limit_pct=15)})
    v = judge(sweep({64: BASE}), sweep({64: [880.0, 884.0]}), policy)
    assert v.outcome is JudgeOutcome.PASS
    assert ", limit −15 %: not beyond the limit (−27.8 % or worse ruled out)" in v.levels[0].reason


def test_a_latency_limit_fails_a_level_on_ttft():
    base = [trial(64, i + 1, v, ttft_p99=2.0 + 0.01 * i) for i, v in enumerate(BASE)]
    cand = [trial(64, i + 1, v, ttft_p99=3.0 + 0.01 * i) for i, v in enumerate([1001.0, 999.0])]
    v = judge(sweep({64: base}), sweep({64: cand}), JudgePolicy(ttft_p99_limit_pct=10))
    assert v.outcome is JudgeOutcome.FAIL
    ttft = [ch for ch in v.levels[0].checks if ch.metric == "ttft_p99_s"][0]
    assert ttft.state is LevelState.FAIL
    assert re.search(r"C=64 TTFT p99: \+4\d\.\d % \(95 % CI \+\d+\.\d … \+\d+\.\d %\), limit \+10 %: "
                     r"regressed beyond the limit", v.levels[0].reason)


def test_a_latency_limit_without_latency_data_is_skipped():
    base = [trial(64, i + 1, v, ttft_p99=None) for i, v in enumerate(BASE)]  # type: ignore[arg-type]
    v = judge(sweep({64: base}), sweep({64: [1001.0, 999.0]}), JudgePolicy(itl_p99_limit_pct=10, ttft_p99_limit_pct=10))
    assert v.outcome is JudgeOutcome.PASS and len(v.levels[0].checks) == 1


def test_another_metric_is_named_in_the_reason():
    v = judge(sweep({4: BASE}), sweep({4: [870.0, 872.0]}), JudgePolicy(metric="per_request_tok_s"))
    assert v.outcome is JudgeOutcome.FAIL
    assert v.levels[0].reason.startswith("C=4 per-request tok/s: −13.0 %")


def test_power_is_shown_as_secondary_evidence_only():
    base = [trial(64, i + 1, v, power=250.0) for i, v in enumerate(BASE)]
    cand = [trial(64, i + 1, v, power=125.0) for i, v in enumerate([1001.0, 999.0])]
    v = judge(sweep({64: base}), sweep({64: cand}), JudgePolicy())
    assert v.outcome is JudgeOutcome.PASS
    assert "C=64: GPU power 250 W → 125 W (−50.0 %) (secondary evidence, not judged)" in v.notes
    assert "note: C=64: GPU power" in render_verdict(v)


def test_levels_only_on_the_candidate_are_noted_not_judged():
    v = judge(sweep({64: BASE}), sweep({64: [1001.0, 999.0], 128: [5.0, 5.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.PASS
    assert "C=128: measured on the candidate only, not judged (no baseline)" in v.notes


def test_an_empty_baseline_is_invalid():
    v = judge(sweep({}), sweep({64: [1.0, 1.0]}), JudgePolicy())
    assert v.outcome is JudgeOutcome.INVALID
    assert v.reasons == ("the baseline has no levels: nothing to judge",)


def test_verdict_round_trips_to_plain_json():
    import json

    v = judge(sweep({64: BASE}), sweep({64: [900.0, 1000.0]}), JudgePolicy())
    data = json.loads(json.dumps(v.to_dict()))
    assert data["outcome"] == "INCONCLUSIVE" and data["more_trials"] == {"64": 1}


@pytest.mark.parametrize("base,cand", [(BASE, [876.0, 878.0]), ([1.0, 1.1, 0.95], [1.2, 1.3, 1.25, 1.22])])
def test_the_interval_is_scipys_pooled_t_interval_on_logs(base, cand):
    iv = log_ratio_interval(base, cand, 0.95)
    ref = scipy_stats.ttest_ind([math.log(v) for v in cand], [math.log(v) for v in base], equal_var=True)
    lo, hi = ref.confidence_interval(0.95)
    assert iv.low == pytest.approx(math.expm1(lo)) and iv.high == pytest.approx(math.expm1(hi))
    assert iv.df == len(base) + len(cand) - 2


@pytest.mark.parametrize("q", [0.975, 0.9875, 0.99375, 0.995])
@pytest.mark.parametrize("df", [1, 2, 3, 4, 6, 8, 30])
def test_the_t_quantile_equals_scipy_stats_t_ppf(q, df):
    from deployctl.judge.stats import t_quantile

    assert t_quantile(q, df) == pytest.approx(float(scipy_stats.t.ppf(q, df)), rel=1e-12)


def test_a_learned_noise_level_narrows_the_interval_and_says_so():
    alone = log_ratio_interval([1000.0, 1040.0], [950.0, 990.0], 0.95)
    learned = log_ratio_interval([1000.0, 1040.0], [950.0, 990.0], 0.95, prior=NoiseEstimate(0.01, 20))
    assert learned.low > alone.low and learned.high < alone.high
    assert learned.df == 22 and learned.prior_df == 20
    assert learned.test.endswith("(20 of them from this host's earlier measurements)")
    assert log_ratio_interval([1000.0], [990.0], 0.95, prior=NoiseEstimate(0.01, 4)).df == 4


def test_one_trial_a_side_gives_no_interval():
    assert log_ratio_interval([1.0], [1.0], 0.95) is None
    with pytest.raises(ValueError):
        log_ratio_interval([0.0, 1.0], [1.0], 0.95)


def test_no_noise_estimate_asks_for_more():
    v = judge(sweep({64: [1000.0]}), sweep({64: [1000.0]}), JudgePolicy(min_trials=1))
    assert v.outcome is JudgeOutcome.INCONCLUSIVE and v.more_trials == {64: 1}
    assert v.levels[0].reason.startswith("C=64: one trial a side gives no estimate of the noise")


def test_drift_is_marked_when_the_restored_baseline_moved():
    pre = sweep({1: BASE, 16: BASE})
    verify = sweep({1: [800.0], 16: [805.0]})
    d = drift_check(pre, verify, JudgePolicy())
    assert d.drift
    assert d.reasons[0].startswith("environment drift:")
    assert d.reasons[1].startswith("C=1: restored baseline −20.")
    failed = judge(pre, sweep({1: [700.0, 701.0], 16: [700.0, 702.0]}), JudgePolicy())
    marked = with_drift(failed, d)
    assert marked.drift is d and marked.outcome is JudgeOutcome.FAIL
    assert any(r.startswith("environment drift:") for r in marked.reasons)


def test_no_drift_when_the_restored_baseline_is_as_before():
    d = drift_check(sweep({1: BASE, 16: BASE}), sweep({1: [1003.0], 16: [998.0]}), JudgePolicy())
    assert not d.drift
    assert d.reasons[0] == "no drift: the restored baseline performs as before the promotion"
    assert d.reasons[1].endswith("limit ±5 %")


def test_drift_without_common_levels_says_so():
    d = drift_check(sweep({1: BASE}), sweep({64: [1.0]}), JudgePolicy())
    assert not d.drift and "no level in common" in d.reasons[0]


def test_zero_throughput_trial_is_left_out():
    cand = [replace(trial(64, 1, 1.0), output_tok_s=0.0), trial(64, 2, 1000.0), trial(64, 3, 1001.0)]
    v = judge(sweep({64: BASE}), sweep({64: cand}), JudgePolicy())
    assert "C=64: candidate trial 1 not judged: no output tok/s measured" in v.notes


def test_only_advisory_levels_pass_and_say_so():
    policy = JudgePolicy(levels={64: LevelRule(role="advisory")})
    v = judge(sweep({64: BASE}), sweep({64: [700.0, 702.0]}), policy)
    assert v.outcome is JudgeOutcome.PASS
    assert v.reasons[0] == "PASS: every level is advisory, none decides"


def test_one_hiccup_trial_is_set_aside_and_a_neutral_candidate_passes():
    # Seen on a loaded 2-core CI machine: one candidate trial at 4255 among four at 5219–5243.
    policy = JudgePolicy(limit_pct=10, min_trials=2, max_trials=5)
    base = sweep({8: [5255.7, 5275.1, 5257.1]})
    cand = sweep({8: [4254.7, 5243.7, 5233.4, 5230.6, 5219.1]})
    verdict = judge(base, cand, policy)
    assert verdict.outcome is JudgeOutcome.PASS
    level = verdict.levels[0]
    assert any("candidate trial at 4254.7 set aside as an outlier (−18.7 %" in n for n in level.notes)
    assert level.candidate_trials == 4


def test_outliers_need_three_values_and_never_a_majority():
    assert outlier_indices([100.0, 60.0]) == []
    assert outlier_indices([100.0, 100.5, 60.0]) == [2]
    assert outlier_indices([100.0, 60.0, 61.0, 140.0]) == []  # no clear majority: nothing set aside
    assert outlier_indices([100.0, 97.0, 103.0, 95.5, 104.0]) == []  # ordinary noise stays


def test_the_restart_sigma_joins_the_standard_error_and_its_df_never_grows():
    base, cand = [1000.0, 1010.0, 990.0], [985.0, 995.0, 975.0]
    plain = log_ratio_interval(base, cand, 0.95)
    known = log_ratio_interval(base, cand, 0.95, restart=RestartNoise(0.02, None, "default"))
    learned = log_ratio_interval(base, cand, 0.95, restart=RestartNoise(0.02, 3, "learned"))
    assert known.se == pytest.approx(math.sqrt(plain.se ** 2 + 2 * 0.02 ** 2))
    assert known.df == plain.df == 4  # a known part adds no df (plugged in, Satterthwaite's would)
    parts = [(plain.se ** 2, 4), (2 * 0.02 ** 2, 3)]
    assert learned.df == pytest.approx(effective_df(parts)) and 3 < learned.df < 4
    assert known.restart_sigma == 0.02 and "restart σ 2.0 % a side (default)" in known.test
    assert learned.high - learned.low > known.high - known.low > plain.high - plain.low


def test_the_verdict_carries_the_noise_it_rests_on_and_says_which_restart_sigma():
    policy = JudgePolicy()
    base = sweep({c: [1000.0 + i, 990.0 - i][:: -1 if i % 2 else 1] for i, c in enumerate((1, 16, 64))})
    cand = sweep({c: [1001.0 - i, 992.0 + i][:: -1 if i % 3 else 1] for i, c in enumerate((1, 16, 64))})
    default = judge(base, cand, policy)
    assert default.noise.restart_sigma == DEFAULT_RESTART.sigma and default.noise.restart_df is None
    assert default.noise.restart_source.startswith("default")
    assert [lv.concurrency for lv in default.noise.levels] == [1, 16, 64]
    assert all(lv.shared_df == 4 and lv.prior_df == 0 for lv in default.noise.levels)
    assert default.notes[-1].startswith("noise: within-run σ") and "restart σ 0.5 % a side (default" in default.notes[-1]
    data = default.to_dict()["noise"]
    assert data["restart_source"].startswith("default") and data["levels"][0]["concurrency"] == 1
    learned = judge(base, cand, policy, {64: NoiseEstimate(0.01, 8)}, RestartNoise(0.013, 9, "learned from 5"))
    assert learned.noise.restart_sigma == 0.013 and learned.noise.restart_df == 9
    assert next(lv for lv in learned.noise.levels if lv.concurrency == 64).prior_df == 8
    assert "restart σ 1.3 % a side (learned from 5)" in learned.notes[-1]
    assert "8 df of it learned on this host" in learned.notes[-1]
