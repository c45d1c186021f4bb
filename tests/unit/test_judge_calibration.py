"""The calibration's vectorised decisions are the judge's: cross-checked against ``judge()`` under every noise model.

benchmarks/judge_calibration.py simulates tens of thousands of promotes with the judge's rules written
out over arrays; its tables (docs/judge.md) are worth something only while those rules are the judge's.
Here a few runs of every cell go through the real baseline rounds, ``judge()`` and — where stage 1 left it to a
second start — ``judge_over_starts`` as well, under each noise model the targets are checked under (shared
per-trial shock, restart offset, heavy tails).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_calibration.py"
_spec = importlib.util.spec_from_file_location("judge_calibration", _SCRIPT)
calibration = importlib.util.module_from_spec(_spec)
sys.modules["judge_calibration"] = calibration
_spec.loader.exec_module(calibration)


@pytest.mark.parametrize("model", calibration.MODELS, ids=lambda m: m.name)
def test_the_vectorised_decisions_agree_with_judge_under_each_noise_model(model):
    mismatches, compared, over = calibration.cross_check(model, runs=5, seed=11, changes=(0.0, -0.05, -0.10))
    assert compared >= 70  # 2 sweeps × 4 baselines × 3 changes × 5 runs, less those with an outlier set aside (t noise)
    assert over >= 8  # the runs stage 1 left undecided went through judge_over_starts as well
    assert mismatches == 0


def test_deciding_over_starts_with_the_baseline_s_second_start_only_agrees_too():
    model = calibration.NoiseModel(restart_sigma=0.02)
    mismatches, compared, over = calibration.cross_check(model, runs=4, seed=12, changes=(0.0, -0.05, -0.10), c2=False)
    assert compared >= 60 and over >= 8 and mismatches == 0


def test_the_noise_models_draw_what_they_say():
    rng = np.random.default_rng(5)
    shocked = calibration.NoiseModel(shock_corr=0.8).trials(rng, 0.03, (4000, 5, 2))
    corr = np.corrcoef(shocked[:, 0, 0], shocked[:, 1, 0])[0, 1]
    assert corr == pytest.approx(0.8, abs=0.05) and shocked.std() == pytest.approx(0.03, rel=0.05)
    restarted = calibration.NoiseModel(restart_sigma=0.02).trials(rng, 0.0, (4000, 5, 2))
    assert np.all(restarted == restarted[:, :1, :1]) and restarted.std() == pytest.approx(0.02, rel=0.05)
    heavy = calibration.NoiseModel(tails_df=3).trials(rng, 0.03, (20000, 1, 5))
    assert np.median(np.abs(heavy)) < 0.6745 * 0.03  # more mass in the centre and the tails than a normal's


def test_the_stall_model_hits_either_side_alike_and_says_which_trials_the_timings_show():
    rng = np.random.default_rng(6)
    logs, seen = calibration.NoiseModel(stall_rate=0.08, stall_seen=0.5).trials_seen(rng, 0.01, (4000, 5, 5))
    stalled = logs < np.log(0.8)
    assert stalled.mean() == pytest.approx(0.08, abs=0.005)
    assert np.median(logs[stalled]) == pytest.approx(np.log1p(-0.36), abs=0.01)
    assert not (seen & ~stalled).any() and seen.sum() / stalled.sum() == pytest.approx(0.5, abs=0.03)


def test_stalls_go_through_the_real_path_and_an_unchanged_candidate_is_kept():
    policy = calibration.JudgePolicy()
    cell = calibration.simulate_real(np.random.default_rng(13), 0.02, 0.0, policy, 40, (64,), False, False, 16,
                                     model=calibration.NoiseModel(stall_rate=0.08))
    assert cell.fail == 0.0 and cell.passed >= 0.85
    caught = calibration.simulate_real(np.random.default_rng(14), 0.02, -0.10, policy, 40, (64,), False, False, 16,
                                       model=calibration.NoiseModel(stall_rate=0.08))
    assert caught.fail >= 0.9
