"""Startup facts from an SGLang startup log: an incremental, pure parser.

Feed it lines as they come (from the journal or a file); ask for a ``StartupReport`` at any time::

    parser = StartupParser()
    for line in lines:
        parser.feed(line)
    report = parser.report()          # or: report = parse_lines(lines)
    report.outcome                    # 'ready' | 'failed' | 'starting'
    report.max_running_requests       # effective (TP0 scheduler summary), not the dump's value

The parser keeps facts, not lines: its memory does not grow with the log (a bounded window of recent
lines is kept as evidence for a failure). It does no I/O and reads no clock; times come from the log's
own timestamps. Exact formats per SGLang version: docs/startup.md and the facts it cites.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime
from typing import Any, Iterable, Mapping

from deployctl.startup.failure import (
    ARGPARSE_ERROR_RE,
    EXCEPTION_LINE_RE,
    GENERIC_KINDS,
    RANK_DIED_RE,
    classify_exception,
    exception_message,
    unknown_flags,
)
from deployctl.startup.lines import EMBEDDED_RE as _EMBEDDED_RE
from deployctl.startup.lines import Rank, Record, simple_record, split_records
from deployctl.startup.serverargs import (
    known_field_sets,
    parse_server_args,
    version_from_fields,
)

PHASES = ("arguments", "distributed_init", "load_weights", "kv_cache", "cuda_graphs", "http_server",
          "warmup", "ready")

# ---------------------------------------------------------------------------------------------------
# The report (stable; to_dict() keys are documented in docs/startup.md)


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
    chunked_prefill_size: int
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


@dataclass(frozen=True)
class PiecewiseCudaGraph:
    """Piecewise (0.5.x) / prefill (0.5.23) CUDA graph: ``captured`` | ``disabled`` | ``not_available``
    | ``not_reached`` | ``unknown``; ``auto_set`` True when an automatic rule switched it off."""

    state: str
    auto_set: bool | None = None
    reason: str | None = None
    evidence: str = ""


@dataclass(frozen=True)
class KvCache:
    tokens: int
    dtype: str | None = None
    k_gb: float | None = None
    v_gb: float | None = None
    kv_gb: float | None = None


@dataclass(frozen=True)
class Deprecation:
    message: str
    flags: tuple[str, ...] = ()


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
    sglang_version: str | None = None
    sglang_version_source: str | None = None  # server_info | log_exact | log_inferred
    sglang_version_evidence: str | None = None
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


# ---------------------------------------------------------------------------------------------------
# The parser

_SUMMARY_RE = re.compile(
    r"max_total_num_tokens=(\d+), chunked_prefill_size=(-?\d+), max_prefill_tokens=(\d+), "
    r"max_running_requests=(\d+), context_len=(\d+)(?:, available_(?:gpu|cpu)_mem=([\d.]+) GB)?"
)
_CAPTURE_RE = re.compile(r"^Capture ((?:[a-z]+ ){0,2})(?:cuda|CUDA) graph (begin|end)\b(.*)$")
_CAPTURE_END_BS_RE = re.compile(r"bs=\[([\d, ]*)\]")
_ELAPSED_RE = re.compile(r"(?:Time elapsed: |elapsed=)([\d.]+) ?s")
_CAPTURING_BS_RE = re.compile(r"Capturing batches \(bs=(\d+)")
_KV_RE = re.compile(
    r"KV Cache is allocated\. (?:dtype: ([^,]+), )?#tokens: (\d+), "
    r"(?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)
_MAMBA_RE = re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+)")
_LOAD_END_RE = re.compile(r"Load weight end\. (elapsed=([\d.]+) s, )?type=([\w.]+), (dtype=)?.*?mem usage=([\d.]+) GB")
# The file name may hold a space (block_shape=[128, 128]), so the path ends at the first ".json".
_MOE_PATH_RE = re.compile(r"[Cc]onfig file not found at (.+?\.json)")
_MOE_FILE_RE = re.compile(
    r"^E=(\d+),N=(\d+),device_name=(.+?)(?:,dtype=([^,]+?))?(?:,block_shape=(\[[^\]]*\]))?"
    r"(,per_channel_quant=True)?(_down)?\.json$"
)
_ACCESS_RE = re.compile(r'"(GET|POST) (\S+) HTTP/[\d.]+" (\d{3})')
_LISTEN_RE = re.compile(r"Uvicorn running on (\S+)")
_FLAG_RE = re.compile(r"--[a-z][a-z0-9-]+")
_OPTION_RE = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]+)")

_EVIDENCE_WINDOW = 40
_MAX_NOTICES = 64
_MAX_LINE_KEEP = 1000
_WARMUP_PATHS = ("/generate", "/v1/chat/completions", "/v1/completions", "/encode", "/v1/embeddings")


class _Traceback:
    __slots__ = ("rank", "origin", "header", "lines", "exc_line", "in_server_args", "evidence", "after",
                 "expect_exc")

    def __init__(self, origin: str, rank: int | None, header: str) -> None:
        self.origin = origin
        self.rank = rank
        self.header = header
        self.lines: deque[str] = deque(maxlen=8)
        self.exc_line: str | None = None
        self.in_server_args = False
        self.evidence: tuple[str, ...] = ()  # the frames up to and including the latest exception line
        self.after: list[str] = []  # what the exception printed after its first line (hints, a token tip)
        # An exception line ends a traceback; a second one before the next "Traceback" is part of the
        # first's message (DistBackendError's "ncclSystemError: …" line), not a new exception.
        self.expect_exc = True


@dataclass
class _Failure:
    kind: str
    message: str
    evidence: tuple[str, ...]
    rank: int | None
    ranks: list[int] = field(default_factory=list)
    exception: str | None = None
    unknown_flags: tuple[str, ...] = ()


def _tp(rank: Rank | None) -> int:
    return rank.tp if rank is not None and rank.tp is not None else 0


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_LINE_KEEP else text[:_MAX_LINE_KEEP] + "…"


def _label(rec: Record) -> str:
    if rec.ts is None:
        return rec.text
    tag = f" {rec.rank.label}" if rec.rank is not None else ""
    ms = f".{rec.ms:03d}" if rec.ms is not None else ""
    return f"[{rec.ts}{ms}{tag}] {rec.text}"


def _epoch(ts: str, ms: int | None) -> float:
    moment = datetime(int(ts[0:4]), int(ts[5:7]), int(ts[8:10]), int(ts[11:13]), int(ts[14:16]), int(ts[17:19]))
    return moment.timestamp() + (ms or 0) / 1000.0


class StartupParser:
    """Feed lines with ``feed``; read the facts with ``report`` (any time, non-destructive)."""

    def __init__(self, server_info: Mapping[str, Any] | None = None) -> None:
        self._lines = 0
        self._recent: deque[Record | str] = deque(maxlen=_EVIDENCE_WINDOW)  # formatted only when needed
        self._phase_start: dict[str, tuple[str, int | None]] = {}
        self._first_ts: tuple[str, int | None] | None = None
        self._last_ts: tuple[str, int | None] | None = None
        # The dump is kept as text and parsed once, when a report first needs it: a stream with many
        # starts (a file appended across restarts) then costs one parse, not one per start.
        self._dump: str | None = None
        self._parsed: tuple[dict[str, Any], str] | None = None
        self._summary: SchedulerSummary | None = None
        self._kv: KvCache | None = None
        self._kv_dtype: str | None = None
        self._kv_rank: int | None = None
        self._weights_rank: int | None = None
        self._mamba: int | None = None
        self._model_class: str | None = None
        self._weights_gb: float | None = None
        self._capture_begun: set[str] = set()
        self._capture_ended: set[str] = set()
        self._capture_seconds: dict[str, float] = {}
        self._capture_bs: dict[str, list[int]] = {}
        self._capture_ctx = "target_decode"
        self._piecewise_disable_msg = False
        self._prefill_disable_reason: str | None = None
        self._moe: dict[tuple[str, str], dict[str, Any]] = {}
        self._deprecations: dict[str, Deprecation] = {}
        self._notices: dict[str, None] = {}
        self._ranks: set[Rank] = set()
        self._version_cues: dict[str, str] = {}  # reason → version family (bounded: a fixed set of cues)
        self._usage = False
        self._usage_options: set[str] = set()
        self._argparse_prog: str | None = None
        self._tb: _Traceback | None = None
        self._failure: _Failure | None = None
        self._sigquit: str | None = None
        self._listening: str | None = None
        self._warmup_request: str | None = None
        self._http_up = False
        self._ready = False
        self._server_info: Mapping[str, Any] | None = None
        self._pending_bare: list[str] = []  # bare lines since the last timestamped record
        self._earlier_starts = 0
        self._blob_lines = 0
        if server_info is not None:
            self.set_server_info(server_info)

    # -- input -------------------------------------------------------------------------------------
    def set_server_info(self, info: Mapping[str, Any]) -> None:
        """Add ``GET /server_info`` (or ``/get_server_info``): the authoritative version, and the
        effective max_running_requests when the log lacks the scheduler line."""
        self._server_info = info

    def feed(self, line: str) -> None:
        self._lines += 1
        rec = simple_record(line)
        if rec is not None:
            self._on_record(rec)
            return
        first = line[:1]
        if (first == " " or first.islower()) and "\r" not in line and "\x1b" not in line \
                and _EMBEDDED_RE.search(line) is None:
            self._on_bare(line.rstrip())  # traceback frames, usage lines: no prefix of any kind
            return
        for rec in split_records(line):
            if rec.ts is not None:
                self._on_record(rec)
            elif rec.fragment:
                self._on_fragment(rec.text)
            else:
                self._on_bare(rec.text)

    def feed_many(self, lines: Iterable[str]) -> "StartupParser":
        for line in lines:
            self.feed(line)
        return self

    # -- records with a timestamp ---------------------------------------------------------------------
    def _mark(self, phase: str, rec: Record) -> None:
        if phase not in self._phase_start:
            self._phase_start[phase] = (rec.ts, rec.ms)  # type: ignore[assignment]

    def _cue(self, version: str, reason: str) -> None:
        if reason not in self._version_cues:
            self._version_cues[reason] = version

    def _new_start(self) -> None:
        """A second ``server_args=`` dump: the stream (a file appended to across restarts) holds
        another start. The report describes the last one; the bare lines printed just before this
        dump belong to it and are carried over."""
        carried, lines, starts = self._pending_bare, self._lines, self._earlier_starts + 1
        self.__init__(server_info=self._server_info)  # type: ignore[misc]
        self._lines, self._earlier_starts = lines, starts
        for text in carried:
            self._on_bare(text)

    def _on_record(self, rec: Record) -> None:
        if self._dump is not None and rec.text.startswith("server_args="):
            self._new_start()
        if self._pending_bare:
            self._pending_bare = []
        stamp = (rec.ts, rec.ms)
        if self._first_ts is None:
            self._first_ts = stamp  # type: ignore[assignment]
            self._mark("arguments", rec)
        self._last_ts = stamp  # type: ignore[assignment]
        rank = rec.rank
        if rank is not None and rank not in self._ranks:
            self._ranks.add(rank)
        msg = rec.text
        self._recent.append(rec if len(msg) <= _MAX_LINE_KEEP else rec._replace(text=_clip(msg)))
        if self._usage:
            self._usage = False
        first = msg[:1]
        # The hot path: request logs after start-up.
        if first == "D" and msg.startswith("Decode batch"):
            return
        if first == "P" and msg.startswith("Prefill batch"):
            if msg.startswith("Prefill batch. "):
                self._cue("0.4.10.post2", "'Prefill batch.' with a period (0.4.x)")
            return
        if '" 200' in msg or '" 4' in msg or '" 5' in msg:
            self._on_access(msg)
            return
        if first == "s" and msg.startswith("server_args="):
            self._on_dump(msg)
            return
        if first == "I":
            if msg.startswith("Init torch distributed begin") or msg.startswith("Init parallel begin"):
                self._mark("distributed_init", rec)
                if msg.startswith("Init parallel"):
                    self._cue("0.5.23", "'Init parallel begin.' (0.5.23)")
                return
            if msg.startswith("Init torch distributed ends. mem usage="):
                self._cue("0.4.10.post2", "'Init torch distributed ends.' without elapsed")
                return
            if msg.startswith("Initialization failed. warmup error"):
                self._fail("warmup_failed", msg, evidence=(_label(rec),), rank=None)
                return
        if first == "L":
            if msg.startswith("Load weight begin"):
                self._mark("load_weights", rec)
                return
            if msg.startswith("Load weight end"):
                self._mark("kv_cache", rec)
                self._on_load_end(msg, rank)
                return
        if first == "K" or first == "F" or first == "S":
            if "KV Cache is allocated" in msg:
                self._mark("kv_cache", rec)
                self._on_kv(msg, rank)
                return
        if first == "M":
            if msg.startswith("Mamba Cache is allocated"):
                self._mark("kv_cache", rec)
                match = _MAMBA_RE.match(msg)
                if match and self._mamba is None:
                    self._mamba = int(match.group(1))
                return
            if msg.startswith("Memory pool end"):
                self._mark("cuda_graphs", rec)
                return
        if first == "C" and msg.startswith("Capture"):
            self._on_capture(msg, rank, rec)
            return
        if first == "m" and msg.startswith("max_total_num_tokens="):
            self._on_summary(msg, rank, rec)
            return
        if first == "U":
            if msg.startswith("Using KV cache dtype: "):
                self._kv_dtype = msg[len("Using KV cache dtype: "):].strip()
                return
            if msg.startswith("Uvicorn running on"):
                match = _LISTEN_RE.match(msg)
                self._listening = match.group(1) if match else None
                self._http_up = True
                self._mark("warmup", rec)
                return
        if msg.startswith("Started server process") or msg.startswith("Application startup complete"):
            self._mark("http_server", rec)
            return
        if first == "T" and msg.startswith("The server is fired up and ready to roll"):
            self._ready = True
            self._mark("ready", rec)
            return
        if msg.startswith("Disable piecewise CUDA graph because"):
            self._piecewise_disable_msg = True
            return
        if msg.startswith("Disable prefill CUDA graph because"):
            self._prefill_disable_reason = msg[len("Disable prefill CUDA graph because "):]
            return
        if "MoE" in msg and "not found" in msg:
            self._on_moe(msg, rank)
            return
        if msg.startswith("Scheduler hit an exception"):
            self._close_tb()
            self._tb = _Traceback("rank", _tp(rank), _clip(_label(rec)))
            return
        if msg.startswith("Received sigquit"):
            self._close_tb()
            self._sigquit = _clip(_label(rec))
            return
        if "scheduler died during initialization" in msg or "scheduler is dead" in msg:
            died = RANK_DIED_RE.search(msg)
            self._fail("rank_died", msg.removeprefix("RuntimeError: "), evidence=(_clip(_label(rec)),),
                       rank=int(died.group(1)) if died else None, exception=msg)
            return
        if "crashed with exit code" in msg and msg.startswith("Subprocess"):
            self._fail("crashed", msg, evidence=(_clip(_label(rec)),), rank=None)
            return
        if "address already in use" in msg or "[Errno 98]" in msg:
            self._fail("port_in_use", msg, evidence=(_clip(_label(rec)),), rank=None)
            return
        if "eprecat" in msg:
            self._on_deprecation(msg)

    def _on_access(self, msg: str) -> None:
        match = _ACCESS_RE.search(msg)
        if not match:
            return
        method, path, status = match.groups()
        if path.startswith("/get_model_info"):
            self._cue("0.4.10.post2", "warm-up polls GET /get_model_info (0.4.x)")
        if self._http_up and not self._ready and self._warmup_request is None and method == "POST" \
                and path.startswith(_WARMUP_PATHS):
            self._warmup_request = f"{method} {path}"
            if status != "200":
                self._warmup_request += f" ({status})"

    def _on_dump(self, msg: str) -> None:
        self._dump = msg

    def _args(self) -> dict[str, Any] | None:
        if self._dump is not None and self._parsed is None:
            self._parsed = parse_server_args(self._dump) or ({}, "")
        return self._parsed[0] if self._parsed and self._parsed[0] else None

    @property
    def _server_args_format(self) -> str | None:
        return self._parsed[1] if self._args() is not None and self._parsed else None

    def _on_load_end(self, msg: str, rank: Rank | None) -> None:
        match = _LOAD_END_RE.match(msg)
        if not match:
            return
        if match.group(1) is None:
            self._cue("0.4.10.post2", "'Load weight end.' without elapsed= (0.4.x/0.5.8)")
        elif match.group(4):
            self._cue("0.5.9", "'Load weight end.' with elapsed= and dtype= (0.5.9)")
        else:
            self._cue("0.5.10", "'Load weight end.' without dtype= (0.5.10+)")
        # The first rank's figures, replaced by TP0's (a node-1 log of a multi-node run has no TP0).
        if self._model_class is None or (_tp(rank) == 0 and self._weights_rank != 0):
            self._model_class = match.group(3)
            self._weights_gb = float(match.group(5))
            self._weights_rank = _tp(rank)

    def _on_kv(self, msg: str, rank: Rank | None) -> None:
        if self._kv is not None and (_tp(rank) != 0 or self._kv_rank == 0):
            return
        match = _KV_RE.search(msg)
        if not match:
            return
        dtype, tokens, k, v, kv = match.groups()
        if dtype is not None:
            self._cue("0.5.23", "'KV Cache is allocated. dtype:' (0.5.23)")
        self._kv = KvCache(int(tokens), dtype=dtype, k_gb=float(k) if k else None,
                           v_gb=float(v) if v else None, kv_gb=float(kv) if kv else None)
        self._kv_rank = _tp(rank)

    def _on_capture(self, msg: str, rank: Rank | None, rec: Record) -> None:
        match = _CAPTURE_RE.match(msg)
        if not match:
            return
        words = match.group(1).split()
        role = "draft" if "draft" in words else "target"
        if "extend" in words:
            kind = "extend"
        elif "piecewise" in words or "prefill" in words:
            kind = "prefill"
        else:
            kind = "decode"  # "verify" is the target decode graph with speculative decoding (0.5.23)
        key = f"{role}_{kind}"
        if match.group(2) == "begin":
            self._mark("cuda_graphs", rec)
            if _tp(rank) == 0:
                self._capture_ctx = key
            self._capture_begun.add(key)
            return
        self._capture_ended.add(key)
        rest = match.group(3)
        if _tp(rank) == 0 and key not in self._capture_seconds:
            elapsed = _ELAPSED_RE.search(rest)
            if elapsed:
                self._capture_seconds[key] = float(elapsed.group(1))
            listed = _CAPTURE_END_BS_RE.search(rest)
            if listed and listed.group(1).strip():
                self._capture_bs[key] = [int(x) for x in listed.group(1).split(",")]

    def _on_summary(self, msg: str, rank: Rank | None, rec: Record) -> None:
        if self._summary is not None:
            return
        match = _SUMMARY_RE.match(msg)
        if not match:
            return
        self._mark("http_server", rec)
        mem = match.group(6)
        self._summary = SchedulerSummary(
            rank=_tp(rank), max_total_num_tokens=int(match.group(1)), chunked_prefill_size=int(match.group(2)),
            max_prefill_tokens=int(match.group(3)), max_running_requests=int(match.group(4)),
            context_len=int(match.group(5)), available_gpu_mem_gb=float(mem) if mem else None)

    def _on_moe(self, msg: str, rank: Rank | None) -> None:
        match = _MOE_PATH_RE.search(msg)
        if not match:
            return
        path = match.group(1)
        directory, _, name = path.rpartition("/")
        triton_dir = directory.rpartition("/")[2] if directory else None
        if name.endswith("_down.json") or msg.startswith("Down MoE config"):
            kind = "down_config_missing_using_up_or_default"
        elif "Fallback to triton version" in msg:
            kind = "fallback_other_triton_version"
        else:
            kind = "default_config"
        entry = self._moe.get((kind, name))
        if entry is None:
            entry = {"kind": kind, "config_file": name, "path": path,
                     "triton_dir": triton_dir if triton_dir and triton_dir.startswith("triton_") else None,
                     "ranks": set()}
            parts = _MOE_FILE_RE.match(name)
            if parts:
                e, n, device, dtype, block, per_channel, down = parts.groups()
                entry.update(E=int(e), N=int(n), device_name=device, dtype=dtype, block_shape=block,
                             per_channel_quant=bool(per_channel), down=bool(down))
            self._moe[(kind, name)] = entry
        entry["ranks"].add(_tp(rank))

    def _on_deprecation(self, msg: str) -> None:
        if msg in self._deprecations or len(self._deprecations) >= _MAX_NOTICES:
            return
        self._deprecations[msg] = Deprecation(_clip(msg), tuple(dict.fromkeys(_FLAG_RE.findall(msg))))

    # -- fragments (progress meters) and bare lines ---------------------------------------------------
    def _on_fragment(self, text: str) -> None:
        if text.startswith("Capturing batches"):
            match = _CAPTURING_BS_RE.match(text)
            if match:
                sizes = self._capture_bs.setdefault(self._capture_ctx, [])
                bs = int(match.group(1))
                if not sizes or sizes[-1] != bs:
                    if bs not in sizes:
                        sizes.append(bs)
            return
        if text and not text[:1].isspace() and self._tb is None and text[:1] != " " \
                and not text.startswith(("Loading", "Capturing", "Multi-thread")) and "%|" not in text \
                and "it/s]" not in text:
            self._on_bare(text)

    def _on_bare(self, text: str) -> None:
        if not text:
            return
        if text.endswith(" blob data]") and text.startswith("["):
            self._blob_lines += 1  # journalctl without -a: the line held a \r meter (and what was glued to it)
            return
        if len(self._pending_bare) < _MAX_NOTICES:
            self._pending_bare.append(text)
        self._recent.append(text if len(text) <= _MAX_LINE_KEEP else _clip(text))
        if self._usage:
            error = ARGPARSE_ERROR_RE.match(text)
            if error:
                self._usage = False
                self._on_argparse_error(text, error.group(1), error.group(2))
            elif len(self._usage_options) < 2000:
                self._usage_options.update(_OPTION_RE.findall(text))
            return
        if text.startswith("usage: "):
            self._usage = True
            self._argparse_prog = text[7:].split(" [", 1)[0].strip() or None
            self._usage_options.update(_OPTION_RE.findall(text))
            return
        if ": error: " in text:
            error = ARGPARSE_ERROR_RE.match(text)
            if error:
                self._on_argparse_error(text, error.group(1), error.group(2))
                return
        if text.startswith("Traceback (most recent call last)"):
            if self._tb is None:
                self._tb = _Traceback("main", None, text)
            self._tb.expect_exc = True
            return
        tb = self._tb
        if tb is not None:
            line = _clip(text)
            tb.lines.append(line)
            if "server_args.py" in text:
                tb.in_server_args = True
            if tb.expect_exc and not text[:1].isspace() and EXCEPTION_LINE_RE.match(text):
                tb.exc_line = line
                tb.evidence = tuple(tb.lines)
                tb.after = []
                tb.expect_exc = False
            elif tb.exc_line is not None and len(tb.after) < 3:
                tb.after.append(line)
            return
        if "sglang serve' is the recommended entrypoint" in text:
            self._cue("0.5.10", "launch_server UserWarning (0.5.10+)")
        if "eprecat" in text:
            self._on_deprecation(text)
        if not text[:1].isspace() and len(self._notices) < _MAX_NOTICES:
            self._notices[_clip(text)] = None
        if "scheduler died during initialization" in text or "scheduler is dead" in text:
            died = RANK_DIED_RE.search(text)
            self._fail("rank_died", text, evidence=(_clip(text),), rank=int(died.group(1)) if died else None)

    def _on_argparse_error(self, text: str, prog: str, detail: str) -> None:
        if prog == "sglang serve":
            self._cue("0.5.10", "argparse prog 'sglang serve' (0.5.10+)")
        elif prog == "launch_server.py":
            self._cue("0.5.9", "argparse prog 'launch_server.py' (before 0.5.10)")
        flags = unknown_flags(detail)
        kind = "unknown_flag" if flags else "bad_flag"
        self._fail(kind, text, evidence=(_clip(text),), rank=None, unknown=flags)

    # -- failures -------------------------------------------------------------------------------------
    def _fail(self, kind: str, message: str, *, evidence: tuple[str, ...], rank: int | None,
              exception: str | None = None, unknown: tuple[str, ...] = ()) -> None:
        self._failure = _merge_failure(self._failure, _Failure(
            kind, _clip(message), evidence, rank, [rank] if rank is not None else [], exception, unknown))

    def _tb_failure(self, tb: _Traceback) -> _Failure | None:
        if tb.exc_line is None:
            return None
        kind = classify_exception(tb.exc_line, in_server_args=tb.in_server_args and tb.origin == "main")
        # SGLang's own errors read best without the type; a foreign one (OSError from the Hub) keeps it.
        keep_type = tb.origin == "main" and kind in ("model_not_found", "exception")
        message = exception_message(tb.exc_line, keep_type=keep_type)
        rank = tb.rank
        if kind == "rank_died":
            died = RANK_DIED_RE.search(tb.exc_line)
            rank = int(died.group(1)) if died else rank
        evidence = (tb.header, *tb.evidence, *tb.after)
        return _Failure(kind, message, evidence, rank, [rank] if rank is not None else [], tb.exc_line)

    def _close_tb(self) -> None:
        tb, self._tb = self._tb, None
        if tb is not None:
            found = self._tb_failure(tb)
            if found is not None:
                self._failure = _merge_failure(self._failure, found)

    # -- output ---------------------------------------------------------------------------------------
    def report(self) -> StartupReport:
        failure = self._failure
        if self._tb is not None:
            found = self._tb_failure(self._tb)
            if found is not None:
                failure = _merge_failure(_copy_failure(failure), found)
        if failure is None and self._sigquit is not None:
            failure = _Failure("exception", "a scheduler process failed (Received sigquit from a child process)",
                               tuple(r if isinstance(r, str) else _label(r) for r in self._recent)[-12:], None, [])
        outcome = "failed" if failure else "ready" if self._ready else "starting"
        args = self._args()
        version, source, evidence = self._version()
        phases, total = self._phases()
        return StartupReport(
            outcome=outcome,
            phase=phases[-1].name if phases else None,
            phases=phases,
            failure=_freeze_failure(failure),
            server_args=dict(args) if args is not None else None,
            server_args_format=self._server_args_format,
            scheduler=self._summary,
            kv_cache=replace(self._kv, dtype=self._kv.dtype or self._kv_dtype) if self._kv else None,
            max_mamba_cache_size=self._mamba,
            cuda_graph=self._cuda_graph(failure),
            piecewise_cuda_graph=self._piecewise(failure),
            moe_config_warnings=tuple(
                MoeWarning(**{**entry, "ranks": tuple(sorted(entry["ranks"]))}) for entry in self._moe.values()),
            deprecations=tuple(self._deprecations.values()),
            notices=tuple(self._notices),
            ranks=tuple(r.label for r in sorted(self._ranks, key=_rank_order)),
            tp_ranks=tuple(sorted({r.tp for r in self._ranks if r.tp is not None})),
            sglang_version=version,
            sglang_version_source=source,
            sglang_version_evidence=evidence,
            listening=self._listening,
            warmup_request=self._warmup_request,
            model_class=self._model_class,
            weights_gb=self._weights_gb,
            effective_max_running_requests_source=(
                "scheduler_line" if self._summary else "server_info" if self._info_mrr() is not None else None),
            server_info_max_running_requests=self._info_mrr(),
            first_timestamp=_fmt(self._first_ts),
            last_timestamp=_fmt(self._last_ts),
            total_seconds=total,
            lines=self._lines,
            earlier_starts=self._earlier_starts,
            blob_lines=self._blob_lines,
        )

    def _info_mrr(self) -> int | None:
        info = self._server_info or {}
        states = info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], Mapping):
            value = states[0].get("effective_max_running_requests_per_dp")
            if isinstance(value, int):
                return value
        return None

    def _phases(self) -> tuple[tuple[Phase, ...], float | None]:
        reached = [(name, self._phase_start[name]) for name in PHASES if name in self._phase_start]
        if not reached:
            return (), None
        out = []
        for index, (name, stamp) in enumerate(reached):
            if name == "ready":
                out.append(Phase(name, _fmt(stamp), None))
                continue
            if index + 1 < len(reached):
                end, complete = reached[index + 1][1], True
            else:
                end, complete = self._last_ts, False
            seconds = round(_epoch(*end) - _epoch(*stamp), 3) if end is not None else None
            out.append(Phase(name, _fmt(stamp), seconds, complete))
        total = None
        if "ready" in self._phase_start and self._first_ts is not None:
            total = round(_epoch(*self._phase_start["ready"]) - _epoch(*self._first_ts), 3)
        return tuple(out), total

    def _cuda_graph(self, failure: _Failure | None) -> CudaGraph:
        args = self._args() or {}
        sizes = tuple(sorted(set(self._capture_bs.get("target_decode", ())), reverse=True))
        seconds = self._capture_seconds.get("target_decode")
        draft = "draft_decode" in self._capture_ended
        if "target_decode" in self._capture_ended:
            return CudaGraph("captured", sizes, seconds, draft, "Capture cuda graph begin/end")
        if "target_decode" in self._capture_begun:
            if failure is not None:
                return CudaGraph("failed", sizes, None, draft, f"capture began, then {failure.kind}")
            return CudaGraph("capturing", sizes, None, draft, "Capture cuda graph begin without end")
        if _decode_graph_disabled(args):
            return CudaGraph("disabled", (), None, False, _disabled_evidence(args))
        if args and (failure is not None or not self._ready) and self._summary is None:
            return CudaGraph("not_reached")
        if not args and not self._ready:
            return CudaGraph("not_reached")
        return CudaGraph("unknown", evidence="no capture lines and no dump field saying it was disabled")

    def _piecewise(self, failure: _Failure | None) -> PiecewiseCudaGraph:
        args = self._args() or {}
        if "target_prefill" in self._capture_ended:
            return PiecewiseCudaGraph("captured", False, None, "Capture piecewise/prefill CUDA graph end")
        if self._prefill_disable_reason is not None:
            reason = self._prefill_disable_reason
            explicit = any(cue in reason for cue in ("--cuda-graph-backend-prefill", "explicit", "--disable-cuda-graph",
                                                     "disable_cuda_graph", "disable_prefill_cuda_graph"))
            return PiecewiseCudaGraph("disabled", not explicit, reason,
                                      f"Disable prefill CUDA graph because {reason}")
        if "disable_piecewise_cuda_graph" in args:
            if args.get("disable_piecewise_cuda_graph") is True:
                rules = _piecewise_auto_rules(args)
                evidence = "server_args disable_piecewise_cuda_graph=True"
                if self._piecewise_disable_msg:
                    evidence += " and 'Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set'"
                return PiecewiseCudaGraph("disabled", bool(rules), "; ".join(rules) or None, evidence)
            return self._piecewise_pending(failure, "server_args disable_piecewise_cuda_graph=False")
        if "enable_piecewise_cuda_graph" in args:
            if args.get("enable_piecewise_cuda_graph") is True:
                return self._piecewise_pending(failure, "server_args enable_piecewise_cuda_graph=True")
            return PiecewiseCudaGraph("disabled", False, None,
                                      "server_args enable_piecewise_cuda_graph=False (opt-in before 0.5.10)")
        if self._server_args_format == "dict":
            backend = _nested(args, "cuda_graph_config", "prefill", "backend")
            if backend == "disabled" or args.get("disable_prefill_cuda_graph") is True:
                return PiecewiseCudaGraph("disabled", None, None, "cuda_graph_config.prefill.backend='disabled'")
            return self._piecewise_pending(failure, f"cuda_graph_config.prefill.backend={backend!r}")
        if args:
            return PiecewiseCudaGraph("not_available", None, None, "this version has no piecewise CUDA graph")
        if self._piecewise_disable_msg:
            return PiecewiseCudaGraph("disabled", None, None, "Disable piecewise CUDA graph message")
        return PiecewiseCudaGraph("not_reached" if not self._ready else "unknown")

    def _piecewise_pending(self, failure: _Failure | None, evidence: str) -> PiecewiseCudaGraph:
        if self._ready or self._summary is not None:
            return PiecewiseCudaGraph("unknown", None, None, evidence + "; no capture line seen")
        return PiecewiseCudaGraph("not_reached", None, None, evidence)

    def _version(self) -> tuple[str | None, str | None, str | None]:
        info = self._server_info or {}
        if isinstance(info.get("version"), str):
            return info["version"], "server_info", "GET /server_info version"
        args = self._args()
        if args:
            version, evidence = version_from_fields(frozenset(args), self._server_args_format or "")
            if version is not None:
                exact = not version.startswith("~")
                return version.lstrip("~"), "log_exact" if exact else "log_inferred", evidence
        return _version_from_cues(self._version_cues, self._usage_options)


def _version_from_cues(cues: Mapping[str, str], options: set[str]) -> tuple[str | None, str | None, str | None]:
    """The version from format cues (facts §9) when there is no dump: each cue names a family
    (0.4.x, 0.5.9-and-before, 0.5.10+, 0.5.23); an argparse usage block adds its option names,
    compared with the known ServerArgs field sets."""
    families = set(cues.values())
    evidence = "; ".join(cues)
    if "0.5.23" in families:
        return "0.5.23", "log_inferred", evidence
    candidates = list(known_field_sets())
    if "0.5.10" in families:
        candidates = [v for v in candidates if _vkey(v) >= _vkey("0.5.10")]
    elif "0.5.9" in families:
        candidates = [v for v in candidates if _vkey(v) < _vkey("0.5.10")]
        if "0.4.10.post2" not in families:
            candidates = [v for v in candidates if _vkey(v) >= _vkey("0.5")]
    elif "0.4.10.post2" in families:
        candidates = [v for v in candidates if _vkey(v) < _vkey("0.5")]
    if options and candidates:
        wanted = {option.replace("-", "_") for option in options}
        sets = known_field_sets()
        best = max(candidates, key=lambda v: len(wanted & sets[v]) / len(wanted | sets[v]))
        reason = f"argparse usage lists {len(options)} options, nearest to the {best} fields"
        return best, "log_inferred", f"{evidence}; {reason}" if evidence else reason
    if families and len(candidates) == 1:
        return candidates[0], "log_inferred", evidence
    return None, None, evidence or None


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _rank_order(rank: Rank) -> tuple[int, ...]:
    return tuple(-1 if v is None else v for v in (rank.dp, rank.pp, rank.tp, rank.ep, rank.attn_cp, rank.moe_dp))


def _nested(data: Mapping[str, Any], *keys: str) -> Any:
    value: Any = data
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _decode_graph_disabled(args: Mapping[str, Any]) -> bool:
    if args.get("disable_cuda_graph") is True or args.get("disable_decode_cuda_graph") is True:
        return True
    return _nested(args, "cuda_graph_config", "decode", "backend") == "disabled"


def _disabled_evidence(args: Mapping[str, Any]) -> str:
    if args.get("disable_cuda_graph") is True:
        return "server_args disable_cuda_graph=True; no 'Capture cuda graph' lines (nothing is printed when disabled)"
    if args.get("disable_decode_cuda_graph") is True:
        return "server_args disable_decode_cuda_graph=True"
    return "cuda_graph_config.decode.backend='disabled'"


def _piecewise_auto_rules(args: Mapping[str, Any]) -> list[str]:
    """The 0.5.10 ``_handle_piecewise_cuda_graph`` rules that hold for these resolved args."""
    rules = []
    if args.get("speculative_algorithm") not in (None, "", "NONE"):
        rules.append(f"speculative decoding ({args.get('speculative_algorithm')}) disables it (0.5.10)")
    if args.get("enable_dp_attention") is True:
        rules.append("DP attention")
    if args.get("enable_torch_compile") is True:
        rules.append("torch compile")
    if isinstance(args.get("pp_size"), int) and args["pp_size"] > 1:
        rules.append("pp_size > 1")
    if args.get("moe_a2a_backend") not in (None, "none"):
        rules.append(f"moe_a2a_backend={args.get('moe_a2a_backend')}")
    if args.get("enable_lora") is True or args.get("lora_paths"):
        rules.append("LoRA")
    if args.get("moe_runner_backend") in ("flashinfer_trtllm", "flashinfer_mxfp4"):
        rules.append(f"moe_runner_backend={args.get('moe_runner_backend')}")
    if args.get("enable_symm_mem") is True:
        rules.append("symmetric memory")
    if args.get("disaggregation_mode") not in (None, "null"):
        rules.append(f"PD disaggregation ({args.get('disaggregation_mode')})")
    if args.get("enable_deterministic_inference") is True:
        rules.append("deterministic inference")
    if args.get("enable_multimodal") is True:
        rules.append("multimodal model")
    return rules


def _merge_failure(current: _Failure | None, new: _Failure) -> _Failure:
    if current is None:
        return new
    if current.kind == new.kind and current.message == new.message:
        for rank in new.ranks:
            if rank not in current.ranks:
                current.ranks.append(rank)
        return current
    if current.kind in GENERIC_KINDS and new.kind not in GENERIC_KINDS:
        return new
    return current


def _copy_failure(failure: _Failure | None) -> _Failure | None:
    return None if failure is None else replace(failure, ranks=list(failure.ranks))


def _freeze_failure(failure: _Failure | None) -> StartupFailure | None:
    if failure is None:
        return None
    ranks = tuple(sorted(failure.ranks))
    return StartupFailure(failure.kind, failure.message, tuple(failure.evidence),
                          failure.rank if failure.rank is not None else (ranks[0] if ranks else None),
                          ranks, failure.exception, failure.unknown_flags)


def _fmt(stamp: tuple[str, int | None] | None) -> str | None:
    if stamp is None:
        return None
    ts, ms = stamp
    return f"{ts}.{ms:03d}" if ms is not None else ts


def parse_lines(lines: Iterable[str], *, server_info: Mapping[str, Any] | None = None) -> StartupReport:
    """Parse a whole log (any iterable of lines, with or without newlines)."""
    return StartupParser(server_info=server_info).feed_many(lines).report()


def parse_text(text: str, *, server_info: Mapping[str, Any] | None = None) -> StartupReport:
    """Parse a captured log held in one string (``\\r`` are kept: they matter)."""
    return parse_lines(text.split("\n"), server_info=server_info)


# ---------------------------------------------------------------------------------------------------
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
    for key in ("notices", "ranks", "tp_ranks"):
        kwargs[key] = tuple(data.get(key) or ())
    if "outcome" not in kwargs:
        raise ValueError("not a startup report: no 'outcome' key")
    return StartupReport(**kwargs)
