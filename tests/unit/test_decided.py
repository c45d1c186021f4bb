"""The verdict stored with a release, read back for the reports: levels, intervals, policy and noise."""

from __future__ import annotations

import json

from support.sweeps import sweep

from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.verdict import judge
from deployctl.decisions.decided import VERDICT_EVENT, Decided, decided
from deployctl.decisions.records import Event, Release
from deployctl.reporting.story import release_story

POLICY = JudgePolicy(limit_pct=10)
BASE = sweep({2: [1000.0, 1010.0, 995.0], 8: [3000.0, 3020.0, 2990.0]})
CAND = sweep({2: [500.0, 505.0, 498.0], 8: [1500.0, 1510.0, 1490.0]})


def _stored() -> Event:
    verdict = judge(BASE, CAND, POLICY)
    detail = Decided(verdict.outcome.value, POLICY.model_dump(mode="json"), {"8": {"sigma": 0.012, "df": 6}},
                     verdict.to_dict()).to_detail()
    return Event(1.0, "JUDGE", "note", VERDICT_EVENT, json.loads(json.dumps(detail, default=str)))  # as the ledger keeps it


def test_the_stored_verdict_reads_back_with_its_policy_and_noise() -> None:
    found = decided([Event(0.0, "BENCH", "intent", "BenchCandidate", {}), _stored()])
    assert found is not None and found.outcome == "FAIL" and found.verdict["levels"][0]["state"] == "FAIL"
    assert "limit −10 %" in found.policy_line() and "C=8: σ 1.20 % (6 df)" in found.noise_line()


def test_the_last_judgement_is_the_one_acted_on_and_none_is_none() -> None:
    first = Event(0.5, "JUDGE", "note", VERDICT_EVENT, {"outcome": "INCONCLUSIVE", "verdict": {"levels": []}})
    assert decided([first, _stored()]).outcome == "FAIL"
    assert decided([]) is None


def _release() -> Release:
    return Release(7, "glm5", "promote", "cand", "u.service", "", "h", False, {}, {}, None, "t", None, 0.0, 2.0,
                   "DONE", None, None, None, None, "FAIL", ["FAIL"], "rejected", False)


class _Bench:
    def __init__(self, role, result):
        self.role, self.result, self.release_id = role, json.loads(json.dumps(result.to_dict())), 7


def test_a_story_shows_the_stored_verdict_whatever_the_policy_today() -> None:
    benches = [_Bench("baseline", BASE), _Bench("candidate", CAND)]
    today = JudgePolicy(limit_pct=95)  # −50 % would not fail under it
    story = release_story(_release(), benches, [_stored()], policy=today)
    assert [i.state for i in story.intervals] == ["FAIL", "FAIL"] and story.intervals[0].limit_pct == 10
    c2 = story.intervals[0].interval
    assert c2 is not None and -0.52 < c2.change < -0.48 and c2.low < c2.change < c2.high
    assert story.verdict_source.startswith("verdicts as decided at the time") and "limit −10 %" in story.verdict_source
    again = release_story(_release(), benches, [_stored()], policy=today, policy_said="POLICY", recompute=True)
    assert "FAIL" not in [i.state for i in again.intervals]
    assert again.verdict_source.startswith("RECOMPUTED (--recompute) under POLICY") and "decided FAIL" in again.verdict_source
    old = release_story(_release(), benches, [], policy=today, policy_said="POLICY")
    assert old.verdict_source.startswith("recomputed under POLICY: no verdict was stored")


def test_the_judges_own_noise_account_flows_through_to_the_line() -> None:
    found = Decided("PASS", {}, {}, {"outcome": "PASS", "levels": [],
                                     "noise": {"within_sigma": 0.012, "restart_sigma": 0.02, "source": "default"}})
    line = found.noise_line()
    assert line.startswith("learned noise in force: none") and "restart_sigma 0.02" in line and "source default" in line


def test_the_judges_noise_per_level_is_shown_whole_not_cut_to_ellipses() -> None:
    # as a promote stores it (show 4 of the demo read "judge: levels …; …; …")
    noise = {"levels": [{"concurrency": c, "df": 9, "pooled_df": 9, "prior_df": 0, "shared_df": 6, "sigma": 0.0089}
                        for c in (1, 4, 16)],
             "restart_df": None, "restart_sigma": 0.005, "restart_source": "default: no restart pairs"}
    line = Decided("FAIL", {}, {}, {"outcome": "FAIL", "levels": [], "noise": noise}).noise_line()
    assert "…" not in line and "C=1: σ 0.89 % (9 df); C=4: σ 0.89 % (9 df); C=16: σ 0.89 % (9 df)" in line
    assert "restart_sigma 0.005" in line and "restart_source default: no restart pairs" in line
