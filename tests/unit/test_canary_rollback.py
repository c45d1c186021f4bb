"""The canary's rollback of a degraded live release, as data: which release, whether to try it, and the
rule that keeps it only when it measures better now."""

from __future__ import annotations

import json
from datetime import datetime

from support.sweeps import BASE, sweep

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.improvement import improvement_verdict
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.verdict import judge
from deployctl.decisions import machine as m
from deployctl.decisions.canary import Judged, decide_rollback, earlier_release
from deployctl.decisions.records import Release

NOW = datetime(2026, 12, 5, 3, 0)  # a Saturday, 03:00


def release(id_: int, unit_hash: str, previous: int | None, profile: str = "p") -> Release:
    return Release(id=id_, deployment="d", kind="promote", profile=profile, unit_name="u.service", unit_text="",
                   unit_hash=unit_hash, redacted=False, flags={}, env={}, host=None, who="t", pid=None,
                   started_at=0.0, finished_at=1.0, phase="DONE", state=None, previous_id=previous,
                   baseline_startup=None, startup=None, verdict=None, reasons=[], result="kept", live=False)


def _better(live: list[float], earlier: list[float], policy: JudgePolicy = JudgePolicy()):
    a, b = sweep({16: live}), sweep({16: earlier})
    return improvement_verdict(judge(a, b, policy), a, b, policy)


def test_a_clearly_faster_earlier_release_is_better_now():
    v = _better([x * 0.8 for x in BASE], BASE)
    assert v.outcome is JudgeOutcome.PASS
    assert v.reasons[0].startswith("better now: ") and "significantly at C=16" in v.reasons[0]


def test_an_earlier_release_that_measures_alike_is_not_better():
    # Not worse (the judge passes it), but no level is significantly better: the live release stays.
    v = _better(BASE, [1001.0, 1010.0, 993.0, 1003.0, 998.0])
    assert v.outcome is JudgeOutcome.FAIL and v.more_trials == {}
    assert v.reasons[0].startswith("not better now: ") and "the live release stays" in v.reasons[0]


def test_a_slower_earlier_release_is_not_better():
    v = _better(BASE, [x * 0.8 for x in BASE])
    assert v.outcome is JudgeOutcome.FAIL and v.reasons[0].startswith("FAIL: C=16 regressed")


def test_a_higher_median_at_one_level_and_lower_at_another_is_not_better():
    live, earlier = sweep({1: BASE, 16: BASE}), sweep({1: [x * 1.2 for x in BASE], 16: [x * 0.99 for x in BASE]})
    v = improvement_verdict(judge(live, earlier, JudgePolicy()), live, earlier, JudgePolicy())
    assert v.outcome is JudgeOutcome.FAIL and "its median is not better at C=16" in v.reasons[0]


def test_inconclusive_stays_inconclusive():
    live, earlier = sweep({16: BASE[:2]}), sweep({16: [1300.0, 700.0]})
    raw = judge(live, earlier, JudgePolicy())
    assert raw.outcome is not JudgeOutcome.PASS
    assert improvement_verdict(raw, live, earlier, JudgePolicy()) == raw


def test_the_earlier_release_is_the_one_the_live_one_replaced_past_copies_of_itself():
    releases = {1: release(1, "a", None), 2: release(2, "b", 1), 3: release(3, "b", 2), 4: release(4, "c", 3)}
    assert earlier_release(releases[4], releases).id == 3
    assert earlier_release(releases[3], releases).id == 1  # release 2 is the same unit as 3
    assert earlier_release(releases[1], releases) is None
    loop = {5: release(5, "x", 6), 6: release(6, "x", 5)}
    assert earlier_release(loop[5], loop) is None


def test_when_to_try_the_earlier_release():
    releases = {1: release(1, "a", None, "baseline"), 2: release(2, "b", 1)}
    live = releases[2]
    args = dict(window=None, now=NOW)
    assert not decide_rollback("alert", live, True, releases, [], "0.5.9", **args).attempt
    go = decide_rollback("rollback", live, True, releases, [], "0.5.9", **args)
    assert go.attempt and go.target.id == 1 and "release 1 (baseline)" in go.reason
    assert not decide_rollback("rollback", live, False, releases, [], "0.5.9", **args).attempt  # nothing measured
    assert not decide_rollback("rollback", releases[1], True, releases, [], "0.5.9", **args).attempt
    tried = [Judged(9, "a", "0.5.9", "rejected")]
    again = decide_rollback("rollback", live, True, releases, tried, "0.5.9", **args)
    assert not again.attempt and "already judged against release 2" in again.reason
    assert decide_rollback("rollback", live, True, releases, tried, "0.6.0", **args).attempt  # a new SGLang
    outside = decide_rollback("rollback", live, True, releases, [], "0.5.9", window="04:00-05:00", now=NOW)
    assert not outside.attempt and "outside the maintenance window" in outside.reason


def test_a_measured_baseline_starts_the_machine_at_install_and_still_judges():
    state = m.start(m.Limits(preflight=False, keep_when_inconclusive=False), measured=True)
    actions = []
    for outcome in (m.Succeeded(), m.Succeeded(), m.Succeeded(), m.Succeeded(), m.Judged(JudgeOutcome.FAIL, ("worse",)),
                    m.Succeeded(), m.Verified(True)):
        actions.append(type(m.next_action(state)).__name__)
        state = m.advance(state, outcome)
        assert m.State.from_dict(json.loads(json.dumps(state.to_dict()))) == state
    assert actions == ["InstallTrial", "RestartCandidate", "CheckStartupGates", "BenchCandidate", "JudgeCandidate",
                       "RestoreBaseline", "VerifyBaseline"]
    assert state.result is m.Result.REJECTED and state.phase is m.Phase.DONE
