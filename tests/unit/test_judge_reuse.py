"""Reusing a stored baseline: only when nothing that sets a GPU server's speed changed, and confirmed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deployctl.judge.reuse import BaselineFingerprint, ReuseAccount, confirm, reuse_decision
from deployctl.judge.stats import NoiseEstimate

FP = BaselineFingerprint(
    unit_hash="a1", sweep="c=1,64;in=1000;out=1000;n=128", host="gpu-01", sglang_version="0.5.6",
    gpu_model="NVIDIA H200", gpu_driver="570.86", power_limit_w=700.0, clocks_policy="default",
)


def test_an_unchanged_recent_baseline_is_reused_and_says_how_old():
    d = reuse_decision(FP, measured_at=1000.0, current=FP, now=1000.0 + 1800, max_age_s=3600)
    assert d.reusable
    assert d.reasons[0].startswith("the baseline measured 30 min ago matches")


@pytest.mark.parametrize("field,value,reason", [
    ("unit_hash", "b2", "the unit changed: a1 → b2"),
    ("sglang_version", "0.5.7", "the SGLang version changed: 0.5.6 → 0.5.7"),
    ("gpu_driver", "575.51", "the GPU driver changed: 570.86 → 575.51"),
    ("power_limit_w", 600.0, "the GPU power limit changed: 700.0 → 600.0"),
    ("clocks_policy", "locked 1980 MHz", "the GPU clocks policy changed: default → locked 1980 MHz"),
    ("host", "gpu-02", "the host changed: gpu-01 → gpu-02"),
])
def test_any_change_that_sets_the_speed_forces_a_fresh_baseline(field, value, reason):
    d = reuse_decision(FP, 0.0, replace(FP, **{field: value}), 10.0, 3600)
    assert not d.reusable and d.reasons == (reason,)


def test_an_unknown_fact_or_an_old_measurement_is_not_reused():
    d = reuse_decision(replace(FP, gpu_model=None), 0.0, FP, 7300.0, 3600)
    assert not d.reusable
    assert d.reasons == ("the GPU model is not known for the stored baseline",
                         "measured 2.0 h ago, older than the 60 min allowed")
    assert not reuse_decision(FP, 100.0, FP, 0.0, 3600).reusable  # the clock moved back


def test_the_fingerprint_round_trips_through_the_ledgers_form():
    assert BaselineFingerprint.from_dict({**FP.to_dict(), "added_later": 1}) == FP


def test_a_confirmation_trial_within_the_noise_agrees_and_a_drifted_one_does_not():
    stored = [1000.0, 1012.0, 991.0, 1004.0, 996.0]
    ok = confirm(stored, 1006.0, None)
    assert ok.agrees and ok.reason.startswith("confirmation trial 1006.0 against the stored mean 1000.6 (+0.5 %)")
    drifted = confirm(stored, 900.0, None)
    assert not drifted.agrees and "outside the stored trials' noise" in drifted.reason
    # A learned σ of a noisy host widens what still agrees.
    assert confirm(stored, 960.0, NoiseEstimate(0.03, 24)).agrees
    assert not confirm(stored, 960.0, NoiseEstimate(0.005, 24)).agrees
    assert not confirm([1000.0], 1000.0, None).agrees


def test_the_account_counts_what_reuse_saved():
    acc = ReuseAccount(reused_from=7, age_s=1500, confirmation_trials=2, baseline_trials=10, trial_s=170.0)
    assert acc.saved_s == 1360.0
    assert acc.describe() == ("baseline: reused the measurement of release 7 (25 min old), checked by 2 confirmation "
                              "trial(s) instead of 10 baseline trials: 1360 s of benchmark saved")
