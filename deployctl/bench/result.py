"""The benchmark result: the contract between the load engine, the judge, the ledger and the reports.

One sweep (``BenchResult``) has one ``LevelResult`` per concurrency; a level holds one or more
``TrialResult``s (the judge's unit of replication); a trial keeps its raw per-request ``RequestSample``s.
Everything round-trips through plain JSON (``to_dict`` / ``from_dict``), which is the documented format
of ``deployctl bench --json`` and of what the ledger stores.

Metric definitions (vLLM/SGLang vocabulary):
- output_tok_s: output tokens of the trial's successful requests / wall time of the trial.
- per_request_tok_s: mean over requests of (n − 1) / (e2e − ttft), n = output tokens.
- ttft: request sent → first non-empty content chunk. itl: gaps between content chunks.
- tpot: (e2e − ttft) / (n − 1).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Iterable

from deployctl.errors import InputError

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RequestSample:
    ok: bool
    error: str | None
    prompt_tokens: int
    output_tokens: int
    ttft_s: float | None
    e2e_s: float
    itl_s: tuple[float, ...] = ()
    token_count_source: str = "usage"  # "usage" (server-reported) or "chunks" (counted by the client)
    queue_s: float = 0.0  # time waiting on the client's own concurrency limit (never in TTFT)


@dataclass(frozen=True)
class Percentiles:
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None


@dataclass(frozen=True)
class LevelTelemetry:
    """Per-level GPU/process summary; ``source`` says where it came from ("nvml", "simulated", …)."""

    source: str
    gpu_power_w: float | None = None
    gpu_power_limit_w: float | None = None
    gpu_util_pct: float | None = None
    gpu_mem_used_gb: float | None = None
    process_cpu_pct: float | None = None
    process_rss_gb: float | None = None
    process_count: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialResult:
    concurrency: int
    trial: int
    started_at: float  # wall clock (epoch s), to align telemetry windows
    wall_s: float
    requests_ok: int
    requests_failed: int
    output_tokens: int
    input_tokens: int
    output_tok_s: float
    input_tok_s: float
    per_request_tok_s: Percentiles
    ttft_s: Percentiles
    itl_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    failures: dict[str, int] = field(default_factory=dict)  # error class → count
    invalid_reason: str | None = None  # set when this trial must not be judged
    samples: tuple[RequestSample, ...] = ()
    telemetry: LevelTelemetry | None = None
    # Facts worth a line that do not make the trial invalid, e.g. C above the server's capacity.
    notes: tuple[str, ...] = ()
    # The load client's self-check: its CPU share and loop lag, peak streaming requests, token source, …
    client: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None


@dataclass(frozen=True)
class LevelResult:
    concurrency: int
    trials: tuple[TrialResult, ...]


@dataclass(frozen=True)
class BenchResult:
    url: str
    model: str
    input_tokens: int
    output_tokens: int
    started_at: float
    levels: tuple[LevelResult, ...]
    server_info: dict[str, Any] = field(default_factory=dict)  # version, effective mrr, … when known
    client: str = ""  # load transport and version, for the record
    schema_version: int = SCHEMA_VERSION
    # Raw GPU/process telemetry samples taken during the sweep (deployctl.load.telemetry.samples_to_dicts),
    # when the caller sampled: kept for the ledger, summarized per trial in TrialResult.telemetry.
    telemetry_samples: tuple[dict[str, Any], ...] = ()

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lv for lv in self.levels if lv.concurrency == concurrency), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchResult":
        return _build(cls, data)


def _build(cls: type, data: Any) -> Any:
    """Rebuild nested frozen dataclasses from ``asdict`` output (lists back to tuples)."""
    if data is None:
        return None
    if cls is TrialResult:
        data = _lift_client(data)
    kwargs = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        kind = _NESTED.get((cls.__name__, f.name))
        if kind is None:
            kwargs[f.name] = tuple(value) if isinstance(value, list) and f.name in _TUPLES else value
        elif isinstance(value, list):
            kwargs[f.name] = tuple(_build(kind, v) for v in value)
        else:
            kwargs[f.name] = _build(kind, value)
    return cls(**kwargs)


def _lift_client(data: dict[str, Any]) -> dict[str, Any]:
    """Results written before ``TrialResult.client`` kept the client self-check in telemetry.details["client"]
    (with a placeholder telemetry of source "client" when there was no other)."""
    telemetry = data.get("telemetry")
    if "client" in data or not isinstance(telemetry, dict) or "client" not in telemetry.get("details", {}):
        return data
    details = dict(telemetry["details"])
    client = details.pop("client")
    lifted = None if telemetry.get("source") == "client" else {**telemetry, "details": details}
    return {**data, "client": client, "telemetry": lifted}


_TUPLES = {"itl_s", "notes", "telemetry_samples"}
_NESTED: dict[tuple[str, str], type] = {
    ("BenchResult", "levels"): LevelResult,
    ("LevelResult", "trials"): TrialResult,
    ("TrialResult", "samples"): RequestSample,
    ("TrialResult", "telemetry"): LevelTelemetry,
    **{("TrialResult", n): Percentiles for n in ("per_request_tok_s", "ttft_s", "itl_s", "tpot_s", "e2e_s")},
}


def group_levels(trials: Iterable[TrialResult]) -> tuple[LevelResult, ...]:
    by_c: dict[int, list[TrialResult]] = {}
    for t in trials:
        by_c.setdefault(t.concurrency, []).append(t)
    return tuple(LevelResult(c, tuple(ts)) for c, ts in by_c.items())


def merge_results(a: BenchResult, b: BenchResult) -> BenchResult:
    """``a`` with ``b``'s trials added (renumbered after ``a``'s) — for the judge's extra trials."""
    if (a.input_tokens, a.output_tokens) != (b.input_tokens, b.output_tokens):
        raise InputError(
            f"cannot merge a {a.input_tokens}/{a.output_tokens} sweep with a {b.input_tokens}/{b.output_tokens} one",
            hint="extra trials must use the same input and output token counts as the first ones",
        )
    merged: dict[int, list[TrialResult]] = {lv.concurrency: list(lv.trials) for lv in a.levels}
    for lv in b.levels:
        have = merged.setdefault(lv.concurrency, [])
        for t in lv.trials:
            have.append(replace(t, trial=len(have)))
    return replace(a, levels=tuple(LevelResult(c, tuple(ts)) for c, ts in merged.items()),
                   telemetry_samples=a.telemetry_samples + b.telemetry_samples)
