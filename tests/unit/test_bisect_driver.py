"""The bisect driver's own decisions, with its one side effect (a trial) scripted: budget, abort, exit codes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from support.promote import plan

from deployctl.decisions.bisect_report import outcome_lines
from deployctl.errors import ExitCode
from deployctl.inventory.policy import BisectPolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.starts import StartsVerdict
from deployctl.judge.stats import RestartNoise
from deployctl.flows.bisect import Bisector, observe
from deployctl.decisions.bisect_report import Step
from deployctl.decisions import machine as m
from deployctl.decisions.bisect_changes import Change
from deployctl.decisions.bisect_search import Observation, Search, Trial
from deployctl.decisions.evidence import Evidence, PromoteOutcome

CHANGES = tuple(Change(flags={f"flag-{i}": True}, texts=(f"+ --flag-{i}",)) for i in range(4))


class Scripted(Bisector):
    """Change #2 is the culprit; every trial restarts twice (once without the final keep) and benchmarks 10 s."""

    async def _trial(self, trial: Trial, changes: tuple[Change, ...], number: int) -> Step:
        passed = 2 not in trial.subset
        result = (m.Result.KEPT if trial.final else m.Result.PASSED) if passed else m.Result.REJECTED
        if number == self.abort_at:
            self.request_abort("aborted by the operator")
            result, passed = m.Result.ABORTED, False
        return Step(trial, f"p-{number}", number, result.value, Observation(passed, summary=result.value),
                    1 if result is m.Result.KEPT else 2, 10.0, 1.0)


def _run(budget: BisectPolicy, abort_at: int = 0):
    site = SimpleNamespace(name="glm5", policy=SimpleNamespace(bisect=budget))
    bisector = Scripted(None, site, "candidate", "baseline", m.Limits(), "alice", 1, None, lambda: 0.0)  # type: ignore[arg-type]
    bisector.abort_at = abort_at  # type: ignore[attr-defined]
    return asyncio.run(bisector.run(Search(4, candidate=Observation(False)), CHANGES))


def test_the_culprit_is_removed_and_the_survivors_kept() -> None:
    out = _run(BisectPolicy())
    assert [sorted(c.changes) for c in out.finding.culprits] == [[2]]
    assert out.exit_code == ExitCode.OK and out.steps[-1].trial.final and out.steps[-1].result == "kept"
    assert "flag-2: true" not in out.survivor_yaml and "flag-3: true" in out.survivor_yaml
    assert out.restarts == 2 * (len(out.steps) - 1) + 1 and out.bench_s == 10.0 * len(out.steps)


def test_a_spent_restart_budget_stops_before_the_next_trial() -> None:
    out = _run(BisectPolicy(max_restarts=4))
    assert len(out.steps) == 2 and out.finding is None
    assert out.stopped.startswith("budget spent: 4 restart(s) of 4") and out.exit_code == ExitCode.INCONCLUSIVE
    assert out.survivor_yaml is None


def test_a_stopped_search_says_what_it_had_blamed() -> None:
    out = _run(BisectPolicy(max_restarts=7))  # enough to isolate #3, not to promote the rest
    assert [sorted(c.changes) for c in out.blamed_so_far] == [[2]] and out.exit_code == ExitCode.INCONCLUSIVE
    assert any("blamed so far (by isolation): #3 + --flag-2" in line for line in outcome_lines(out))


def test_a_spent_benchmark_budget_stops_too() -> None:
    out = _run(BisectPolicy(max_bench_s=15))
    assert len(out.steps) == 2 and "20 s of benchmark of 15 s" in out.stopped


def test_an_abort_ends_the_search_with_130() -> None:
    out = _run(BisectPolicy(), abort_at=2)
    assert len(out.steps) == 2 and out.exit_code == ExitCode.INTERRUPTED and out.survivor_yaml is None


class Undecided(Bisector):
    """Every trial is inconclusive (a host too noisy to tell)."""

    async def _trial(self, trial: Trial, changes: tuple[Change, ...], number: int) -> Step:
        return Step(trial, f"p-{number}", number, m.Result.INCONCLUSIVE.value,
                    Observation(False, summary="INCONCLUSIVE: C=2 −4 % (95 % CI −15 … +8 %)", inconclusive=True),
                    2, 10.0, 1.0)


def test_an_undecided_subset_exits_11_says_could_not_decide_and_blames_nothing() -> None:
    site = SimpleNamespace(name="glm5", policy=SimpleNamespace(bisect=BisectPolicy()))
    bisector = Undecided(None, site, "candidate", "baseline", m.Limits(), "alice", 1, None, lambda: 0.0)  # type: ignore[arg-type]
    out = asyncio.run(bisector.run(Search(4, candidate=Observation(False)), CHANGES))
    assert out.exit_code == ExitCode.INCONCLUSIVE and len(out.steps) == 3
    assert out.undecided == (frozenset({0, 1}),) and not out.finding.culprits and out.survivor_yaml is None
    text = "\n".join(outcome_lines(out))
    assert "could not decide: #1 + --flag-0, #2 + --flag-1" in text
    assert "culprit:" not in text and "interaction" not in text and " fails" not in text


def test_a_budget_spent_on_an_inconclusive_subset_names_it_undecided() -> None:
    site = SimpleNamespace(name="glm5", policy=SimpleNamespace(bisect=BisectPolicy(max_restarts=4)))
    bisector = Undecided(None, site, "candidate", "baseline", m.Limits(), "alice", 1, None, lambda: 0.0)  # type: ignore[arg-type]
    out = asyncio.run(bisector.run(Search(4, candidate=Observation(False)), CHANGES))
    assert out.exit_code == ExitCode.INCONCLUSIVE and out.undecided == (frozenset({0, 1}),)


def test_a_trial_decided_inconclusive_over_two_starts_is_measured_again_and_never_summarised_as_failed() -> None:
    said = "INCONCLUSIVE over server starts: … a restart offset of up to 2.0 % a start could explain it"
    state = m.State(phase=m.Phase.DONE, result=m.Result.INCONCLUSIVE,
                    reasons=("FAIL: C=8 regressed beyond the limit", said, "inconclusive, not rejected: …"))
    evidence = Evidence(starts=StartsVerdict(JudgeOutcome.INCONCLUSIVE, (said,), RestartNoise(0.02, None, "guard")))
    seen = observe(PromoteOutcome(7, state, plan(), evidence, 1.0), CHANGES, frozenset({1}), None)  # type: ignore[arg-type]
    assert seen.inconclusive and not seen.passed and seen.summary == said
