"""Stalls: seen in a trial's request timings (bench.stalls), sorted out of a level's trials (judge.stalls), and
what judge() and the baseline's rounds do with them."""

from __future__ import annotations

from dataclasses import replace

from support.sweeps import sweep, trial

from deployctl.bench.records import RequestRecord
from deployctl.bench.result import RequestSample
from deployctl.bench.stalls import find_stall
from deployctl.inventory.policy import JudgePolicy
from deployctl.judge.noise import aa_samples, baseline_top_up
from deployctl.judge.outcome import LevelState, JudgeOutcome
from deployctl.judge.stalls import MAX_STALL_EXTRA, sort_stalls, stall_sigma
from deployctl.judge.verdict import judge

ITL = 0.02
TOKENS = 100


def request(t_sent: float, ttft: float, itl: float = ITL, *, pause_at: int | None = None,
            pause: float = 0.0) -> RequestRecord:
    gaps = tuple(itl + (pause if k == pause_at else 0.0) for k in range(TOKENS - 1))
    e2e = ttft + sum(gaps)
    sample = RequestSample(ok=True, error=None, prompt_tokens=1000, output_tokens=TOKENS, ttft_s=ttft, e2e_s=e2e,
                           itl_s=gaps)
    return RequestRecord(sample, t_sent, t_sent + ttft, t_sent + e2e, TOKENS, 0, TOKENS)


def batch(tail_delay: float = 0.0, *, tail_itl: float = ITL, c: int = 64) -> list[RequestRecord]:
    """A closed-loop level's first wave: C requests sent at once, the second half admitted ``tail_delay`` later."""
    return [request(0.0, 0.1 + (tail_delay if i >= c // 2 else 0.0), tail_itl if i >= c // 2 else ITL)
            for i in range(c)]


# --- what the timings show (bench.stalls) -------------------------------------------------------------------

def test_a_batch_whose_tail_is_admitted_late_at_the_same_itl_stalled():
    assert find_stall(batch(0.9)) == "stalled 0.9 s before admitting the batch's tail"


def test_a_clean_batch_and_a_consistently_slower_one_did_not_stall():
    assert find_stall(batch()) is None
    slower = [request(0.0, 0.15, 1.1 * ITL) for _ in range(64)]
    assert find_stall(slower) is None


def test_a_late_tail_is_a_stall_whatever_the_heads_pace_while_it_waited():
    # The head decodes in a smaller batch while the tail is held: its tokens come faster than the tail's.
    assert find_stall(batch(0.9, tail_itl=2 * ITL)) == "stalled 0.9 s before admitting the batch's tail"


def test_a_common_gap_while_every_stream_was_open_is_a_stall_and_a_requests_own_ttft_is_not():
    paused = [request(0.0, 0.1, pause_at=50, pause=1.2) for _ in range(8)]
    assert find_stall(paused) == "stalled 1.2 s: no stream delivered a token while requests were in flight"
    # One request at a time (C=1): the wait for the next request's first token is its TTFT, no stream was open.
    one_by_one = [request(3.0 * k, 0.6) for k in range(6)]
    assert find_stall(one_by_one) is None


# --- which trials are set aside (judge.stalls) --------------------------------------------------------------

def pairs(values: list[float], c: int = 64, stalled: dict[int, str] | None = None):
    return [(replace(trial(c, i, v), stall=(stalled or {}).get(i)), v) for i, v in enumerate(values)]


def test_a_stall_among_two_trials_asks_one_more_before_deciding():
    sort = sort_stalls(pairs([5230.0, 3350.0]), 64, "candidate")
    assert sort.more is not None and "trial 2 read −35.9 %" in sort.more
    assert sort.set_aside == () and len(sort.kept) == 2 and sort.extra == 1


def test_a_stall_among_clean_trials_is_set_aside_with_why():
    sort = sort_stalls(pairs([5230.0, 3350.0, 5219.0]), 64, "candidate")
    assert sort.values == [5230.0, 5219.0] and sort.more is None
    assert sort.set_aside == ("C=64 candidate trial 2 read −35.9 % against the side's best trial, beyond what the "
                              "noise allows (a stall): set aside",)


def test_a_trial_whose_timings_stalled_is_set_aside_by_name():
    stalled = {1: "stalled 0.9 s before admitting the batch's tail"}
    sort = sort_stalls(pairs([5230.0, 5100.0, 5219.0], stalled=stalled), 64, "baseline")
    assert sort.set_aside == ("C=64 baseline trial 2 stalled 0.9 s before admitting the batch's tail: set aside",)


def test_a_consistent_slowdown_is_never_set_aside():
    assert sort_stalls(pairs([4700.0, 4690.0, 4712.0]), 64, "candidate").kept == tuple(pairs([4700.0, 4690.0, 4712.0]))
    every = {i: "stalled 3.0 s before admitting the batch's tail" for i in range(3)}  # C above the capacity
    sort = sort_stalls(pairs([4700.0, 4690.0, 4712.0], stalled=every), 64, "candidate")
    assert len(sort.kept) == 3 and sort.set_aside == () and sort.more is None


def test_the_gap_grows_with_the_sweeps_noise():
    noisy = [[900.0, 1100.0, 1000.0, 950.0, 1050.0]] * 5  # σ ≈ 8 %: 900 is noise there, not a stall
    sigma = stall_sigma(noisy)
    assert 0.06 < sigma < 0.12
    assert sort_stalls(pairs(noisy[0]), 8, "baseline", sigma=sigma).set_aside == ()
    assert sort_stalls(pairs(noisy[0]), 8, "baseline").set_aside != ()  # at the floor alone it would be
    assert stall_sigma([[1000.0, 640.0], [1000.0, 1010.0], [995.0, 1003.0], [1001.0, 990.0]]) < 0.03  # one stall


# --- judge() and the baseline's rounds ----------------------------------------------------------------------

POLICY = JudgePolicy(limit_pct=5, min_trials=2, max_trials=5)
BASE = [5230.0, 5251.0, 5219.0, 5244.0, 5236.0]


def test_a_neutral_candidate_with_a_stall_gets_one_more_trial_then_passes_with_the_stall_named():
    base = sweep({64: BASE})
    first = judge(base, sweep({64: [5238.0, 3350.0]}), POLICY)
    assert first.outcome is JudgeOutcome.INCONCLUSIVE and first.more_trials == {64: 1}
    assert "one more trial before deciding" in first.levels[0].reason
    cand = sweep({64: [5238.0, 3350.0, 5226.0, 5241.0]})
    final = judge(base, cand, POLICY)
    assert final.outcome is JudgeOutcome.PASS
    assert final.levels[0].candidate_trials == 3
    assert final.reasons[-1].startswith("C=64 candidate trial 3 read −36.1 %") and final.reasons[-1].endswith(": set aside")


def test_a_regression_with_a_stall_is_still_failed():
    cand = sweep({64: [4710.0, 3020.0, 4698.0, 4705.0]})
    verdict = judge(sweep({64: BASE}), cand, POLICY)
    assert verdict.outcome is JudgeOutcome.FAIL
    assert verdict.levels[0].state is LevelState.FAIL


def test_set_aside_trials_do_not_spend_the_budget():
    cand = sweep({64: [5238.0, 3350.0, 5226.0, 3340.0, 5230.0]})  # five run, two stalled: max_trials not spent
    verdict = judge(sweep({64: BASE}), cand, POLICY)
    assert verdict.levels[0].candidate_trials == 3
    assert verdict.outcome in (JudgeOutcome.PASS, JudgeOutcome.INCONCLUSIVE)
    if verdict.outcome is JudgeOutcome.INCONCLUSIVE:
        assert verdict.more_trials == {64: 1}
    assert MAX_STALL_EXTRA == 2


def test_the_baseline_gets_one_more_trial_for_a_stall_and_does_not_learn_it_as_noise():
    policy = JudgePolicy()
    measured = sweep({c: [5230.0, 5244.0] for c in (1, 4, 16, 32)} | {64: [5238.0, 3350.0]})
    assert baseline_top_up(policy, measured, {}).get(64) == 1
    assert aa_samples(sweep({64: [5238.0, 3350.0, 5226.0]}), "output_tok_s") == {64: [5238.0, 5226.0]}


def test_two_stalled_trials_of_two_ask_one_more_and_three_are_the_servers_behaviour():
    two = {i: "stalled 0.9 s before admitting the batch's tail" for i in range(2)}
    assert sort_stalls(pairs([3350.0, 3340.0], stalled=two), 64, "candidate").more is not None
    three = {i: "stalled 0.9 s before admitting the batch's tail" for i in range(3)}
    sort = sort_stalls(pairs([3350.0, 3340.0, 5230.0], stalled=two), 64, "candidate")
    assert sort.more is not None  # two stalls and one clean trial: no clean majority yet
    sort = sort_stalls(pairs([3350.0, 3340.0, 5230.0, 5219.0, 5241.0], stalled=two), 64, "candidate")
    assert len(sort.set_aside) == 2 and sort.values == [5230.0, 5219.0, 5241.0]
    assert sort_stalls(pairs([3350.0, 3340.0, 3345.0], stalled=three), 64, "candidate").more is None


def test_three_stalled_candidate_trials_over_a_clean_baseline_ask_one_more():
    stalled = [replace(trial(64, i, 3350.0 - i), stall="stalled 0.9 s before admitting the batch's tail") for i in range(3)]
    first = judge(sweep({64: BASE}), sweep({64: stalled}), POLICY)
    assert first.outcome is JudgeOutcome.INCONCLUSIVE and first.more_trials == {64: 1}
    both = [replace(t, stall="stalled 3.0 s before admitting the batch's tail") for t in sweep({64: BASE}).levels[0].trials]
    assert judge(sweep({64: both}), sweep({64: stalled}), POLICY).outcome is JudgeOutcome.FAIL  # the server's behaviour
    fourth = judge(sweep({64: BASE}), sweep({64: stalled + [replace(stalled[0], trial=3)]}), POLICY)
    assert fourth.outcome is JudgeOutcome.FAIL  # four in a row: what the candidate does


def test_trials_whose_timings_stalled_need_no_clean_majority_only_two_clean_trials():
    seen = {i: "stalled 0.9 s before admitting the batch's tail" for i in (0, 2, 3)}
    sort = sort_stalls(pairs([3350.0, 5230.0, 3340.0, 3345.0, 5219.0], stalled=seen), 64, "candidate")
    assert sort.values == [5230.0, 5219.0] and len(sort.set_aside) == 3
    by_value = sort_stalls(pairs([3350.0, 5230.0, 3340.0, 3345.0, 5219.0]), 64, "candidate")
    assert by_value.more is not None and by_value.set_aside == ()  # told by value only: the majority decides
