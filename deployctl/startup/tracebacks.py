"""Collect a start's failure from tracebacks and exception lines, wherever they appear (pure).

A full log shows ``[ts TPn] Scheduler hit an exception: Traceback …`` (a rank), ``Traceback …`` with no
prefix (the main process) or ``Initialization failed. warmup error: Traceback …`` (the warm-up), then
frames and the exception line. A paste of the tail may start below the header, at a frame or at the
exception line itself: the exception line is classified all the same (failure.py names the kind).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, replace

from deployctl.startup.failure import (
    EXCEPTION_LINE_RE,
    GENERIC_KINDS,
    RANK_DIED_RE,
    REFINES,
    classify_exception,
    exception_message,
)
from deployctl.startup.report import StartupFailure

MAX_LINE_KEEP = 1000
_QUALIFIED_EXC_RE = re.compile(r"^[A-Za-z_][\w.]*(?::\s.*)?$")
# A frame of the target model's decode-graph capture: cuda_graph_runner.py's capture (0.4–0.5.22), or
# runner/decode_cuda_graph_runner.py's (0.5.23); not the draft's or the piecewise runner's (their own graphs).
_CAPTURE_FRAME_RE = re.compile(r'/(?:decode_)?cuda_graph_runner\.py", line \d+, in _?capture')


def clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_KEEP else text[:MAX_LINE_KEEP] + "…"


@dataclass
class Failure:
    """A failure while it is being collected (ranks merge in); frozen into ``StartupFailure``."""

    kind: str
    message: str
    evidence: tuple[str, ...]
    rank: int | None
    ranks: list[int] = field(default_factory=list)
    exception: str | None = None
    unknown_flags: tuple[str, ...] = ()


class Traceback:
    """One open traceback: ``origin`` is ``rank`` | ``main`` | ``warmup`` | ``tail`` (no header seen)."""

    __slots__ = ("rank", "origin", "header", "lines", "exc_line", "in_server_args", "in_capture", "evidence",
                 "after", "expect_exc")

    def __init__(self, origin: str, rank: int | None, header: str) -> None:
        self.origin = origin
        self.rank = rank
        self.header = header
        self.lines: deque[str] = deque(maxlen=8)
        self.exc_line: str | None = None
        self.in_server_args = False
        self.in_capture = False  # a frame of the decode-graph capture (kept here: ``lines`` keeps only 8)
        self.evidence: tuple[str, ...] = ()  # the frames up to and including the latest exception line
        self.after: list[str] = []  # what the exception printed after its first line (hints, a token tip)
        # An exception line ends a traceback; a second one before the next "Traceback" is part of the
        # first's message (DistBackendError's "ncclSystemError: …" line), not a new exception.
        self.expect_exc = True

    @property
    def framed(self) -> bool:
        """Frames were seen: the next unindented ``name: text`` line is the exception, whatever its
        class is called (``requests.exceptions.ReadTimeout`` ends in neither Error nor Exception)."""
        return any(line.startswith("  File ") for line in self.lines)

    def feed(self, text: str) -> None:
        line = clip(text)
        self.lines.append(line)
        if "server_args.py" in text:
            self.in_server_args = True
        if _CAPTURE_FRAME_RE.search(text):
            self.in_capture = True
        if self.expect_exc and not text[:1].isspace() and (
                EXCEPTION_LINE_RE.match(text) or (self.framed and _QUALIFIED_EXC_RE.match(text))):
            self.exc_line = line
            self.evidence = tuple(self.lines)
            self.after = []
            self.expect_exc = False
        elif self.exc_line is not None and len(self.after) < 3:
            self.after.append(line)

    def failure(self) -> Failure | None:
        if self.exc_line is None:
            if self.origin == "warmup":  # cut before the exception line: the header is all there is
                return Failure("warmup_failed", self.header.split("] ", 1)[-1], (self.header, *self.lines), None)
            if self.origin == "rank":  # "Scheduler hit an exception" is fatal, whatever the cut hid
                said = self.header.split("] ", 1)[-1].split(":", 1)[0]
                return Failure("exception", f"{said} (the log ends before its exception line)",
                               (self.header, *self.lines), self.rank, [self.rank] if self.rank is not None else [])
            return None
        exc = self.exc_line
        if self.origin == "warmup":
            return Failure("warmup_failed", f"Initialization failed. warmup error: {exc}",
                           (self.header, *self.evidence, *self.after), None, [], exc)
        main = self.origin in ("main", "tail")
        kind = classify_exception(exc, in_server_args=self.in_server_args and main)
        if kind == "oom" and self.in_capture:
            # Raised inside the capture without SGLang's "Capture cuda graph failed" around it (a paste cut
            # before the wrapper, a release that does not wrap it): a capture OOM all the same.
            kind = "oom_cuda_graph"
        # SGLang's own errors read best without the type; a foreign one (OSError from the Hub) keeps it.
        message = exception_message(exc, keep_type=main and kind in ("model_not_found", "exception"))
        rank = self.rank
        if kind == "rank_died":
            died = RANK_DIED_RE.search(exc)
            rank = int(died.group(1)) if died else rank
        evidence = tuple(x for x in (self.header, *self.evidence, *self.after) if x)
        return Failure(kind, message, evidence, rank, [rank] if rank is not None else [], exc)


def merge(current: Failure | None, new: Failure) -> Failure:
    """The same failure on another rank adds the rank; a specific cause replaces a generic one."""
    if current is None:
        return new
    if current.kind == new.kind and current.message == new.message:
        for rank in new.ranks:
            if rank not in current.ranks:
                current.ranks.append(rank)
        return current
    if current.kind in REFINES.get(new.kind, ()):
        new.ranks += [rank for rank in current.ranks if rank not in new.ranks]
        return new
    if current.kind in GENERIC_KINDS and new.kind not in GENERIC_KINDS:
        return new
    return current


def copy(failure: Failure | None) -> Failure | None:
    return None if failure is None else replace(failure, ranks=list(failure.ranks))


def freeze(failure: Failure | None, rank_kind: str = "TP") -> StartupFailure | None:
    """The report's failure; ``rank_kind``: what its rank numbers are (``StartupFailure.rank_kind``)."""
    if failure is None:
        return None
    ranks = tuple(sorted(failure.ranks))
    return StartupFailure(failure.kind, failure.message, tuple(failure.evidence),
                          failure.rank if failure.rank is not None else (ranks[0] if ranks else None),
                          ranks, failure.exception, failure.unknown_flags, rank_kind)
