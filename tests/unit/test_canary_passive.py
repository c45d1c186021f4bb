"""The passive watch's core on exposition texts: parsing with prometheus_client, histogram deltas and
quantiles, idleness, and a window cut into the judge's trials at the window's occupancy."""

from __future__ import annotations

import pytest

from deployctl.inventory.policy import CanaryPolicy, JudgePolicy
from deployctl.judge.outcome import JudgeOutcome
from deployctl.judge.passive import Histogram, exports_what_a_watch_needs, idle, parse_scrape, window_result
from deployctl.judge.watch import Health, watch_verdict


def exposition(generated: float, running: float, queued: float = 0, ttft: tuple[float, float, float] = (0, 0, 0),
               *, itl_name: str = "sglang:inter_token_latency_seconds") -> str:
    """SGLang's names as its /metrics writes them, two tensor-parallel ranks' series for the counter."""
    b1, b2, b3 = ttft
    return f"""# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="m",tp_rank="0"}} {generated / 2}
sglang:generation_tokens_total{{model_name="m",tp_rank="1"}} {generated / 2}
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m"}} {generated / 4}
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{model_name="m"}} {running}
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{model_name="m"}} {queued}
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {b1}
sglang:time_to_first_token_seconds_bucket{{le="0.5",model_name="m"}} {b2}
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {b3}
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {b3 * 0.2}
sglang:time_to_first_token_seconds_count{{model_name="m"}} {b3}
# TYPE {itl_name} histogram
{itl_name}_bucket{{le="0.01",model_name="m"}} 0
{itl_name}_bucket{{le="+Inf",model_name="m"}} 0
{itl_name}_sum{{model_name="m"}} 0
{itl_name}_count{{model_name="m"}} 0
"""


def test_counters_sum_over_ranks_and_histograms_keep_their_buckets():
    s = parse_scrape(exposition(1000, 4, ttft=(2, 8, 10)), at=0.0)
    assert s.values["sglang:generation_tokens_total"] == 1000
    assert s.values["sglang:num_running_reqs"] == 4
    h = s.histograms["sglang:time_to_first_token_seconds"]
    assert h.buckets == ((0.1, 2.0), (0.5, 8.0), (float("inf"), 10.0)) and h.count == 10
    assert exports_what_a_watch_needs(s) is None
    assert "--enable-metrics" in exports_what_a_watch_needs(parse_scrape("", at=0.0))


def test_quantiles_of_a_histogram_delta_interpolate_as_histogram_quantile():
    before = Histogram(((0.1, 2.0), (0.5, 8.0), (float("inf"), 10.0)), 10, 2.0)
    after = Histogram(((0.1, 2.0), (0.5, 18.0), (float("inf"), 20.0)), 20, 5.0)
    delta = after.minus(before)
    assert delta.buckets == ((0.1, 0.0), (0.5, 10.0), (float("inf"), 10.0)) and delta.count == 10
    assert delta.quantile(0.5) == pytest.approx(0.1 + 0.4 * 0.5)
    assert Histogram((), 0, 0).quantile(0.5) is None


def test_an_older_sglang_name_for_the_inter_token_latency_is_read():
    s = parse_scrape(exposition(0, 0, itl_name="sglang:time_per_output_token_seconds"), at=0.0)
    assert s.histogram(("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")) is not None


def _window(rate_per_request: float, running: float, n: int = 21, queued: float = 0) -> list:
    return [parse_scrape(exposition(rate_per_request * running * i * 0.5, running, queued), at=i * 0.5)
            for i in range(n)]


def test_idle_means_nothing_running_queued_or_generated_over_the_window():
    assert idle(_window(0.0, 0.0))
    assert not idle(_window(50.0, 2.0))
    assert not idle([parse_scrape(exposition(0, 0, queued=1), at=0.0)])


def test_a_window_is_one_level_at_its_occupancy_with_a_trial_per_sub_window():
    result = window_result(_window(50.0, 4.0), trials=5, started_at=100.0)
    (level,) = result.levels
    assert level.concurrency == 4 and len(level.trials) == 5
    assert all(t.valid and t.output_tok_s == pytest.approx(200.0) for t in level.trials)
    assert all(t.per_request_tok_s.mean == pytest.approx(50.0) for t in level.trials)
    assert [t.started_at for t in level.trials] == [100.0, 102.0, 104.0, 106.0, 108.0]


def test_a_sub_window_where_users_queued_is_not_judged():
    (level,) = window_result(_window(50.0, 4.0, queued=2), trials=5, started_at=0.0).levels
    assert all(not t.valid and "queued" in (t.invalid_reason or "") for t in level.trials)


def test_a_slower_release_at_the_same_occupancy_is_degraded():
    reference = window_result(_window(50.0, 4.0), trials=5, started_at=0.0)
    now = window_result(_window(47.0, 4.0), trials=5, started_at=0.0)
    verdict = watch_verdict(reference, now, {4: [200.0, 188.0]}, JudgePolicy(limit_pct=3), CanaryPolicy())
    assert verdict.verdict is not None and verdict.verdict.outcome is JudgeOutcome.FAIL
    assert verdict.health is Health.DEGRADED


def test_a_prometheus_instant_vector_reads_as_the_same_scrape():
    from deployctl.judge.passive import scrape_from_vector

    text = exposition(1000, 4, ttft=(2, 8, 10))
    scraped = parse_scrape(text, at=0.0)
    vector = [{"metric": {"__name__": name, "job": "sglang", **labels}, "value": [0.0, str(value)]}
              for name, labels, value in (
                  ("sglang:generation_tokens_total", {"tp_rank": "0"}, 500), ("sglang:generation_tokens_total",
                                                                              {"tp_rank": "1"}, 500),
                  ("sglang:num_running_reqs", {}, 4), ("sglang:num_queue_reqs", {}, 0),
                  ("sglang:time_to_first_token_seconds_bucket", {"le": "0.1"}, 2),
                  ("sglang:time_to_first_token_seconds_bucket", {"le": "0.5"}, 8),
                  ("sglang:time_to_first_token_seconds_bucket", {"le": "+Inf"}, 10),
                  ("sglang:time_to_first_token_seconds_sum", {}, 2.0),
                  ("sglang:time_to_first_token_seconds_count", {}, 10))]
    from_prometheus = scrape_from_vector(vector, at=0.0)
    for name in ("sglang:generation_tokens_total", "sglang:num_running_reqs", "sglang:num_queue_reqs"):
        assert from_prometheus.values[name] == scraped.values[name], name
    assert from_prometheus.histograms["sglang:time_to_first_token_seconds"] == \
        scraped.histograms["sglang:time_to_first_token_seconds"]


def test_aborted_requests_are_the_users_errors_and_too_many_are_degraded():
    from dataclasses import replace

    from deployctl.judge.passive import error_check

    def with_aborted(text: str, finished: float, aborted: float) -> str:
        return text + (f'# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{{model_name="m"}} {finished}\n'
                       f'# TYPE sglang:num_aborted_requests_total counter\n'
                       f'sglang:num_aborted_requests_total{{model_name="m"}} {aborted}\n')

    scrapes = [parse_scrape(with_aborted(exposition(100.0 * i, 2), 10 * i, i), at=float(i)) for i in range(6)]
    (level,) = window_result(scrapes, trials=5, started_at=0.0).levels
    assert [(t.requests_ok, t.requests_failed) for t in level.trials] == [(9, 1)] * 5
    reference = window_result(_window(50.0, 2.0), trials=5, started_at=0.0)
    now = window_result(scrapes, trials=5, started_at=0.0)
    check = error_check(now, reference, max_rate=0.02)
    assert check.health is Health.DEGRADED and "10.0 % of its users' requests were aborted" in check.reasons[0]
    assert error_check(now, now, max_rate=0.02).health is Health.OK  # as many as at its reference
    quiet = replace(now, levels=tuple(replace(lv, trials=tuple(replace(t, requests_failed=0) for t in lv.trials))
                                      for lv in now.levels))
    assert error_check(quiet, reference, max_rate=0.02).health is Health.OK


def test_the_rate_per_running_request_is_one_over_the_mean_inter_token_gap_where_it_is_exported():
    def text(i: int) -> str:  # 20 ms gaps, ten a second; the running gauge says 4 but is not needed
        return exposition(1000.0 * i, 4).replace('inter_token_latency_seconds_sum{model_name="m"} 0',
                                                 f'inter_token_latency_seconds_sum{{model_name="m"}} {0.02 * 10 * i}') \
            .replace('inter_token_latency_seconds_count{model_name="m"} 0',
                     f'inter_token_latency_seconds_count{{model_name="m"}} {10 * i}')
    (level,) = window_result([parse_scrape(text(i), at=float(i)) for i in range(6)], trials=5, started_at=0.0).levels
    assert all(t.per_request_tok_s.mean == pytest.approx(50.0) and t.output_tok_s == pytest.approx(200.0)
               for t in level.trials)
