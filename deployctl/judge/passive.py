"""The passive watch (pure): a release judged from the metrics its server already exports under its users'
load, never from a request of ours.

SGLang (``--enable-metrics``) serves Prometheus metrics at ``/metrics``: token counters, the running and
queued requests, and TTFT / inter-token / end-to-end latency histograms. A run of scrapes over a window
(``Scrape``, parsed with ``prometheus_client``'s own parser) becomes a ``BenchResult`` the judge already
knows how to read:

- one level per occupancy: ``concurrency`` is the window's mean number of running requests, rounded, so a
  release is only ever compared with itself at the same occupancy (the reference has levels of its own);
- one trial per sub-window (the judge's unit of replication): ``output_tok_s`` is the tokens per second
  *per running request* times that occupancy — the aggregate the server gives at exactly that many running
  requests, whatever the users' count did within it. Per running request is 1 / the mean inter-token gap
  (the ITL histogram's sum and count over the sub-window); without one, the generated tokens per second
  over the running gauge's mean (a few samples of a gauge that dips between requests: noisier — on the
  simulator sub-windows then varied by up to 10 %). TTFT / ITL / E2E percentiles come from the
  histogram buckets' increase over the sub-window (as PromQL's ``histogram_quantile`` interpolates);
- a sub-window in which users queued at more than half its scrapes (``QUEUED_SHARE``: the server was
  saturated), or in which nothing was generated, is not judged (``invalid_reason``); a request seen waiting
  at one scrape is the scheduler admitting it at its next step, not saturation, and does not count against
  the sub-window;
- a window is *steady* when every sub-window's mean number of running requests is within ``STEADY_BAND``
  (±0.5 requests, or ±10 % of the level above 5) of the level it is filed under (``unsteady`` says why not):
  only a steady window may become a release's reference at that level (users leaving mid-window make a
  half-empty window whose rounded occupancy is not what it measured);
- requests the server aborted (``sglang:num_aborted_requests_total``, newer SGLang) are its errors:
  ``error_check`` makes a window degraded where more of them failed than the policy allows.

``idle`` says whether the server served nobody over the window (nothing running, queued or generated):
only then may a synthetic sweep measure it.

Names change between SGLang versions (``inter_token_latency_seconds`` was ``time_per_output_token_seconds``);
each metric is read by its first name the server exports, and a missing one is left out, never assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

from deployctl.bench.result import BenchResult, LevelResult, Percentiles, TrialResult
from deployctl.judge.watch import CheckVerdict, Health

GENERATION = ("sglang:generation_tokens_total",)
PROMPT = ("sglang:prompt_tokens_total",)
RUNNING = ("sglang:num_running_reqs",)
QUEUED = ("sglang:num_queue_reqs",)
TTFT = ("sglang:time_to_first_token_seconds",)
ITL = ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds")
E2E = ("sglang:e2e_request_latency_seconds",)
FINISHED = ("sglang:num_requests_total",)
ABORTED = ("sglang:num_aborted_requests_total",)
PASSIVE_URL = "passive:/metrics"  # the BenchResult's url: where a passive measurement came from
QUEUED_SHARE = 0.5  # a sub-window with users queued at more of its scrapes than this share was saturated
STEADY_BAND = (0.5, 0.10)  # a steady sub-window's occupancy is within max(0.5, 10 % of the level) of the level


@dataclass(frozen=True)
class Histogram:
    buckets: tuple[tuple[float, float], ...]  # (upper bound, cumulative count), +Inf last
    count: float
    total: float  # the observations' sum

    def minus(self, earlier: "Histogram") -> "Histogram":
        before = dict(earlier.buckets)
        return Histogram(tuple((le, c - before.get(le, 0.0)) for le, c in self.buckets), self.count - earlier.count,
                         self.total - earlier.total)

    def quantile(self, q: float) -> float | None:
        """``histogram_quantile``: linear within the bucket the rank falls in; None without observations."""
        if self.count <= 0 or not self.buckets:
            return None
        rank, lower, below = q * self.count, 0.0, 0.0
        for le, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(le):
                    return lower  # beyond the highest finite bound: that bound is all we know
                inside = cumulative - below
                return lower + (le - lower) * ((rank - below) / inside if inside > 0 else 1.0)
            lower, below = le, cumulative
        return lower


@dataclass(frozen=True)
class Scrape:
    at: float  # the scraper's clock, seconds
    values: Mapping[str, float]  # counters and gauges, summed over their label sets
    histograms: Mapping[str, Histogram] = field(default_factory=dict)

    def first(self, names: Sequence[str]) -> float | None:
        return next((self.values[n] for n in names if n in self.values), None)

    def histogram(self, names: Sequence[str]) -> Histogram | None:
        return next((self.histograms[n] for n in names if n in self.histograms), None)


def parse_scrape(text: str, at: float) -> Scrape:
    """One ``/metrics`` exposition; every series of a family summed (SGLang labels them per rank)."""
    values: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if family.type == "histogram":
                if sample.name.endswith("_bucket"):
                    le = float(sample.labels["le"])
                    slot = buckets.setdefault(family.name, {})
                    slot[le] = slot.get(le, 0.0) + sample.value
                elif sample.name.endswith("_sum"):
                    sums[family.name] = sums.get(family.name, 0.0) + sample.value
                elif sample.name.endswith("_count"):
                    counts[family.name] = counts.get(family.name, 0.0) + sample.value
            elif family.type in ("counter", "gauge", "untyped") and not sample.name.endswith("_created"):
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
    histograms = {name: Histogram(tuple(sorted(b.items())), counts.get(name, 0.0), sums.get(name, 0.0))
                  for name, b in buckets.items()}
    return Scrape(at, values, histograms)


def scrape_from_vector(vector: Sequence[Mapping[str, Any]], at: float) -> Scrape:
    """A Prometheus query API instant vector (``data.result``: ``{"metric": {...}, "value": [t, "v"]}``) of
    the server's series, as one ``Scrape``: the same sums over label sets as ``parse_scrape``."""
    values: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    for item in vector:
        labels, value = item["metric"], float(item["value"][1])
        name = labels.get("__name__", "")
        values[name] = values.get(name, 0.0) + value
        if name.endswith("_bucket") and "le" in labels:
            slot = buckets.setdefault(name[:-len("_bucket")], {})
            le = float(labels["le"])
            slot[le] = slot.get(le, 0.0) + value
    histograms = {base: Histogram(tuple(sorted(b.items())), values.get(f"{base}_count", 0.0),
                                  values.get(f"{base}_sum", 0.0)) for base, b in buckets.items()}
    return Scrape(at, values, histograms)


def exports_what_a_watch_needs(scrape: Scrape) -> str | None:
    """Why a passive watch cannot read this server (the metric it lacks), or None when it can."""
    for what, names in (("generated tokens", GENERATION), ("running requests", RUNNING), ("queued requests", QUEUED)):
        if scrape.first(names) is None:
            return f"its /metrics has no {names[0]} ({what}): start SGLang with --enable-metrics"
    return None


def idle(scrapes: Sequence[Scrape]) -> bool:
    """Nobody was served over the window: nothing running or queued at any scrape, nothing generated."""
    generated = [s.first(GENERATION) or 0.0 for s in scrapes]
    return all((s.first(RUNNING) or 0.0) == 0 and (s.first(QUEUED) or 0.0) == 0 for s in scrapes) \
        and max(generated) - min(generated) == 0


def _percentiles(h: Histogram | None) -> Percentiles:
    if h is None or h.count <= 0:
        return Percentiles()
    return Percentiles(p50=h.quantile(0.5), p90=h.quantile(0.9), p99=h.quantile(0.99), mean=h.total / h.count)


def _delta(later: Scrape, earlier: Scrape, names: Sequence[str]) -> Histogram | None:
    a, b = later.histogram(names), earlier.histogram(names)
    return a.minus(b) if a is not None and b is not None else None


def occupancy(scrapes: Sequence[Scrape]) -> float:
    """The mean number of running requests over the scrapes."""
    return fmean(s.first(RUNNING) or 0.0 for s in scrapes) if scrapes else 0.0


def _parts(scrapes: Sequence[Scrape], trials: int) -> list[Sequence[Scrape]]:
    """``scrapes`` (in time order) cut into ``trials`` sub-windows of equal scrape count, each sharing its
    first scrape with the one before; none when there are fewer than two scrapes a sub-window."""
    per = (len(scrapes) - 1) // max(trials, 1)
    return [scrapes[i * per:(i + 1) * per + 1] for i in range(trials if per >= 1 else 0)]


def window_level(scrapes: Sequence[Scrape]) -> int:
    """The level a window is filed under: its mean number of running requests, rounded (at least 1)."""
    return max(1, round(occupancy(scrapes)))


def unsteady(scrapes: Sequence[Scrape], trials: int) -> str | None:
    """Why the window's occupancy was not steady enough for it to be a reference at its level, in words;
    None when it was: every sub-window's mean running requests within ``STEADY_BAND`` of the level."""
    level = window_level(scrapes)
    band = max(STEADY_BAND[0], STEADY_BAND[1] * level)
    means = [occupancy(part) for part in _parts(scrapes, trials)]
    if all(abs(m - level) <= band for m in means):
        return None
    return (f"its occupancy was not steady (sub-windows at {', '.join(f'{m:.1f}' for m in means)} running "
            f"requests; a reference needs every one within ±{band:g} of {level})")


def window_result(scrapes: Sequence[Scrape], trials: int, started_at: float, model: str = "") -> BenchResult:
    """``scrapes`` (in time order) cut into ``trials`` sub-windows of equal scrape count → one level at the
    window's occupancy, one trial per sub-window. Fewer than two scrapes a sub-window: no level."""
    level = window_level(scrapes)
    out = [_trial(part, level, i + 1, started_at + part[0].at - scrapes[0].at)
           for i, part in enumerate(_parts(scrapes, trials))]
    levels = (LevelResult(level, tuple(out)),) if out else ()
    return BenchResult(url=PASSIVE_URL, model=model, input_tokens=0, output_tokens=0, started_at=started_at,
                       levels=levels)


def _counted(later: Scrape, earlier: Scrape, names: Sequence[str]) -> int | None:
    a, b = later.first(names), earlier.first(names)
    return int(a - b) if a is not None and b is not None else None


def error_check(now: BenchResult, reference: BenchResult | None, max_rate: float) -> CheckVerdict:
    """Users' requests the server aborted over the window (``sglang:num_aborted_requests_total``, where it
    exports it): more than ``max_rate`` of them, and more than at the reference, is degraded."""
    rate, ref = _abort_rate(now), _abort_rate(reference) if reference is not None else 0.0
    if rate is None or rate <= max_rate or rate <= (ref or 0.0) + max_rate:
        return CheckVerdict(Health.OK)
    return CheckVerdict(Health.DEGRADED, (f"{100 * rate:.1f} % of its users' requests were aborted (reference "
                                          f"{100 * (ref or 0.0):.1f} %, allowed {100 * max_rate:g} %)",))


def _abort_rate(result: BenchResult) -> float | None:
    trials = [t for lv in result.levels for t in lv.trials]
    total = sum(t.requests_ok + t.requests_failed for t in trials)
    return sum(t.requests_failed for t in trials) / total if total else None


def _trial(part: Sequence[Scrape], level: int, index: int, started_at: float) -> TrialResult:
    first, last = part[0], part[-1]
    wall = max(last.at - first.at, 1e-9)
    generated = (last.first(GENERATION) or 0.0) - (first.first(GENERATION) or 0.0)
    prompt = (last.first(PROMPT) or 0.0) - (first.first(PROMPT) or 0.0)
    running = occupancy(part)
    waiting = [s.first(QUEUED) or 0.0 for s in part]
    queued_at = sum(1 for w in waiting if w > 0)
    itl = _delta(last, first, ITL)
    if itl is not None and itl.count > 0 and itl.total > 0:
        per_request = itl.count / itl.total  # 1 / the mean inter-token gap: no sampling of the running gauge
    else:
        per_request = generated / wall / running if running > 0 else 0.0
    e2e = _delta(last, first, E2E)
    aborted = _counted(last, first, ABORTED) or 0
    finished = _counted(last, first, FINISHED)
    ok = max(0, finished - aborted) if finished is not None else int(e2e.count) if e2e is not None else 0
    invalid = None
    if generated <= 0 or running <= 0:
        invalid = "nothing was generated in this part of the window (no users)"
    elif queued_at > QUEUED_SHARE * len(part):
        invalid = (f"users queued at {queued_at} of {len(part)} scrapes (up to {max(waiting):g} waiting): the server "
                   "was saturated, its speed then is not comparable")
    return TrialResult(
        concurrency=level, trial=index, started_at=started_at, wall_s=wall,
        requests_ok=ok, requests_failed=aborted, output_tokens=int(generated), input_tokens=int(prompt),
        output_tok_s=per_request * level, input_tok_s=prompt / wall, per_request_tok_s=Percentiles(mean=per_request),
        ttft_s=_percentiles(_delta(last, first, TTFT)), itl_s=_percentiles(itl),
        tpot_s=Percentiles(), e2e_s=_percentiles(e2e), invalid_reason=invalid,
    )
