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
own timestamps. What each record means: records.py; the version: version.py; graph states: graphs.py.
Formats from 0.3 to 0.5.23, per version: docs/startup.md.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Iterable, Mapping

from deployctl.startup.failure import ARGPARSE_ERROR_RE, CONTAINER_EXIT_RE, EXCEPTION_LINE_RE, FATAL_LINE_RE, \
    GENERIC_KINDS, RANK_DIED_RE, classify_exception, kernel_error, unknown_flags
from deployctl.startup import header
from deployctl.startup.graphs import Progress, decode_graph, piecewise_graph
from deployctl.startup.lines import EMBEDDED_RE, Rank, Record, simple_record, split_records
from deployctl.startup.patterns import CAPTURING_BS_RE, OPTION_RE, freeze_moe
from deployctl.startup.phases import fmt_stamp, reached_phases
from deployctl.startup.records import access, deprecation, dispatch, rank_died
from deployctl.startup.state import MAX_NOTICES, State, label, rank_number
from deployctl.startup.report import (
    PHASES,
    CudaGraph,
    Deprecation,
    KvCache,
    MoeWarning,
    Phase,
    PiecewiseCudaGraph,
    SchedulerSummary,
    StartupFailure,
    StartupReport,
)
from deployctl.startup.serverargs import dump_is_complete, parse_server_args
from deployctl.startup.tracebacks import MAX_LINE_KEEP, Failure, Traceback, clip, copy, freeze, merge
from deployctl.startup.version import CUES, VersionEvidence, decide, field_cues, server_info_version
from deployctl.startup.wrappers import Unwrapper

__all__ = ["PHASES", "CudaGraph", "Deprecation", "KvCache", "MoeWarning", "Phase", "PiecewiseCudaGraph",
           "SchedulerSummary", "StartupFailure", "StartupParser", "StartupReport", "parse_lines", "parse_text"]

# The phase a failure kind belongs to: what a paste without one timestamped line says.
_SPECIFIC_PHASE = {"nccl": "distributed_init", "oom_kv_cache": "kv_cache", "oom_cuda_graph": "cuda_graphs",
                   "cuda_graph_failed": "cuda_graphs",
                   "model_not_found": "arguments", "bad_flag": "arguments", "unknown_flag": "arguments",
                   "port_in_use": "http_server", "warmup_failed": "warmup"}


class StartupParser:
    """Feed lines with ``feed``; read the facts with ``report`` (any time, non-destructive)."""

    def __init__(self, server_info: Mapping[str, Any] | None = None) -> None:
        self._lines = 0
        self._st = State()
        self._first_ts: tuple[str, int | None] | None = None
        self._last_ts: tuple[str, int | None] | None = None
        # The dump is kept as text and parsed once, when a report first needs it: a stream with many
        # starts (a file appended across restarts) then costs one parse, not one per start.
        self._parsed: tuple[dict[str, Any], str] | None = None
        self._notices: dict[str, None] = {}
        self._ranks: set[Rank] = set()
        self._usage = False
        self._usage_options: set[str] = set()
        self._server_info: Mapping[str, Any] | None = server_info
        self._pending_bare: list[str] = []  # bare lines since the last timestamped record
        self._earlier_starts = 0
        self._blob_lines = 0
        self._unwrapper = Unwrapper()

    # -- input -------------------------------------------------------------------------------------
    def set_server_info(self, info: Mapping[str, Any]) -> None:
        """Add ``GET /server_info`` (or ``/get_server_info``): the authoritative version, and the
        effective max_running_requests when the log lacks the scheduler line."""
        self._server_info = info

    def feed(self, line: str) -> None:
        self._lines += 1
        st = self._st
        if st.pending_cues:
            st.commit_cues()  # another line came: the previous one was not the cut end of the log
        first = line[:1]
        # No wrapper starts with a space or '\r' (frames, usage lines, meters): skip the call for them.
        if first == "[":
            if not line[1:2].isdigit():
                line = self._unwrapper.unwrap(line)
                first = line[:1]
        elif first != " " and first != "\r":
            line = self._unwrapper.unwrap(line)
            first = line[:1]
        if first == "[":
            rec = simple_record(line)
            if rec is not None:
                self._on_record(rec)
                return
        if (first == " " or first.islower()) and "\r" not in line and "\x1b" not in line \
                and EMBEDDED_RE.search(line) is None:
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
    def _new_start(self) -> None:
        """A second ``server_args=`` dump: the stream (a file appended to across restarts) holds
        another start. The report describes the last one; the bare lines printed just before this
        dump belong to it and are carried over."""
        carried, lines, starts = self._pending_bare, self._lines, self._earlier_starts + 1
        unwrapper = self._unwrapper
        self.__init__(server_info=self._server_info)  # type: ignore[misc]
        self._lines, self._earlier_starts, self._unwrapper = lines, starts, unwrapper
        for text in carried:
            self._on_bare(text)

    def _on_record(self, rec: Record) -> None:
        st = self._st
        msg = rec.text
        first = msg[:1]
        is_dump = first == "s" and msg.startswith("server_args=")
        if is_dump and st.dump is not None:
            self._new_start()
            st = self._st
        if self._pending_bare:
            self._pending_bare = []
        stamp = (rec.ts, rec.ms)
        if self._first_ts is None:
            self._first_ts = stamp  # type: ignore[assignment]
            st.mark("arguments", rec)
            if len(rec.ts or "") == 8:
                st.cue(CUES_TIME_ONLY)
        self._last_ts = stamp  # type: ignore[assignment]
        rank = rec.rank
        if rank is not None and rank not in self._ranks:
            self._ranks.add(rank)
        st.recent.append(rec if len(msg) <= MAX_LINE_KEEP else rec._replace(text=clip(msg)))
        self._usage = False
        if is_dump:
            st.dump, st.recognised = msg, True
            return
        # The hot path: request logs after start-up.
        if first == "D" and msg.startswith("Decode batch"):
            st.recognised = True
            return
        if first == "P" and msg.startswith("Prefill batch"):
            st.recognised = True
            if msg.startswith("Prefill batch. "):
                st.cue("'Prefill batch.' with a period (until 0.5.3)")
            elif msg.startswith("Prefill batch, "):
                st.cue("'Prefill batch,' with a comma (from 0.5.4.post1)")
            return
        if '" 200' in msg or '" 4' in msg or '" 5' in msg:
            access(st, msg)
            return
        if dispatch(st, rec, msg):
            st.recognised = True

    # -- fragments (progress meters) and bare lines ---------------------------------------------------
    def _on_fragment(self, text: str) -> None:
        if text[-1:] != "]" and _may_be_kernel_error(text) and self._kernel_error(text):
            # printed by another rank after an open meter (a meter alone ends with "it/s]")
            return
        if text.startswith("Capturing batches"):
            match = CAPTURING_BS_RE.match(text)
            if match:
                sizes = self._st.capture.batch_sizes.setdefault(self._st.capture.context, [])
                bs = int(match.group(1))
                if bs not in sizes:
                    sizes.append(bs)
            return
        if text and not text[:1].isspace() and self._st.tb is None \
                and not text.startswith(("Loading", "Capturing", "Multi-thread")) and "%|" not in text \
                and "it/s]" not in text:
            self._on_bare(text)

    def _on_bare(self, text: str) -> None:
        if not text:
            return
        st = self._st
        if text.startswith("Capturing batches"):  # a meter at the start of a line (its '\r' lost)
            self._on_fragment(text)
            return
        if text.endswith(" blob data]") and text.startswith("["):
            self._blob_lines += 1  # journalctl without -a: the line held a \r meter (and what was glued to it)
            return
        if (text[:8] == "sglang: " or "lmsysorg/sglang:v" in text) and st.stated_version is None:
            stated = STATED_VERSION_RE.search(text)
            if stated:
                st.stated_version = (stated.group(1) or stated.group(2), clip(text.strip()))
        if len(self._pending_bare) < MAX_NOTICES:
            self._pending_bare.append(text)
        st.recent.append(text if len(text) <= MAX_LINE_KEEP else clip(text))
        if self._usage:
            error = ARGPARSE_ERROR_RE.match(text)
            if error:
                self._usage = False
                self._on_argparse_error(text, error.group(1), error.group(2))
            elif len(self._usage_options) < 2000:
                self._usage_options.update(OPTION_RE.findall(text))
            return
        if text.startswith("usage: "):
            self._usage = True
            self._usage_options.update(OPTION_RE.findall(text))
            return
        if ": error: " in text:
            error = ARGPARSE_ERROR_RE.match(text)
            if error:
                self._on_argparse_error(text, error.group(1), error.group(2))
                return
        if text.startswith("Traceback (most recent call last)"):
            if st.tb is None:
                st.tb = Traceback("main", None, text)
            st.tb.expect_exc = True
            return
        if (text[:2] != "  " or text[:9] == "  what():") and _may_be_kernel_error(text) \
                and not EXCEPTION_LINE_RE.match(text) and self._kernel_error(text):  # frames are never one
            return
        if text[:1] in "FSAK*" and st.recognised and FATAL_LINE_RE.match(text) \
                and not (text == "Killed" and st.sigquit is not None):  # the main process's own end after sigquit
            # faulthandler's frames follow ("  File … line N in f"): a crash, not a traceback to read
            st.close_tb()
            st.fail("crashed", text, evidence=(clip(text),), rank=None)
            return
        if st.tb is None and text.startswith("  File \""):
            st.tb = Traceback("tail", None, "")  # a paste that starts below the "Traceback" header
        if st.tb is not None:
            if "scheduler " in text:
                died = RANK_DIED_RE.search(text)  # the main process's traceback names the dead rank
                if died:
                    st.failed_rank(Rank(tp=int(died.group(1))))
            st.tb.feed(text)
            if "/sglang/" in text:
                st.recognised = True
            return
        if text[:1] in "IEW" and _UVICORN_BARE_RE.match(text):
            self._on_uvicorn(text[_UVICORN_BARE_RE.match(text).end():])  # type: ignore[union-attr]
            return
        if not text[:1].isspace() and EXCEPTION_LINE_RE.match(text) and self._lone_exception(text):
            return
        if "sglang serve' is the recommended entrypoint" in text:
            st.cue("launch_server UserWarning 'sglang serve' is the recommended entrypoint (from 0.5.10)")
            st.recognised = True
        if "eprecat" in text:
            deprecation(st, Record(text), text)
        if not text[:1].isspace() and len(self._notices) < MAX_NOTICES:
            self._notices[clip(text)] = None
        if "scheduler died during initialization" in text or "scheduler is dead" in text:
            st.recognised = True
            rank_died(st, Record(text), text)
        elif " exited with code " in text:
            exited = CONTAINER_EXIT_RE.match(text)
            if exited and exited.group(2) != "0" and st.recognised:
                st.fail("process_exit", text, evidence=(clip(text),), rank=None)

    def _kernel_error(self, text: str) -> bool:
        """A CUDA/NCCL error line printed by C++ code (no traceback): a failure on its rank."""
        found = kernel_error(text)
        if found is None:
            return False
        kind, message, rank = found
        st = self._st
        st.recognised = True
        if rank is not None:
            st.failed_rank(Rank(tp=rank))
        st.fail(kind, message, evidence=(clip(text),), rank=rank)
        st.recent.append(clip(text))
        return True

    def _on_uvicorn(self, msg: str) -> None:
        """uvicorn's own lines without a timestamp (0.3.x runs it without SGLang's log config): read
        like records, at the time of the last timestamped one."""
        st = self._st
        if '" 200' in msg or '" 4' in msg or '" 5' in msg:
            access(st, msg)
            return
        ts, ms = self._last_ts or (None, None)
        dispatch(st, Record(msg, ts, ms), msg)

    def _lone_exception(self, text: str) -> bool:
        """An exception line with no traceback before it (a tail-only paste): a failure when it names
        a specific cause; a generic one only once the log is known to be SGLang's."""
        kind = classify_exception(text)
        if kind in GENERIC_KINDS and not self._st.recognised:
            return False
        tb = Traceback("tail", None, "")
        tb.feed(text)
        self._st.tb = tb
        if kind not in GENERIC_KINDS:
            self._st.recognised = True
        return True

    def _on_argparse_error(self, text: str, prog: str, detail: str) -> None:
        st = self._st
        if prog == "sglang serve":
            st.cue("argparse prog 'sglang serve' (from 0.5.10)")
        elif prog == "launch_server.py":
            st.cue("argparse prog 'launch_server.py' (until 0.5.9)")
        else:
            return  # another program's argparse error
        st.recognised = True
        flags = unknown_flags(detail)
        st.fail("unknown_flag" if flags else "bad_flag", text, evidence=(clip(text),), rank=None, unknown=flags)

    # -- output ---------------------------------------------------------------------------------------
    def _args(self) -> dict[str, Any] | None:
        dump = self._st.dump
        if dump is not None and self._parsed is None:
            self._parsed = parse_server_args(dump) or ({}, "")
        return self._parsed[0] if self._parsed and self._parsed[0] else None

    def _version(self, args: dict[str, Any] | None) -> VersionEvidence:
        st = self._st
        cues = [CUES[reason] for reason in st.cues]
        if args and st.dump is not None:
            shape = self._parsed[1] if self._parsed else ""
            cues.append(CUES["dict dump 'server_args={…}' (after 0.5.10)"] if shape == "dict"
                        else CUES["dataclass dump 'server_args=ServerArgs(…)' (until 0.5.22)"])
            cues += field_cues(args, complete=dump_is_complete(st.dump), label=f"{shape} dump")
        if self._usage_options:
            cues += field_cues({o.replace("-", "_") for o in self._usage_options}, complete=False,
                               label="argparse usage options", upper=False)
        return decide(cues, server_info_version=server_info_version(self._server_info), stated=st.stated_version)

    def report(self) -> StartupReport:
        st = self._st
        failure = st.failure
        if st.tb is not None:
            found = st.tb.failure()
            if found is not None:
                failure = merge(copy(failure), found)
        if failure is None and st.sigquit is not None:
            failure = Failure("exception", "a scheduler process failed (Received sigquit from a child process)",
                              tuple(r if isinstance(r, str) else label(r) for r in st.recent)[-12:], None, [])
        if failure is not None and not failure.ranks and st.failed_ranks:
            # The cause's own line names no rank (a kernel's CUDA error): the ranks other fatal lines name.
            failure = replace(failure, ranks=sorted({n for r in st.failed_ranks if (n := rank_number(r)) is not None}))
        outcome = "failed" if failure else "ready" if st.ready else "starting"
        args = self._args()
        version = self._version(args)
        phases, total = reached_phases(st.phase_start, self._first_ts, self._last_ts,
                                       from_arguments=st.dump is not None)
        phase = phases[-1].name if phases else None
        implied = _SPECIFIC_PHASE.get(failure.kind) if failure is not None else None
        if implied is not None and (phase is None or PHASES.index(implied) > PHASES.index(phase)):
            phase = implied  # a tail-only paste: the cause proves how far the start got
        stopped_before = implied is not None and PHASES.index(implied) < PHASES.index("cuda_graphs")
        progress = Progress(st.ready, st.summary is not None, failure.kind if failure else None,
                            bool(self._parsed and self._parsed[1] == "dict"), failure.message if failure else "",
                            before_capture_known=st.dump is not None or stopped_before)
        cuda_graph = decode_graph(st.capture, args or {}, progress)
        summary = st.summary
        inferred = tuple(x for x in (
            f"cuda_graph {cuda_graph.state}: {cuda_graph.evidence}" if cuda_graph.inferred else "",
            "memory pools allocated: the scheduler summary comes after them" if summary and st.kv is None else "",
        ) if x)
        info_mrr = self._info_mrr()
        quant, quant_source = header.quantization(args or {}, st.weight_quant,
                                                  (entry.get("dtype") for entry in st.moe.values()))
        split = header.parallelism(args or {}, self._ranks)
        return StartupReport(
            outcome=outcome,
            phase=phase,
            phases=phases,
            failure=freeze(failure, "DP" if split is not None and split.tp == 1 and split.dp > 1 else "TP"),
            server_args=dict(args) if args is not None else None,
            server_args_format=self._parsed[1] if args is not None and self._parsed else None,
            scheduler=SchedulerSummary(_tp(st.summary_rank), *summary[:6]) if summary else None,
            kv_cache=replace(st.kv, dtype=st.kv.dtype or st.kv_dtype) if st.kv else None,
            max_mamba_cache_size=st.mamba,
            cuda_graph=cuda_graph,
            piecewise_cuda_graph=piecewise_graph(st.capture, args or {}, progress),
            moe_config_warnings=tuple(freeze_moe(entry) for entry in st.moe.values()),
            deprecations=tuple(st.deprecations.values()),
            notices=tuple(dict.fromkeys(self._unwrapper.strip_proven(n) for n in self._notices))
            + ((st.kv_budget_warning,) if st.kv_budget_warning else ()),
            ranks=tuple(r.label for r in sorted(self._ranks, key=_rank_order)),
            tp_ranks=tuple(sorted({r.tp for r in self._ranks if r.tp is not None})),
            sglang_version=version.version,
            sglang_version_source=version.source,
            sglang_version_evidence=version.evidence,
            sglang_version_range=version.range,
            sglang_version_cues=version.cues,
            sglang_version_contradiction=version.contradiction,
            listening=st.listening,
            warmup_request=st.warmup_request,
            model_class=st.model_class,
            weights_gb=st.weights_gb,
            effective_max_running_requests_source=(
                "scheduler_line" if summary else "server_info" if info_mrr is not None else None),
            server_info_max_running_requests=info_mrr,
            first_timestamp=fmt_stamp(self._first_ts),
            last_timestamp=fmt_stamp(self._last_ts),
            total_seconds=total,
            lines=self._lines,
            earlier_starts=self._earlier_starts,
            blob_lines=self._blob_lines,
            sglang_log=st.recognised or self._blob_lines > 0,
            format_note=("the log format is older than the oldest supported (SGLang 0.3.0): facts may be "
                         "missing" if version.older_than_supported else None),
            inferred=inferred,
            parallelism=split,
            failed_ranks=tuple(r.label for r in sorted(st.failed_ranks, key=_rank_order)),
            unwrapped_lines=self._unwrapper.wrapped,
            quantization=quant,
            quantization_source=quant_source,
            speculative=header.speculative(args or {}, bool(st.capture.begun & _DRAFT_GRAPHS), st.draft_class),
        )

    def _info_mrr(self) -> int | None:
        info = self._server_info or {}
        states = info.get("internal_states")
        if isinstance(states, list) and states and isinstance(states[0], Mapping):
            value = states[0].get("effective_max_running_requests_per_dp")
            if isinstance(value, int):
                return value
        return None

def _may_be_kernel_error(text: str) -> bool:
    """A cheap filter before ``kernel_error``'s regex (every bare line and meter passes here)."""
    return "rror" in text or "kernel image" in text or "illegal memory" in text or "operation timeout" in text


# The version the log itself states: sglang.check_env's "sglang: 0.5.9" (in every bug report template)
# or a docker image tag in the command line pasted with it.
STATED_VERSION_RE = re.compile(r"^sglang: (\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)\s*$"
                               r"|lmsysorg/sglang:v(\d+\.\d+\.\d+(?:\.post\d+|rc\d+)?)(?![\w.])")
_DRAFT_GRAPHS = frozenset({"draft_decode", "draft_extend"})
_UVICORN_BARE_RE = re.compile(r"^(?:INFO|WARNING|ERROR):\s+")
CUES_TIME_ONLY = "time-only '[HH:MM:SS]' stamps (datefmt %H:%M:%S until 0.3.5)"


def _tp(rank: Rank | None) -> int:
    return rank.tp if rank is not None and rank.tp is not None else 0


def _rank_order(rank: Rank) -> tuple[int, ...]:
    return tuple(-1 if v is None else v for v in (rank.dp, rank.pp, rank.tp, rank.ep, rank.attn_cp, rank.moe_dp))


def parse_lines(lines: Iterable[str], *, server_info: Mapping[str, Any] | None = None) -> StartupReport:
    """Parse a whole log (any iterable of lines, with or without newlines)."""
    return StartupParser(server_info=server_info).feed_many(lines).report()


def parse_text(text: str, *, server_info: Mapping[str, Any] | None = None) -> StartupReport:
    """Parse a captured log held in one string (``\\r`` are kept: they matter)."""
    return parse_lines(text.split("\n"), server_info=server_info)
