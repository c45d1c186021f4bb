"""What the parser has learnt of one start so far (pure; bounded: nothing grows with the log)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from deployctl.startup.graphs import CaptureLog
from deployctl.startup.lines import Rank, Record
from deployctl.startup.patterns import Summary
from deployctl.startup.report import Deprecation, KvCache
from deployctl.startup.tracebacks import Failure, Traceback, clip, merge

MAX_NOTICES = 64


def tp_of(rank: Rank | None) -> int:
    return rank.tp if rank is not None and rank.tp is not None else 0


def rank_number(rank: Rank) -> int | None:
    """The number a failure names ``rank`` by: its TP rank, else (a data-parallel-only server's scheduler,
    tagged ``[… DP3]``) its DP rank; None for a rank tagged by neither (``EP3``)."""
    return rank.tp if rank.tp is not None else rank.dp


def primacy(rank: Rank | None) -> tuple[int, int, int]:
    """Lower is more primary: PP0 TP0 (DP0) before PP1 TP0 before any TP>0."""
    if rank is None:
        return (0, 0, 0)
    return (rank.tp or 0, rank.pp or 0, rank.dp or 0)


def label(rec: Record) -> str:
    if rec.ts is None:
        return rec.text
    tag = f" {rec.rank.label}" if rec.rank is not None else ""
    ms = f".{rec.ms:03d}" if rec.ms is not None else ""
    return f"[{rec.ts}{ms}{tag}] {rec.text}"


@dataclass
class State:
    """The facts of one start as they accumulate (bounded: no list grows with the log)."""

    phase_start: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    dump: str | None = None
    summary: Summary | None = None
    summary_rank: Rank | None = None
    kv: KvCache | None = None
    kv_rank: int | None = None
    kv_dtype: str | None = None
    kv_budget_warning: str | None = None
    mamba: int | None = None
    model_class: str | None = None
    weights_gb: float | None = None
    weights_rank: int | None = None
    draft_class: str | None = None  # a second Load weight end's type: the speculative draft model
    capture: CaptureLog = field(default_factory=CaptureLog)
    moe: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    deprecations: dict[str, Deprecation] = field(default_factory=dict)
    cues: dict[str, None] = field(default_factory=dict)  # version cue reasons (a fixed set: bounded)
    tb: Traceback | None = None
    failure: Failure | None = None
    sigquit: str | None = None
    listening: str | None = None
    warmup_request: str | None = None
    http_up: bool = False
    ready: bool = False
    recognised: bool = False  # a line SGLang prints at startup was seen
    recent: deque = field(default_factory=lambda: deque(maxlen=40))  # Record | str, formatted when needed
    failed_ranks: dict[Rank, None] = field(default_factory=dict)  # ranks a fatal line names (bounded by ranks)
    weight_quant: str | None = None  # "quant=… , quant_algo=…" of Load weight end (0.5.10+)
    # Version cues that rest on something missing from a line ("… without avail mem="): held until the
    # next line shows that this one was not cut short (a cut last line is no evidence).
    pending_cues: list[str] = field(default_factory=list)
    stated_version: tuple[str, str] | None = None  # (version, the line that states it)

    def mark(self, phase: str, rec: Record) -> None:
        if phase not in self.phase_start and rec.ts is not None:
            self.phase_start[phase] = (rec.ts, rec.ms)  # type: ignore[assignment]

    def cue(self, reason: str) -> None:
        if " without " in reason:
            self.pending_cues.append(reason)
        else:
            self.cues[reason] = None

    def commit_cues(self) -> None:
        for reason in self.pending_cues:
            self.cues[reason] = None
        self.pending_cues.clear()

    def failed_rank(self, rank: Rank | None) -> None:
        if rank is not None and len(self.failed_ranks) < 4096:
            self.failed_ranks[rank] = None

    def fail(self, kind: str, message: str, *, evidence: tuple[str, ...], rank: int | None,
             exception: str | None = None, unknown: tuple[str, ...] = ()) -> None:
        self.failure = merge(self.failure, Failure(kind, clip(message), evidence, rank,
                                                   [rank] if rank is not None else [], exception, unknown))

    def close_tb(self) -> None:
        tb, self.tb = self.tb, None
        if tb is not None:
            found = tb.failure()
            if found is not None:
                self.failure = merge(self.failure, found)


