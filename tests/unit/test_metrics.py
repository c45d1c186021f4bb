"""Recording streams and summarizing trials: definitions, token sources, validity rules."""

from __future__ import annotations

import json

import pytest

from deployctl.bench.metrics import (
    ClientCheck,
    StreamRecorder,
    TrialContext,
    count_retractions,
    peak_overlap,
    percentiles,
    summarize_trial,
)


def chunk(text: str, **extra: object) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": None, "matched_stop": None}
    return json.dumps({"id": "x", "object": "text_completion", "choices": [choice], "usage": None, **extra}).encode()


def usage(prompt: int, completion: int) -> bytes:
    u = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}
    return json.dumps({"id": "x", "object": "text_completion", "choices": [], "usage": u}).encode()


def record(t_sent: float, times: list[float], *, tokens: int | None = None, prompt: int = 10, max_tokens: int | None = None,
           done: bool = True, error: str | None = None):
    rec = StreamRecorder(t_sent, prompt, max_tokens if max_tokens is not None else (tokens or len(times)))
    for t in times:
        rec.feed(t, [chunk("tok")])
    tail = ([usage(prompt, tokens)] if tokens is not None else []) + ([b"[DONE]"] if done else [])
    if tail:
        rec.feed(times[-1] if times else t_sent, tail)
    return rec.finish((times[-1] if times else t_sent) + 0.001, error)


def ctx(**kw: object) -> TrialContext:
    base = dict(concurrency=2, trial=0, started_at=1000.0, wall_s=1.0, planned_requests=2, max_failure_rate=0.0)
    return TrialContext(**{**base, **kw})


def test_ttft_itl_and_usage_tokens() -> None:
    r = record(10.0, [10.2, 10.3, 10.5], tokens=6)
    s = r.sample
    assert s.ok and s.ttft_s == pytest.approx(0.2)
    assert s.itl_s == pytest.approx((0.1, 0.2))
    assert s.output_tokens == 6 and s.token_count_source == "usage"
    assert s.e2e_s == pytest.approx(0.501)


def test_without_usage_chunks_are_counted_and_flagged() -> None:
    s = record(0.0, [0.1, 0.2, 0.3]).sample
    assert s.output_tokens == 3 and s.token_count_source == "chunks"


def test_empty_text_chunks_are_not_content() -> None:
    rec = StreamRecorder(0.0, 10, 2)
    rec.feed(0.05, [chunk("")])  # a role/empty chunk must not count as the first token
    rec.feed(0.1, [chunk("a")])
    rec.feed(0.2, [chunk("b"), usage(10, 2), b"[DONE]"])
    s = rec.finish(0.2).sample
    assert s.ttft_s == pytest.approx(0.1) and s.itl_s == pytest.approx((0.1,))


def test_events_of_one_read_share_its_timestamp() -> None:
    rec = StreamRecorder(0.0, 10, 3)
    rec.feed(0.1, [chunk("a")])
    rec.feed(0.3, [chunk("b"), chunk("c"), usage(10, 3), b"[DONE]"])
    r = rec.finish(0.3)
    assert r.sample.itl_s == pytest.approx((0.2, 0.0))
    assert (r.reads, r.multi_event_reads) == (2, 1)


@pytest.mark.parametrize(
    ("payloads", "error"),
    [
        ([b'{"object":"error","message":"bad","type":"BadRequestError","code":400}'], "server_error"),
        ([b'{"error":{"message":"boom"}}'], "server_error"),
        ([b"not json"], "bad_chunk"),
    ],
)
def test_error_payloads_fail_the_request(payloads: list[bytes], error: str) -> None:
    rec = StreamRecorder(0.0, 1, 1)
    rec.feed(0.1, payloads + [b"[DONE]"])
    assert rec.finish(0.2).sample.error == error


def test_stream_without_done_is_incomplete_and_transport_error_wins() -> None:
    assert record(0.0, [0.1], tokens=1, done=False).sample.error == "incomplete_stream"
    assert record(0.0, [0.1], tokens=1, error="timeout").sample.error == "timeout"
    assert record(0.0, [], tokens=0).sample.error == "no_output"


def test_percentiles_interpolate_like_numpy() -> None:
    p = percentiles(float(x) for x in range(1, 101))
    assert (p.p50, p.p90, p.p99, p.mean) == pytest.approx((50.5, 90.1, 99.01, 50.5))
    assert percentiles([]).p50 is None


def test_peak_overlap_treats_touching_intervals_as_sequential() -> None:
    assert peak_overlap([(0, 1), (1, 2), (2, 3)]) == 1
    assert peak_overlap([(0, 3), (1, 2), (1.5, 4)]) == 3
    assert peak_overlap([]) == 0


def test_summary_follows_the_published_definitions() -> None:
    recs = [record(0.0, [0.1 + 0.01 * i for i in range(11)], tokens=11),
            record(0.0, [0.2 + 0.02 * i for i in range(11)], tokens=11)]
    t = summarize_trial(recs, ctx(wall_s=0.5))
    assert t.valid, t.invalid_reason
    assert (t.requests_ok, t.requests_failed, t.output_tokens, t.input_tokens) == (2, 0, 22, 20)
    assert t.output_tok_s == pytest.approx(44.0) and t.input_tok_s == pytest.approx(40.0)
    # per-request tok/s = (n − 1)/(e2e − ttft): (10 / 0.101) and (10 / 0.201)
    assert t.per_request_tok_s.mean == pytest.approx((10 / 0.101 + 10 / 0.201) / 2)
    assert t.tpot_s.mean == pytest.approx((0.0101 + 0.0201) / 2)
    assert t.ttft_s.p50 == pytest.approx(0.15)
    assert t.itl_s.p50 == pytest.approx(0.015)
    assert t.client["token_count_source"] == "usage" and t.client["peak_streaming"] == 2
    assert t.telemetry is None and t.notes == ()


def test_failures_over_the_limit_make_the_trial_invalid_and_are_counted_by_class() -> None:
    recs = [record(0.0, [0.1, 0.2], tokens=2), record(0.0, [0.1], error="timeout"), record(0.0, [], error="connect")]
    t = summarize_trial(recs, ctx(concurrency=1, planned_requests=3, max_failure_rate=0.5))
    assert t.failures == {"timeout": 1, "connect": 1}
    assert t.output_tokens == 2  # failed requests' tokens are not throughput
    assert t.invalid_reason.startswith("failures: 2 of 3 requests failed (66.7% > 50.0% allowed)")


def test_concurrency_never_reached_is_invalid_and_says_why() -> None:
    sequential = [record(0.0, [0.1, 0.2], tokens=2), record(0.3, [0.4, 0.5], tokens=2)]
    reason = summarize_trial(sequential, ctx()).invalid_reason
    assert "at most 1 requests were streaming at once" in reason
    overlapping = [record(0.0, [0.1, 0.4], tokens=2), record(0.0, [0.2, 0.5], tokens=2)]
    assert "only 1 requests" in summarize_trial(overlapping, ctx(planned_requests=1)).invalid_reason
    # open loop: the cap is a ceiling, not a target
    assert summarize_trial(sequential, ctx(open_loop=True)).valid


def test_concurrency_above_the_servers_capacity_is_valid_with_a_note_when_the_client_kept_up() -> None:
    # C=3 on a server that runs 2 at once: the client must keep 2 streaming, the third queues on the server.
    two_at_once = [record(0.0, [0.1, 0.4], tokens=2), record(0.0, [0.2, 0.5], tokens=2),
                   record(0.0, [0.6, 0.9], tokens=2)]
    t = summarize_trial(two_at_once, ctx(concurrency=3, planned_requests=3, server_capacity=2))
    assert t.valid, t.invalid_reason
    assert t.notes == ("above the server's capacity: it runs at most 2 requests at once (effective "
                       "max_running_requests), so 1 of the 3 wait in its queue (their wait counts in TTFT)",)
    # ... but a client that kept only one streaming is still caught
    one_at_once = [record(0.0, [0.1, 0.2], tokens=2), record(0.3, [0.4, 0.5], tokens=2), record(0.6, [0.7, 0.8], tokens=2)]
    reason = summarize_trial(one_at_once, ctx(concurrency=3, planned_requests=3, server_capacity=2)).invalid_reason
    assert "at most 1 requests were streaming at once (the server runs at most 2 at once, so 2 were due)" in reason
    assert summarize_trial(two_at_once, ctx(concurrency=2, server_capacity=48)).notes == ()


def test_retractions_and_a_busy_client_invalidate() -> None:
    recs = [record(0.0, [0.1, 0.4], tokens=2), record(0.0, [0.2, 0.5], tokens=2)]
    lines = ["[2026-04-05 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
             "#new_token_ratio: 0.5 -> 0.9", "[2026-04-05 10:00:01 TP0] Decode batch, #running-req: 64"]
    n = count_retractions(lines)
    assert n == 1
    assert "server retracted requests: 1" in summarize_trial(recs, ctx(retractions=n)).invalid_reason
    assert summarize_trial(recs, ctx(retractions=0)).valid
    busy = summarize_trial(recs, ctx(client=ClientCheck(cpu_pct=97.0, loop_lag_p99_s=0.2))).invalid_reason
    assert "used 97% of a CPU core" in busy and "lagged 200 ms" in busy
    assert summarize_trial(recs, ctx(client=ClientCheck(cpu_pct=40.0, loop_lag_p99_s=0.002))).valid


def test_interrupted_trial_is_kept_but_invalid() -> None:
    recs = [record(0.0, [0.1, 0.4], tokens=2), record(0.0, [0.2, 0.5], tokens=2)]
    t = summarize_trial(recs, ctx(planned_requests=8, interrupted=True))
    assert t.invalid_reason == "interrupted: stopped after 2 of 8 requests"
    assert len(t.samples) == 2


def test_itl_values_are_shared_objects_across_samples() -> None:
    cache: dict[float, float] = {}
    recs = []
    for _ in range(3):
        rec = StreamRecorder(0.0, 1, 3)
        for t in (0.5, 0.75, 1.0):
            rec.feed(t, [chunk("a")])
        rec.feed(1.0, [b"[DONE]"])
        recs.append(rec.finish(1.0, itl_cache=cache))
    assert recs[0].sample.itl_s[0] is recs[2].sample.itl_s[0]
