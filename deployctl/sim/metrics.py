"""The simulator's ``/metrics`` (with ``--enable-metrics``, as SGLang): SGLang's metric names, built with
``prometheus_client`` as SGLang builds them, in a registry of the server's own.

SGLang's names, label names and buckets, per version (``sglang/srt/metrics/collector.py``, from 0.5.10
``srt/observability/metrics_collector.py``; tests/adapters/test_sglang_conformance.py checks them against the
wheels): the ``sglang:prompt_tokens_total``, ``sglang:generation_tokens_total``, ``sglang:num_requests_total``
and ``sglang:num_aborted_requests_total`` counters and the ``sglang:time_to_first_token_seconds``,
``sglang:inter_token_latency_seconds`` and ``sglang:e2e_request_latency_seconds`` histograms are the tokenizer
manager's, labelled ``model_name`` (0.5.23: also ``engine_type``, and ``is_streaming`` on all but the
inter-token latency and the aborts); the ``sglang:num_running_reqs`` / ``num_queue_reqs`` / ``token_usage`` /
``cache_hit_rate`` / ``max_total_num_tokens`` (from 0.5.9) gauges are the TP0 scheduler's, labelled
``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank`` and, from 0.5.9, ``moe_ep_rank``. The inter-token
latency is observed once per request (its mean gap), where SGLang observes every gap: the same
distribution's centre, fewer observations.

One counter is the simulator's own: ``sim_requests_total{source}``, the generation requests served by
where they came from — ``deployctl`` when the client's User-Agent says so (deployctl's benchmark), else
``other`` — so a test can prove that a passive canary sent no synthetic request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from deployctl.sim.engine import Engine

# TokenizerMetricsCollector's default buckets; the end-to-end ones grew in 0.5.9.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.4,
               0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0)
E2E_BUCKETS_0_4 = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
                   400.0, 800.0)
E2E_BUCKETS = (*E2E_BUCKETS_0_4[:-1], 600.0, 1200.0, 1800.0, 2400.0)


@dataclass(frozen=True)
class _Labels:
    """A version's label sets: the scheduler's (TP0 of a single-node, non-disaggregated server) and the
    tokenizer manager's; ``streaming``: whether the request metrics carry ``is_streaming``."""

    scheduler: dict[str, str]
    tokenizer: dict[str, str]
    streaming: bool


def _labels(version: str, model: str) -> _Labels:
    old = version.startswith("0.4")
    scheduler = {"model_name": model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0",
                 **({} if old else {"moe_ep_rank": "0"})}
    newest = version == "0.5.23"
    return _Labels(scheduler, {"model_name": model, **({"engine_type": "unified"} if newest else {})}, newest)


def source_of(user_agent: str | None) -> str:
    return "deployctl" if (user_agent or "").startswith("deployctl") else "other"


class _EngineState(Collector):
    """What the engine knows at the moment of the scrape: its counters (the tokenizer manager's) and gauges
    (the scheduler's)."""

    def __init__(self, engine: Engine, labels: _Labels, kv_tokens: Callable[[], int], version: str) -> None:
        self.engine, self.labels, self.kv_tokens, self.version = engine, labels, kv_tokens, version

    def collect(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        e, kv = self.engine, max(self.kv_tokens(), 1)
        # The engine counts tokens over every request: the streaming series carries them, the other one is 0.
        tokenizer = [({**self.labels.tokenizer, "is_streaming": s}, share) for s, share in (("true", 1), ("false", 0))] \
            if self.labels.streaming else [(self.labels.tokenizer, 1)]
        for name, doc, value in (("sglang:prompt_tokens", "Number of prefill tokens processed.", e.prompt_tokens_total),
                                 ("sglang:generation_tokens", "Number of generation tokens processed.",
                                  e.generation_tokens_total)):
            counter = CounterMetricFamily(name, doc, labels=list(tokenizer[0][0]))
            for labels, share in tokenizer:
                counter.add_metric(list(labels.values()), value * share)
            yield counter
        gauges = [
            ("sglang:num_running_reqs", "The number of running requests.", len(e.running)),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", len(e.waiting)),
            ("sglang:token_usage", "The token usage.", round(e.kv_tokens_used() / kv, 4)),
            ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
        ]
        if not self.version.startswith("0.4"):
            gauges.append(("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", kv))
        for name, doc, value in gauges:
            gauge = GaugeMetricFamily(name, doc, labels=list(self.labels.scheduler))
            gauge.add_metric(list(self.labels.scheduler.values()), value)
            yield gauge


class SimMetrics:
    def __init__(self, engine: Engine, model: str, kv_tokens: Callable[[], int], version: str) -> None:
        self.registry = CollectorRegistry()
        self.labels = _labels(version, model)
        base = list(self.labels.tokenizer)
        streamed = base + (["is_streaming"] if self.labels.streaming else [])
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              streamed, buckets=TTFT_BUCKETS, registry=self.registry)
        self.itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             base, buckets=ITL_BUCKETS, registry=self.registry)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                             streamed, buckets=E2E_BUCKETS_0_4 if version.startswith("0.4") else E2E_BUCKETS,
                             registry=self.registry)
        self.finished = Counter("sglang:num_requests", "Number of requests processed.", streamed,
                                registry=self.registry)
        self.aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.", base,
                               registry=self.registry)
        for stream in (True, False) if self.labels.streaming else (False,):
            self.finished.labels(**self._request(stream))
        self.aborted.labels(**self.labels.tokenizer)
        self.requests = Counter("sim_requests", "Generation requests served, by source (the simulator's own).",
                                ["source"], registry=self.registry)
        for source in ("deployctl", "other"):
            self.requests.labels(source)
        self.registry.register(_EngineState(engine, self.labels, kv_tokens, version))

    def _request(self, stream: bool) -> dict[str, str]:
        """A request metric's labels: the tokenizer's, and in 0.5.23 whether it streamed."""
        streaming = {"is_streaming": "true" if stream else "false"} if self.labels.streaming else {}
        return {**self.labels.tokenizer, **streaming}

    def served(self, source: str, submitted_at: float, first_token_at: float | None, finished_at: float,
               generated: int, stream: bool) -> None:
        """One finished generation request, its times on the event loop's clock."""
        labels = self._request(stream)
        self.requests.labels(source).inc()
        self.finished.labels(**labels).inc()
        self.e2e.labels(**labels).observe(finished_at - submitted_at)
        if first_token_at is not None:
            self.ttft.labels(**labels).observe(first_token_at - submitted_at)
            if generated > 1:
                self.itl.labels(**self.labels.tokenizer).observe((finished_at - first_token_at) / (generated - 1))

    def failed(self, source: str, stream: bool) -> None:
        """One request that ended without its answer (a simulated fault, the client gone)."""
        self.requests.labels(source).inc()
        self.finished.labels(**self._request(stream)).inc()
        self.aborted.labels(**self.labels.tokenizer).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
