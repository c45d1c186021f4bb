"""Load plans: unique prompts, request counts, trials, Poisson arrivals, request bodies."""

from __future__ import annotations

import itertools
import json

import pytest

from deployctl.bench.plan import Workload, build_request, plan_sweep, random_prompt
from deployctl.inventory.policy import BenchPolicy

WORKLOAD = Workload(model="qwen", input_tokens=50, output_tokens=20, vocab_size=151_936, seed=3)


def test_default_levels_and_request_counts_follow_the_policy() -> None:
    plan = plan_sweep(BenchPolicy(), WORKLOAD)
    assert [lv.concurrency for lv in plan.levels] == [1, 4, 16, 32, 64]
    assert [lv.requests for lv in plan.levels] == [4, 8, 32, 64, 128]
    assert len(plan.warmup) == BenchPolicy().warmup_requests


def test_trials_repeat_each_level_in_order() -> None:
    plan = plan_sweep(BenchPolicy(requests_per_level=3), WORKLOAD, levels=[2, 8], trials=3)
    assert [(lv.concurrency, lv.trial, lv.requests) for lv in plan.levels] == [
        (2, 0, 3), (2, 1, 3), (2, 2, 3), (8, 0, 3), (8, 1, 3), (8, 2, 3),
    ]


def test_every_request_of_a_sweep_has_a_distinct_first_token() -> None:
    plan = plan_sweep(BenchPolicy(), WORKLOAD, trials=2)
    requests = list(plan.warmup) + [lv.request(i) for lv in plan.levels for i in range(lv.requests)]
    prompts = [json.loads(r.body)["prompt"] for r in requests]
    assert len({p[0] for p in prompts}) == len(prompts)
    assert all(len(p) == 50 for p in prompts)
    assert all(1000 <= t < 151_936 - 1000 for p in prompts for t in p)


def test_first_tokens_stay_distinct_for_thousands_of_requests_in_a_small_vocabulary() -> None:
    small = Workload(model="m", input_tokens=2, output_tokens=1, vocab_size=32_000)
    firsts = [random_prompt(small, i)[0] for i in range(20_000)]
    assert len(set(firsts)) == len(firsts)


def test_requests_are_deterministic_from_the_seed() -> None:
    assert build_request(WORKLOAD, 7) == build_request(WORKLOAD, 7)
    other = Workload(**{**WORKLOAD.__dict__, "seed": 4})
    assert build_request(other, 7).body != build_request(WORKLOAD, 7).body


def test_body_asks_for_fixed_length_streaming_with_usage() -> None:
    body = json.loads(build_request(WORKLOAD, 0).body)
    assert body["max_tokens"] == 20 and body["ignore_eos"] is True
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "qwen"


def test_text_prompt_is_sent_as_given() -> None:
    text = Workload(model="m", input_tokens=0 + 1, output_tokens=5, text_prompt="Tell me a story")
    request = build_request(text, 0)
    assert json.loads(request.body)["prompt"] == "Tell me a story"
    assert request.prompt_tokens == 0  # unknown until the server's usage says


def test_closed_loop_arrivals_are_immediate_and_poisson_has_the_asked_rate() -> None:
    closed = plan_sweep(BenchPolicy(), WORKLOAD, levels=[4]).levels[0]
    assert list(itertools.islice(closed.arrivals(), 5)) == [0.0] * 5
    open_loop = plan_sweep(BenchPolicy(), WORKLOAD, levels=[4], request_rate=20.0).levels[0]
    times = list(itertools.islice(open_loop.arrivals(), 4001))
    assert times[0] == 0.0 and times == sorted(times)
    assert 4000 / times[-1] == pytest.approx(20.0, rel=0.1)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        plan_sweep(BenchPolicy(), WORKLOAD, trials=0)
    with pytest.raises(ValueError):
        plan_sweep(BenchPolicy(), WORKLOAD, levels=[0])
    with pytest.raises(ValueError):
        Workload(model="m", input_tokens=1, output_tokens=1, vocab_size=100)
