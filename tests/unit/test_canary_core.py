"""The canary's pure parts: change points, the watch verdict's series rule, what to try, the window."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from support.sweeps import sweep

from deployctl.bench.result import BenchResult
from deployctl.inventory.policy import CanaryPolicy, JudgePolicy
from deployctl.judge.changepoint import change_points
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.watch import Health, watch_verdict
from deployctl.decisions.canary import Judged, ServerStart, WatchStart, decide_try, in_window


def _quiet(seed: int, n: int, level: float = 1000.0, noise: float = 0.005) -> list[float]:
    return list(level * (1 + np.random.default_rng(seed).normal(0, noise, n)))


@pytest.mark.parametrize("seed", range(20))
def test_a_3_pct_step_after_ten_quiet_watches_is_found_within_five(seed):
    before = _quiet(seed, 10)
    after = _quiet(seed + 1000, 5, level=970.0)
    found_at = next((k for k in range(1, 6)
                     if any(cp.index == 10 and cp.change_pct < -2 for cp in change_points(before + after[:k]))), None)
    assert found_at is not None


@pytest.mark.parametrize("seed", range(20))
def test_quiet_series_never_degrade_the_release(seed):
    # A sub-percent "step" in pure noise may pass the t-test now and then; only a drop of at least
    # change_min_pct (2 %) counts, and none that large shows up in noise this quiet.
    assert all(abs(cp.change_pct) < 2 for cp in change_points(_quiet(seed, 15)))
    verdict = watch_verdict(None, _empty_result(), {8: _quiet(seed, 15)}, JudgePolicy(), CanaryPolicy())
    assert verdict.health is Health.OK


def test_two_steps_are_both_found_in_order():
    series = _quiet(1, 10) + _quiet(2, 10, 900.0) + _quiet(3, 10, 1000.0)
    assert [cp.index for cp in change_points(series)] == [10, 20]


def test_too_short_or_flat_series():
    assert change_points([]) == [] and change_points([1.0, 2.0, 3.0]) == []
    assert change_points([5.0] * 8) == []
    assert [cp.index for cp in change_points([5.0] * 4 + [4.0] * 4)] == [4]


def test_a_series_step_down_degrades_the_release_without_a_reference():
    series = {8: _quiet(7, 10) + _quiet(8, 4, 970.0)}
    verdict = watch_verdict(None, _empty_result(), series, JudgePolicy(), CanaryPolicy())
    assert verdict.health is Health.DEGRADED and "C=8: a persistent step of -3." in verdict.reasons[-1]
    up = watch_verdict(None, _empty_result(), {8: _quiet(7, 10) + _quiet(8, 4, 1030.0)}, JudgePolicy(), CanaryPolicy())
    assert up.health is Health.OK and up.shifts  # a step up is reported, not alarming


def _empty_result() -> BenchResult:
    return BenchResult(url="", model="", input_tokens=1, output_tokens=1, started_at=0.0, levels=())


NOW = datetime(2026, 12, 5, 3, 0)  # a Saturday, 03:00


@pytest.mark.parametrize("window,inside", [
    (None, True), ("02:00-05:00", True), ("04:00-05:00", False), ("Sat 02:00-04:00", True),
    ("Mon,Tue 02:00-04:00", False), ("22:00-04:00", True), ("Fri 22:00-04:00", True), ("Sat 22:00-04:00", False),
])
def test_maintenance_window(window, inside):
    assert in_window(window, NOW) is inside


def test_what_to_try():
    judged = [Judged(7, "h-rejected", "0.5.9", "rejected")]
    args = dict(window=None, now=NOW)
    assert not decide_try(None, None, "live", "0.5.9", judged, **args).attempt
    assert not decide_try("c", "live", "live", "0.5.9", judged, **args).attempt
    same = decide_try("c", "h-rejected", "live", "0.5.9", judged, **args)
    assert not same.attempt and "release 7, rejected" in same.reason
    assert decide_try("c", "h-rejected", "live", "0.6.0", judged, **args).attempt  # a new SGLang: judge again
    assert decide_try("c", "h-new", "live", "0.5.9", judged, **args).attempt
    outside = decide_try("c", "h-new", "live", "0.5.9", judged, window="04:00-05:00", now=NOW)
    assert not outside.attempt and "watch only" in outside.reason


def test_canary_levels_must_be_measured_levels():
    from deployctl.inventory.policy import Policy

    assert Policy.model_validate({"canary": {"levels": [16]}}).canary.levels == [16]
    with pytest.raises(ValueError, match=r"canary.levels \[3\] are not in bench.concurrency"):
        Policy.model_validate({"canary": {"levels": [3, 16]}})


def test_the_most_serious_outcome_is_the_exit_code():
    from deployctl.flows.canary import VERDICT, most_serious
    from deployctl.errors import ExitCode

    assert most_serious([ExitCode.OK, ExitCode.CANARY_PROMOTED]) == ExitCode.CANARY_PROMOTED
    assert most_serious([ExitCode.BUSY, ExitCode.CANARY_DEGRADED, ExitCode.OK]) == ExitCode.CANARY_DEGRADED
    assert most_serious([ExitCode.REJECTED, ExitCode.ROLLBACK_FAILED]) == ExitCode.ROLLBACK_FAILED
    # Still degraded somewhere is more serious than degraded and fixed.
    assert most_serious([ExitCode.CANARY_ROLLED_BACK, ExitCode.CANARY_DEGRADED]) == ExitCode.CANARY_DEGRADED
    assert most_serious([ExitCode.CANARY_ROLLED_BACK, ExitCode.REJECTED]) == ExitCode.CANARY_ROLLED_BACK
    assert most_serious([ExitCode.OK, 99]) == 99
    codes = {ExitCode.OK, ExitCode.BUSY, ExitCode.CANARY_DEGRADED, ExitCode.CANARY_PROMOTED, ExitCode.REJECTED,
             ExitCode.INCONCLUSIVE, ExitCode.ROLLBACK_FAILED, ExitCode.CANARY_ROLLED_BACK, ExitCode.CANARY_UNCLEAR}
    assert len({VERDICT[c] for c in codes}) == len(codes)  # every outcome its own word, and its own code


def test_the_candidate_is_keyed_on_the_version_identity_a_baseline_is_reused_on():
    from deployctl.decisions.canary import UNKNOWN_VERSION, version_identity
    from deployctl.decisions.evidence import version_key
    from deployctl.startup.report import StartupReport

    range_only = StartupReport("ready", sglang_version_range="0.5.1 … 0.5.8.post1")
    # As the server states it, else the log's version or range: never None.
    assert version_identity(version_key("0.5.9", range_only)) == "0.5.9"
    assert version_identity(version_key(None, range_only)) == "0.5.1 … 0.5.8.post1"
    assert version_identity(version_key(None, None)) == UNKNOWN_VERSION
    judged = [Judged(7, "h", "0.5.9", "rejected"), Judged(8, "g", UNKNOWN_VERSION, "inconclusive")]
    args = dict(window=None, now=NOW)
    assert not decide_try("c", "h", "live", version_identity(version_key("0.5.9", None)), judged, **args).attempt
    upgraded = version_identity(version_key("0.5.10", range_only))
    assert decide_try("c", "h", "live", upgraded, judged, **args).attempt  # an upgrade re-tries it
    # A server that never says its version does not get the same candidate on every run.
    assert not decide_try("c", "g", "live", version_identity(None), judged, **args).attempt


def test_the_version_a_promote_was_judged_on_comes_from_the_canary_then_the_fingerprint_then_the_logs():
    from deployctl.adapters.ledger import Ledger
    from deployctl.judge.reuse import BaselineFingerprint
    from deployctl.flows.canary_watch import TRIED, judged_promotes
    from deployctl.startup.report import StartupReport

    ledger = Ledger.in_memory()
    base = dict(deployment="d", kind="promote", unit_name="u.service", unit_text="[Service]\n", who="t")
    ids = [ledger.begin_release(**base, unit_hash=h) for h in ("a", "b", "c", "d")]
    ledger.record(ids[0], "canary", "note", TRIED, {"sglang_version": "0.5.9"})
    ledger.save_bench(ids[1], "baseline", _empty_result(), unit_hash="x", bench_key="k", sglang_version=None,
                      fingerprint=BaselineFingerprint("x", "k", sglang_version="0.5.10"))
    ledger.save_startup(ids[2], "baseline", StartupReport("ready", sglang_version_range="0.5.10 or newer"))
    for rid in ids:
        ledger.finish(rid, result="rejected", verdict="FAIL", reasons=[])
    assert [(j.unit_hash, j.sglang_version) for j in sorted(judged_promotes(ledger, "d"), key=lambda j: j.unit_hash)] \
        == [("a", "0.5.9"), ("b", "0.5.10"), ("c", "0.5.10 or newer"), ("d", "unknown")]


def test_a_wide_interval_beyond_the_limit_is_unclear_not_ok():
    """The watch of issue 26: about −35 % with a 95 % interval of roughly −57 … −9 % against a −8 % limit,
    the trial budget spent. Not shown to be worse beyond noise, not shown to be fine: unclear."""
    reference = sweep({8: [1000.0, 1005.0, 995.0]})
    now = sweep({8: [430.0, 900.0]})
    judge_policy = JudgePolicy(limit_pct=8, min_trials=2, max_trials=2, baseline_trials=3)
    verdict = watch_verdict(reference, now, {8: [1000.0, 665.0]}, judge_policy, CanaryPolicy())
    assert verdict.verdict is not None and verdict.verdict.outcome is JudgeOutcome.INCONCLUSIVE and verdict.verdict.final
    assert verdict.health is Health.UNCLEAR and not verdict.degraded
    assert verdict.reasons and verdict.reasons[0].startswith("not decided: C=8: −")


def test_a_step_down_outranks_an_unclear_verdict():
    reference = sweep({8: [1000.0, 1005.0, 995.0]})
    now = sweep({8: [430.0, 900.0]})
    judge_policy = JudgePolicy(limit_pct=8, min_trials=2, max_trials=2, baseline_trials=3)
    series = {8: _quiet(7, 10) + _quiet(8, 4, 900.0)}
    assert watch_verdict(reference, now, series, judge_policy, CanaryPolicy()).health is Health.DEGRADED


def test_another_check_in_the_watch_folds_in_worst_first():
    from deployctl.judge.watch import CheckVerdict, with_checks

    ok = watch_verdict(None, _empty_result(), {8: _quiet(1, 5)}, JudgePolicy(), CanaryPolicy())
    assert with_checks(ok, []) is ok
    unclear = with_checks(ok, [("outputs", CheckVerdict(Health.UNCLEAR, ("2 of 40 answers differ: not decided",)))])
    assert unclear.health is Health.UNCLEAR and unclear.reasons[-1] == "outputs: 2 of 40 answers differ: not decided"
    worse = with_checks(unclear, [("outputs", CheckVerdict(Health.DEGRADED, ("wrong answers",))),
                                  ("other", CheckVerdict(Health.OK))])
    assert worse.health is Health.DEGRADED


def test_a_watch_is_a_restart_pair_only_when_its_reference_was_measured_before_this_start():
    start = ServerStart("a1b2", active_since=5000.0)
    assert WatchStart(start, bench_id=9, reference_id=3, reference_at=4999.0).restart_between is True
    assert WatchStart(start, bench_id=9, reference_id=3, reference_at=5001.0).restart_between is False  # same start
    assert WatchStart(None, bench_id=9, reference_id=3, reference_at=4999.0).restart_between is None  # start unknown
    assert WatchStart(start, bench_id=9, reference_id=None, reference_at=None).restart_between is None  # no reference
    # a start noted with the reference decides, whatever the clocks say
    assert WatchStart(start, 9, 3, 4999.0, reference_start=ServerStart("a1b2", 4000.0)).restart_between is False
    assert WatchStart(start, 9, 3, 5001.0, reference_start=ServerStart("9f8e", 4000.0)).restart_between is True
    assert WatchStart(start, 9, 3, 4999.0).to_dict() == {
        "start": {"invocation_id": "a1b2", "active_since": 5000.0}, "bench_id": 9, "reference_id": 3,
        "reference_at": 4999.0, "reference_start": None, "restart_between": True}
