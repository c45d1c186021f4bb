"""The startup report: what an SGLang start decided or why it failed, as value types (pure).

``StartupReport.to_dict()`` is the one serialisation (``--json``, the ledger, saved reports); its keys
are documented in docs/startup.md and consumed by judge/gates.py, startup/diff.py and live/bindings.py:
keys are added, never renamed. ``from_dict`` reads reports saved by any earlier deployctl.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Mapping

PHASES = ("arguments", "distributed_init", "load_weights", "kv_cache", "cuda_graphs", "http_server",
          "warmup", "ready")


@dataclass(frozen=True)
class Phase:
    """A start-up phase: when it began (log time) and how long it took (None when unknown).
    ``complete`` is False for the phase the server was still in when the log ended."""

    name: str
    started_at: str | None
    seconds: float | None
    complete: bool = True


@dataclass(frozen=True)
class StartupFailure:
    kind: str
    message: str
    evidence: tuple[str, ...] = ()
    rank: int | None = None
    ranks: tuple[int, ...] = ()
    exception: str | None = None
    unknown_flags: tuple[str, ...] = ()
    # What ``rank``/``ranks`` number: TP ranks, or DP ranks on a data-parallel-only server (tp 1, dp > 1),
    # whose schedulers SGLang tags by DP rank alone (``[… DP3]``).
    rank_kind: str = "TP"


@dataclass(frozen=True)
class MoeWarning:
    """An untuned fused-MoE Triton kernel config (performance, not correctness), merged over ranks."""

    kind: str  # default_config | down_config_missing_using_up_or_default | fallback_other_triton_version
    config_file: str
    E: int | None = None
    N: int | None = None
    device_name: str | None = None
    dtype: str | None = None
    block_shape: str | None = None  # as printed, e.g. "[128, 128]" (with the space)
    per_channel_quant: bool = False
    down: bool = False
    triton_dir: str | None = None
    path: str | None = None
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class SchedulerSummary:
    """The TP0 line ``max_total_num_tokens=…, max_running_requests=…, …``: what the server decided."""

    rank: int | None
    max_total_num_tokens: int
    chunked_prefill_size: int | None  # None: 0.3.x does not print it
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem_gb: float | None


@dataclass(frozen=True)
class CudaGraph:
    """Decode CUDA graph: ``captured`` | ``disabled`` | ``capturing`` | ``failed`` | ``not_reached`` |
    ``unknown``. ``batch_sizes`` is the captured list when the log shows it (largest first)."""

    state: str
    batch_sizes: tuple[int, ...] = ()
    seconds: float | None = None
    draft_captured: bool = False
    evidence: str = ""
    inferred: bool = False  # True: no capture line; a later line (summary, a capture OOM) proves the state
    reason: str | None = None  # why capture failed ("Capture cuda graph failed: <reason>")


@dataclass(frozen=True)
class PiecewiseCudaGraph:
    """Piecewise (0.5.x) / prefill (0.5.23) CUDA graph: ``captured`` | ``disabled`` | ``failed`` |
    ``not_available`` | ``not_reached`` | ``unknown``; ``auto_set`` True when an automatic rule switched it off."""

    state: str
    auto_set: bool | None = None
    reason: str | None = None
    evidence: str = ""


@dataclass(frozen=True)
class KvCache:
    tokens: int | None  # None: 0.4.x before 0.4.3.post1 prints sizes only
    dtype: str | None = None
    k_gb: float | None = None
    v_gb: float | None = None
    kv_gb: float | None = None


@dataclass(frozen=True)
class Deprecation:
    message: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Parallelism:
    """How the server is split over GPUs. From the dump's ``tp_size``/``dp_size``/``ep_size``/``pp_size``
    (``source`` ``server_args``), else the highest index in the rank prefixes plus one (``rank_prefixes``:
    a lower bound — a log cut early, or a node-1 log, shows fewer ranks). 1 means not split that way."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1
    nnodes: int = 1
    dp_attention: bool | None = None
    source: str = "server_args"

    @property
    def label(self) -> str:
        parts = [f"TP{self.tp}"] + [f"{name}{size}" for name, size in (("DP", self.dp), ("EP", self.ep),
                                                                        ("PP", self.pp)) if size > 1]
        if self.dp_attention:
            parts.append("dp-attention")
        if self.nnodes > 1:
            parts.append(f"{self.nnodes} nodes")
        return " ".join(parts)


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding: the algorithm (``EAGLE`` also for NEXTN/MTP: the dump shows it resolved) and
    the draft model (None with a draft class: the checkpoint's own MTP/NextN layers); ``source`` ``server_args``, or ``capture_lines`` when only the draft graph's capture
    lines show that there is a draft model."""

    algorithm: str | None
    draft_model: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    source: str = "server_args"
    draft_model_class: str | None = None  # Load weight end's type for the draft (Qwen3_5ForCausalLMMTP)


@dataclass(frozen=True)
class StartupReport:
    outcome: str  # ready | failed | starting
    phase: str | None = None
    phases: tuple[Phase, ...] = ()
    failure: StartupFailure | None = None
    server_args: Mapping[str, Any] | None = None
    server_args_format: str | None = None  # dataclass | dict
    scheduler: SchedulerSummary | None = None
    kv_cache: KvCache | None = None
    max_mamba_cache_size: int | None = None
    cuda_graph: CudaGraph = CudaGraph("unknown")
    piecewise_cuda_graph: PiecewiseCudaGraph = PiecewiseCudaGraph("unknown")
    moe_config_warnings: tuple[MoeWarning, ...] = ()
    deprecations: tuple[Deprecation, ...] = ()
    notices: tuple[str, ...] = ()
    ranks: tuple[str, ...] = ()
    tp_ranks: tuple[int, ...] = ()
    # The version is evidence, not a guess: ``sglang_version`` only when /server_info or the log states it,
    # or when the cues leave one release; otherwise ``sglang_version_range`` ("0.5.1 … 0.5.8.post1",
    # "0.5.10 or newer") or neither (unknown). ``sglang_version_cues`` are the cues that decided it.
    sglang_version: str | None = None
    sglang_version_source: str | None = None  # server_info | log_exact | log_inferred
    sglang_version_evidence: str | None = None
    sglang_version_range: str | None = None
    sglang_version_cues: tuple[str, ...] = ()
    listening: str | None = None
    warmup_request: str | None = None
    model_class: str | None = None
    weights_gb: float | None = None
    effective_max_running_requests_source: str | None = None  # scheduler_line | server_info
    server_info_max_running_requests: int | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    total_seconds: float | None = None
    lines: int = 0
    earlier_starts: int = 0  # starts earlier in the same stream, left out of this report
    blob_lines: int = 0  # lines journalctl showed as "[N blob data]" (read without -a): their facts are lost
    sglang_log: bool = True  # False: not one line of the input is an SGLang startup line
    format_note: str | None = None  # e.g. a format older than the supported floor
    inferred: tuple[str, ...] = ()  # facts a later line proves although their own lines are missing
    parallelism: Parallelism | None = None
    # Every rank a fatal line names ("DP3 TP5 EP5", "TP2"; a CUDA/NCCL error, a traceback, a death).
    failed_ranks: tuple[str, ...] = ()
    # Weight quantisation: Load weight end's ``quant=…, quant_algo=…`` (0.5.10+: "modelopt_fp4 (NVFP4)"),
    # the dump's ``quantization``, or a fused-MoE config's ``dtype=fp8_w8a8``; None when none names one.
    quantization: str | None = None
    quantization_source: str | None = None  # load_weight_line | server_args | moe_kernel_config
    speculative: Speculative | None = None
    sglang_version_contradiction: str | None = None  # the cues that exclude each other, when they do
    unwrapped_lines: int = 0  # lines a collector's prefix was removed from (docker compose, kubectl, journal, "> ")

    # -- the facts most callers want ----------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.outcome == "ready"

    @property
    def max_running_requests(self) -> int | None:
        """Effective: the TP0 scheduler line, else /server_info's per-DP value."""
        if self.scheduler is not None:
            return self.scheduler.max_running_requests
        return self.server_info_max_running_requests

    @property
    def configured_max_running_requests(self) -> int | None:
        """The dump's value: the CLI value or the auto one (48 with speculative decoding)."""
        value = (self.server_args or {}).get("max_running_requests")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def max_total_num_tokens(self) -> int | None:
        return self.scheduler.max_total_num_tokens if self.scheduler else None

    @property
    def max_prefill_tokens(self) -> int | None:
        return self.scheduler.max_prefill_tokens if self.scheduler else None

    @property
    def chunked_prefill_size(self) -> int | None:
        return self.scheduler.chunked_prefill_size if self.scheduler else None

    @property
    def context_len(self) -> int | None:
        return self.scheduler.context_len if self.scheduler else None

    @property
    def available_gpu_mem_gb(self) -> float | None:
        return self.scheduler.available_gpu_mem_gb if self.scheduler else None

    def phase_seconds(self, name: str) -> float | None:
        for phase in self.phases:
            if phase.name == name:
                return phase.seconds
        return None

    def to_dict(self) -> dict[str, Any]:
        return _report_to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StartupReport":
        return _report_from_dict(data)



# JSON (stable keys)

def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if is_dataclass(value):
        return _plain(value)
    return repr(value)


def _plain(obj: Any) -> dict[str, Any]:
    return {f.name: _jsonable(getattr(obj, f.name)) for f in fields(obj)}


def _report_to_dict(report: StartupReport) -> dict[str, Any]:
    out = _plain(report)
    out["ready"] = report.ready
    out["max_running_requests"] = report.max_running_requests
    out["configured_max_running_requests"] = report.configured_max_running_requests
    out["max_total_num_tokens"] = report.max_total_num_tokens
    out["max_prefill_tokens"] = report.max_prefill_tokens
    out["chunked_prefill_size"] = report.chunked_prefill_size
    out["context_len"] = report.context_len
    out["available_gpu_mem_gb"] = report.available_gpu_mem_gb
    return out


def _report_from_dict(data: Mapping[str, Any]) -> StartupReport:
    def build(cls: type, value: Any) -> Any:
        if value is None:
            return None
        names = {f.name for f in fields(cls)}
        kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in value.items() if k in names}
        return cls(**kwargs)

    names = {f.name for f in fields(StartupReport)}
    kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in names}
    kwargs["phases"] = tuple(build(Phase, p) for p in data.get("phases") or ())
    kwargs["failure"] = build(StartupFailure, data.get("failure"))
    kwargs["scheduler"] = build(SchedulerSummary, data.get("scheduler"))
    kwargs["kv_cache"] = build(KvCache, data.get("kv_cache"))
    kwargs["cuda_graph"] = build(CudaGraph, data.get("cuda_graph")) or CudaGraph("unknown")
    kwargs["piecewise_cuda_graph"] = build(PiecewiseCudaGraph, data.get("piecewise_cuda_graph")) \
        or PiecewiseCudaGraph("unknown")
    kwargs["moe_config_warnings"] = tuple(build(MoeWarning, w) for w in data.get("moe_config_warnings") or ())
    kwargs["deprecations"] = tuple(build(Deprecation, d) for d in data.get("deprecations") or ())
    kwargs["parallelism"] = build(Parallelism, data.get("parallelism"))
    kwargs["speculative"] = build(Speculative, data.get("speculative"))
    for key in ("notices", "ranks", "tp_ranks", "sglang_version_cues", "inferred", "failed_ranks"):
        kwargs[key] = tuple(data.get(key) or ())
    if "outcome" not in kwargs:
        raise ValueError("not a startup report: no 'outcome' key")
    return StartupReport(**kwargs)

