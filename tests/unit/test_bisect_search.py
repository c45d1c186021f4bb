"""The bisect search on scripted oracles: which subsets it tries, and what it blames."""

from __future__ import annotations

import math
from typing import Callable

from deployctl.decisions.bisect_search import Finding, Observation, Search, Trial, worst_case_trials

Oracle = Callable[[frozenset[int]], Observation]


def drive(search: Search, oracle: Oracle) -> tuple[Finding, list[Trial]]:
    tests: list[Trial] = []
    gen = search.run()
    try:
        test = next(gen)
        while True:
            tests.append(test)
            test = gen.send(oracle(test.subset))
    except StopIteration as stop:
        return stop.value, tests


def fails_with(*needed: frozenset[int]) -> Oracle:
    """Fails when the subset holds every change of any one of ``needed`` (a benchmark says so)."""
    def oracle(subset: frozenset[int]) -> Observation:
        bad = any(group <= subset for group in needed)
        return Observation(not bad, summary="FAIL" if bad else "PASS")
    return oracle


def test_one_culprit_among_four_in_log2_plus_one_benchmarked_trials() -> None:
    for culprit in range(4):
        finding, tests = drive(Search(4, candidate=Observation(False)), fails_with(frozenset({culprit})))
        assert [c.changes for c in finding.culprits] == [frozenset({culprit})]
        assert finding.survivors == frozenset(range(4)) - {culprit} and finding.survivors_passed
        searching = [t for t in tests if not t.final]
        assert len(searching) <= math.ceil(math.log2(4)) + 1
        assert tests[-1].final and tests[-1].subset == finding.survivors


def test_one_culprit_among_many_stays_logarithmic() -> None:
    for n in (5, 8, 13):
        finding, tests = drive(Search(n, candidate=Observation(False)), fails_with(frozenset({n - 2})))
        assert finding.culprits[0].changes == {n - 2}
        assert len([t for t in tests if not t.final]) <= worst_case_trials(n)


def test_without_a_known_rejection_the_candidate_is_tried_first() -> None:
    finding, tests = drive(Search(3), fails_with(frozenset({1})))
    assert tests[0].subset == frozenset({0, 1, 2}) and not tests[0].final
    assert finding.culprits[0].changes == {1}


def test_a_candidate_that_passes_has_nothing_to_explain() -> None:
    finding, tests = drive(Search(3), fails_with(frozenset({7})))
    assert finding.candidate_passed and not finding.culprits and len(tests) == 1


def test_two_changes_that_only_hurt_together_are_an_interaction() -> None:
    for pair in ((0, 3), (1, 2), (2, 3), (0, 1)):
        finding, tests = drive(Search(5, candidate=Observation(False)), fails_with(frozenset(pair)))
        assert len(finding.culprits) == 1
        culprit = finding.culprits[0]
        assert culprit.changes == frozenset(pair) and culprit.interaction and culprit.how == "interaction"
        assert finding.survivors == frozenset(range(5)) - set(pair) and finding.survivors_passed
        # each member alone was seen to pass
        tried = {t.subset for t in tests}
        assert any(len(s) == 1 and s <= set(pair) for s in tried)


def test_two_independent_culprits_are_both_found() -> None:
    finding, tests = drive(Search(6, candidate=Observation(False)), fails_with(frozenset({1}), frozenset({4})))
    assert sorted(sorted(c.changes) for c in finding.culprits) == [[1], [4]]
    assert all(not c.interaction for c in finding.culprits)
    assert finding.survivors == {0, 2, 3, 5} and finding.survivors_passed
    assert sum(t.final for t in tests) == 2  # the first survivors still failed; the second passed


def test_a_startup_fact_blames_its_change_without_a_benchmark() -> None:
    # the Qwen3.5 case: change 1 cuts max_running_requests; the catalogue links the fact only to it
    def oracle(subset: frozenset[int]) -> Observation:
        if 1 in subset:
            return Observation(False, benchmarked=False, startup_facts=frozenset({"max_running_requests"}),
                               startup_blamed=frozenset({1}), summary="max_running_requests 48 → 26")
        return Observation(True)

    candidate = oracle(frozenset({0, 1}))
    finding, tests = drive(Search(2, candidate=candidate), oracle)
    assert [(c.changes, c.how) for c in finding.culprits] == [(frozenset({1}), "startup facts")]
    assert [t.subset for t in tests] == [frozenset({0})] and tests[0].final  # only the survivors' promote
    assert finding.survivors_passed


def test_a_wrong_startup_blame_is_withdrawn() -> None:
    # the catalogue links the fact to change 0, but change 2 moves it
    def oracle(subset: frozenset[int]) -> Observation:
        if 2 in subset:
            return Observation(False, benchmarked=False, startup_facts=frozenset({"max_running_requests"}),
                               startup_blamed=frozenset({0}) & subset, summary="48 → 26")
        return Observation(True)

    finding, tests = drive(Search(3, candidate=oracle(frozenset({0, 1, 2}))), oracle)
    assert [c.changes for c in finding.culprits] == [frozenset({2})]
    assert finding.culprits[0].how == "isolation"
    assert finding.survivors == {0, 1} and finding.survivors_passed


def test_no_op_changes_are_tried_first_on_the_passing_side() -> None:
    finding, tests = drive(Search(4, candidate=Observation(False), likely_harmless=frozenset({3})),
                           fails_with(frozenset({0})))
    assert 3 in tests[0].subset
    assert finding.culprits[0].changes == {0}


def test_every_change_guilty_leaves_nothing_to_promote() -> None:
    finding, tests = drive(Search(1, candidate=Observation(False)), fails_with(frozenset({0})))
    assert finding.culprits[0].changes == {0} and not finding.survivors
    assert finding.survivors_passed is None and tests == []


def inconclusive_first(oracle: Oracle, *subsets: frozenset[int], times: int = 1) -> Oracle:
    """``oracle``, but the first ``times`` trials of each of ``subsets`` are inconclusive (a noisy host)."""
    seen: dict[frozenset[int], int] = {}

    def scripted(subset: frozenset[int]) -> Observation:
        seen[subset] = seen.get(subset, 0) + 1
        if subset in subsets and seen[subset] <= times:
            return Observation(False, summary="INCONCLUSIVE", inconclusive=True)
        return oracle(subset)
    return scripted


def test_an_inconclusive_subset_is_measured_again_and_never_counted_as_failed() -> None:
    # four harmless changes but #4; the first probe ({#1, #2}) is inconclusive once
    oracle = inconclusive_first(fails_with(frozenset({3})), frozenset({0, 1}))
    finding, tests = drive(Search(4, candidate=Observation(False)), oracle)
    assert [c.changes for c in finding.culprits] == [frozenset({3})]
    assert tests[0].subset == tests[1].subset == frozenset({0, 1})
    assert tests[1].purpose.startswith("re-measure (1 of 2): ") and finding.survivors_passed


def test_a_harmless_candidate_first_inconclusive_passes_on_the_remeasure_and_nothing_is_blamed() -> None:
    everything = frozenset({0, 1})
    finding, tests = drive(Search(2), inconclusive_first(fails_with(frozenset({7})), everything))
    assert finding.candidate_passed and not finding.culprits and len(tests) == 2


def test_a_subset_that_stays_inconclusive_is_undecided_and_nobody_is_blamed() -> None:
    oracle = inconclusive_first(fails_with(frozenset({3})), frozenset({0, 1}), times=99)
    finding, tests = drive(Search(4, candidate=Observation(False)), oracle)
    assert finding.undecided == (frozenset({0, 1}),) and not finding.culprits
    assert len(tests) == 3 and finding.survivors_passed is None  # the trial and two re-measurements
    # nothing of the evidence says an inconclusive subset "fails"
    assert all(not c.interaction for c in finding.culprits)


def test_an_inconclusive_candidate_is_not_taken_as_its_rejection() -> None:
    finding, tests = drive(Search(2, candidate=Observation(False, inconclusive=True)), fails_with(frozenset({7})))
    assert tests[0].subset == frozenset({0, 1}) and finding.candidate_passed
