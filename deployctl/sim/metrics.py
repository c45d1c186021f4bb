"""The simulator's ``/metrics`` (with ``--enable-metrics``, as SGLang): SGLang's metric names, built with
``prometheus_client`` as SGLang builds them, in a registry of the server's own.

SGLang's names and buckets (python/sglang/srt/metrics/collector.py): the ``sglang:prompt_tokens_total``,
``sglang:generation_tokens_total``, ``sglang:num_requests_total`` and ``sglang:num_aborted_requests_total``
counters, the ``sglang:num_running_reqs`` / ``num_queue_reqs`` /
``token_usage`` / ``cache_hit_rate`` gauges, the ``sglang:time_to_first_token_seconds``,
``sglang:inter_token_latency_seconds`` and ``sglang:e2e_request_latency_seconds`` histograms, each labelled
``model_name``. The inter-token latency is observed once per request (its mean gap), where SGLang observes
every gap: the same distribution's centre, fewer observations.

One counter is the simulator's own: ``sim_requests_total{source}``, the generation requests served by
where they came from — ``deployctl`` when the client's User-Agent says so (deployctl's benchmark), else
``other`` — so a test can prove that a passive canary sent no synthetic request.
"""

from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from deployctl.sim.engine import Engine

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 15.0,
                20.0, 25.0, 30.0)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.06, 0.08, 0.1, 0.2, 0.3,
               0.4, 0.5, 0.75, 1.0, 2.0)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0, 400.0)


def source_of(user_agent: str | None) -> str:
    return "deployctl" if (user_agent or "").startswith("deployctl") else "other"


class _EngineState(Collector):
    """What the engine knows at the moment of the scrape: its counters and gauges."""

    def __init__(self, engine: Engine, model: str, kv_tokens: Callable[[], int]) -> None:
        self.engine, self.model, self.kv_tokens = engine, model, kv_tokens

    def collect(self) -> Iterable[CounterMetricFamily | GaugeMetricFamily]:
        e, kv = self.engine, max(self.kv_tokens(), 1)
        for name, doc, value in (("sglang:prompt_tokens", "Number of prefill tokens processed.", e.prompt_tokens_total),
                                 ("sglang:generation_tokens", "Number of generation tokens processed.",
                                  e.generation_tokens_total)):
            counter = CounterMetricFamily(name, doc, labels=["model_name"])
            counter.add_metric([self.model], value)
            yield counter
        for name, doc, value in (
            ("sglang:num_running_reqs", "The number of running requests.", len(e.running)),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", len(e.waiting)),
            ("sglang:token_usage", "The token usage.", round(e.kv_tokens_used() / kv, 4)),
            ("sglang:max_total_num_tokens", "Maximum total number of tokens.", kv),
            ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["model_name"])
            gauge.add_metric([self.model], value)
            yield gauge


class SimMetrics:
    def __init__(self, engine: Engine, model: str, kv_tokens: Callable[[], int]) -> None:
        self.registry = CollectorRegistry()
        self.model = model
        labels = ["model_name"]
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              labels, buckets=TTFT_BUCKETS, registry=self.registry)
        self.itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             labels, buckets=ITL_BUCKETS, registry=self.registry)
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                             labels, buckets=E2E_BUCKETS, registry=self.registry)
        self.finished = Counter("sglang:num_requests", "Number of requests finished (aborted ones included).",
                                labels, registry=self.registry)
        self.aborted = Counter("sglang:num_aborted_requests", "Number of requests aborted.", labels,
                               registry=self.registry)
        self.finished.labels(model)
        self.aborted.labels(model)
        self.requests = Counter("sim_requests", "Generation requests served, by source (the simulator's own).",
                                ["source"], registry=self.registry)
        for source in ("deployctl", "other"):
            self.requests.labels(source)
        self.registry.register(_EngineState(engine, model, kv_tokens))

    def served(self, source: str, submitted_at: float, first_token_at: float | None, finished_at: float,
               generated: int) -> None:
        """One finished generation request, its times on the event loop's clock."""
        self.requests.labels(source).inc()
        self.finished.labels(self.model).inc()
        self.e2e.labels(self.model).observe(finished_at - submitted_at)
        if first_token_at is not None:
            self.ttft.labels(self.model).observe(first_token_at - submitted_at)
            if generated > 1:
                self.itl.labels(self.model).observe((finished_at - first_token_at) / (generated - 1))

    def failed(self, source: str) -> None:
        """One request that ended without its answer (a simulated fault, the client gone)."""
        self.requests.labels(source).inc()
        self.finished.labels(self.model).inc()
        self.aborted.labels(self.model).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
