"""Recovery of a promote whose controller died: roll back, finish the keep, or just close the record."""

from __future__ import annotations

import pytest
from support.promote import bench, memory_ledger, plan
from support.runner_fakes import FakeBench, FakeJudge, FakeUnits, adapters

from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import StartsVerdict
from deployctl.judge.stats import RestartNoise
from deployctl.flows.recover import recover, recovery_plan
from deployctl.decisions import machine as m
from deployctl.decisions.evidence import SECOND_START_ROLE, StartOutcome


@pytest.fixture
def ledger():
    with memory_ledger() as led:
        yield led


def _dead_promote(ledger, phase, result=None):
    p = plan()
    prev = ledger.begin_release(deployment="qwen", kind="adopted", unit_name=p.unit_name, unit_text=p.known_good_text,
                                unit_hash=p.known_good_hash, who="t", finished=True, live=True)
    rid = ledger.begin_release(deployment="qwen", kind="promote", unit_name=p.unit_name, unit_text=p.candidate_text,
                               unit_hash=p.candidate_hash, who="t", profile="candidate", previous_id=prev, pid=999999)
    ledger.save_state(rid, m.State(phase=phase, result=result).to_dict())
    ledger.save_bench(rid, "baseline", bench({1: 120.0}), unit_hash=p.known_good_hash, bench_key="k")
    return prev, rid


def _plan_for(ledger):
    return lambda release: recovery_plan(ledger, release, plan())


async def test_death_during_bench_is_rolled_back_and_said(ledger):
    prev, rid = _dead_promote(ledger, m.Phase.BENCH)
    a = adapters(bench_=FakeBench([bench({1: 119.0})]))
    said = await recover(ledger, "qwen", a, _plan_for(ledger), "status")
    assert a.units.calls == ["restore", "restart"]
    assert [r.line for r in said] == [f"recovered release {rid}: the controller (pid 999999) stopped during BENCH; recovered by "
                    "`deployctl status`; rolled back to the known-good unit and verified it"]
    release = ledger.get(rid)
    assert release.finished and release.result == "aborted"
    assert ledger.live_release("qwen").id == prev
    assert ledger.unfinished("qwen") == []
    assert any(e.name == "recovery" for e in ledger.events(rid))


async def test_death_before_any_change_only_closes_the_record(ledger):
    _, rid = _dead_promote(ledger, m.Phase.BASELINE)
    a = adapters()
    said = await recover(ledger, "qwen", a, _plan_for(ledger), "promote")
    assert a.units.calls == [] and "no change had been made" in said[0].line
    assert not said[0].failed and not said[0].rolled_back
    assert ledger.get(rid).result == "aborted"


async def test_death_during_keep_finishes_the_keep(ledger):
    _, rid = _dead_promote(ledger, m.Phase.KEEP, result=m.Result.KEPT)
    a = adapters(units=FakeUnits(trials={plan().unit_name: plan().candidate_text}))  # killed before the keep
    said = await recover(ledger, "qwen", a, _plan_for(ledger), "history")
    assert a.units.calls == ["keep"] and "finished keeping candidate" in said[0].line and said[0].kept
    assert ledger.live_release("qwen").id == rid


async def test_nothing_to_recover(ledger):
    assert await recover(ledger, "qwen", adapters(), _plan_for(ledger), "promote") == []


def test_recovery_plan_restores_the_release_it_was_tried_against(ledger):
    prev, rid = _dead_promote(ledger, m.Phase.BENCH)
    p = recovery_plan(ledger, ledger.get(rid), plan(known_good_text="something else", known_good_hash="zzz"))
    assert p.known_good_hash == plan().known_good_hash and p.known_good_text == plan().known_good_text
    assert p.candidate_hash == plan().candidate_hash


async def test_a_recovery_whose_rollback_fails_says_so_and_is_failed(ledger):
    _, rid = _dead_promote(ledger, m.Phase.BENCH)
    down = StartOutcome(False, "crashed", "address already in use")
    a = adapters(units=FakeUnits(outcomes={plan().known_good_text: down}))
    said = await recover(ledger, "qwen", a, _plan_for(ledger), "rollback")
    assert said[0].failed and not said[0].rolled_back and "ROLLBACK FAILED" in said[0].line
    assert ledger.get(rid).result == "rollback_failed"


async def test_a_release_that_had_ended_in_rollback_failed_is_not_called_unchanged(ledger):
    _, rid = _dead_promote(ledger, m.Phase.ROLLBACK_FAILED, result=m.Result.ROLLBACK_FAILED)
    a = adapters()
    said = await recover(ledger, "qwen", a, _plan_for(ledger), "status")
    assert said[0].failed and "no change had been made" not in said[0].line
    assert "ROLLBACK FAILED" in said[0].line and ledger.get(rid).result == "rollback_failed"


@pytest.mark.parametrize("phase", [m.Phase.SECOND_START, m.Phase.VERIFY])
async def test_death_while_deciding_over_starts_measures_and_decides_it_again(ledger, phase):
    """Killed during the candidate's second start (before its sweep was stored) or the verification after it:
    the next command rolls back, measures the plan on the baseline's new start and decides with what the
    ledger holds."""
    plan_ = ((1, 2),)
    _, rid = _dead_promote(ledger, phase, result=m.Result.REJECTED)
    ledger.save_state(rid, m.State(phase=phase, result=m.Result.REJECTED, over_starts=plan_).to_dict())
    ledger.save_bench(rid, "candidate", bench({1: 112.0}), unit_hash=plan().candidate_hash, bench_key="k")
    if phase is m.Phase.VERIFY:
        ledger.save_bench(rid, SECOND_START_ROLE, bench({1: 113.0}), unit_hash=plan().candidate_hash, bench_key="r")
    said = "INCONCLUSIVE over server starts: … a restart offset of up to 2.0 % a start could explain it"
    judge = FakeJudge(starts=StartsVerdict(JudgeOutcome.INCONCLUSIVE, (said,), RestartNoise(0.02, None, "guard")))
    b = FakeBench([bench({1: 121.0})])
    done = await recover(ledger, "qwen", adapters(bench_=b, judge=judge), _plan_for(ledger), "status")
    assert b.calls == [([1], {1: 2})]  # the plan, again, on the restored baseline's new start
    (before, after), candidates = judge.starts_asked[0]  # the sweeps from the ledger
    assert before.level(1).trials[0].output_tok_s == 120.0 and after.level(1).trials[0].output_tok_s == 121.0
    assert [c.level(1).trials[0].output_tok_s for c in candidates] == ([112.0, 113.0] if phase is m.Phase.VERIFY
                                                                        else [112.0])
    release = ledger.get(rid)
    assert done[0].rolled_back and release.result == "inconclusive" and said in release.reasons
    assert release.verdict == "INCONCLUSIVE (over two baseline starts)"


async def test_death_after_the_candidate_s_second_of_three_starts_resumes_with_both_and_measures_b2_and_b3(ledger):
    """A one-level verdict decided over three starts a side, killed in SECOND_START after C2 was stored (C3 under
    way): the next command rolls back, measures B2, restarts the restored unit in place and measures B3, and
    judges the candidate's C1 and C2, in order, from the ledger."""
    plan_ = ((1, 2),)
    _, rid = _dead_promote(ledger, m.Phase.SECOND_START, result=m.Result.REJECTED)
    ledger.save_state(rid, m.State(phase=m.Phase.SECOND_START, result=m.Result.REJECTED, over_starts=plan_, starts=3,
                                   candidate_starts=2).to_dict())
    ledger.save_bench(rid, "candidate", bench({1: 112.0}), unit_hash=plan().candidate_hash, bench_key="k")
    ledger.save_bench(rid, SECOND_START_ROLE, bench({1: 113.0}), unit_hash=plan().candidate_hash, bench_key="r")
    said = "INCONCLUSIVE over server starts: … a restart offset of up to 2.0 % a start could explain it"
    judge = FakeJudge(starts=StartsVerdict(JudgeOutcome.INCONCLUSIVE, (said,), RestartNoise(0.02, None, "guard")))
    b = FakeBench([bench({1: 121.0}), bench({1: 122.0})])
    a = adapters(bench_=b, judge=judge)
    done = await recover(ledger, "qwen", a, _plan_for(ledger), "status")
    assert b.calls == [([1], {1: 2})] * 2 and a.units.calls == ["restore", "restart", "restart"]
    (before, *after), candidates = judge.starts_asked[0]
    assert [x.level(1).trials[0].output_tok_s for x in (before, *after)] == [120.0, 121.0, 122.0]
    assert [c.level(1).trials[0].output_tok_s for c in candidates] == [112.0, 113.0]
    release = ledger.get(rid)
    assert done[0].rolled_back and release.verdict == "INCONCLUSIVE (over three baseline starts)"
    assert [x.role for x in ledger.benches(rid)][-2:] == ["verify", "verify"]
