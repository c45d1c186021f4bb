"""Turn raw captured text into log records: the one place that knows how SGLang's stream is mangled.

A captured stream is not one record per line. tqdm writes ``'\\r' + meter`` without a newline, so the
next process's record is glued after the meter; journald may prepend its own ``Mon DD HH:MM:SS host
unit[pid]: `` prefix; deprecation notices carry ANSI colours; ``SGLANG_LOG_MS`` adds ``.mmm`` to the
timestamp. ``split_records`` undoes all of that and yields one ``Record`` per SGLang log record or bare
line, so the parser never sees a ``\\r`` or an escape sequence.
"""

from __future__ import annotations

import re
from typing import Iterator, NamedTuple

from deployctl.startup.wrappers import strip_journal

# Order differs by version (A: DP TP EP PP; C+: DP PP ATTN_CP MOE_DP TP EP), so accept any order.
_RANK_PART = r"(?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+"
# 0.2.x–0.3.5 stamp the time of day only (``datefmt="%H:%M:%S"``, 0.3.2 utils.py:671): "[00:19:29 TP0] ".
PREFIX_RE = re.compile(
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d(?=[\].,]| (?:" + _RANK_PART + r")))"
    r"(?:[.,](\d{1,6}))?((?: " + _RANK_PART + r")*)\] ?"
)
_RANK_PART_RE = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_UVICORN_LEVEL_RE = re.compile(r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")


class Rank(NamedTuple):
    """A scheduler process's parallel coordinates, from its log prefix (absent parts are None)."""

    tp: int | None = None
    dp: int | None = None
    pp: int | None = None
    ep: int | None = None
    attn_cp: int | None = None
    moe_dp: int | None = None

    @property
    def label(self) -> str:
        parts = [("DP", self.dp), ("PP", self.pp), ("ATTN_CP", self.attn_cp), ("MOE_DP", self.moe_dp),
                 ("TP", self.tp), ("EP", self.ep)]
        return " ".join(f"{name}{value}" for name, value in parts if value is not None)


class Record(NamedTuple):
    """One log record. ``ts`` is ``YYYY-MM-DD HH:MM:SS`` (+ ``ms``) or None for a bare line;
    ``rank`` is None for the main process, the detokenizer and bare lines. (A tuple: the parser
    makes one per record, and a frozen dataclass costs three times as much to build.)"""

    text: str
    ts: str | None = None
    ms: int | None = None
    rank: Rank | None = None
    fragment: bool = False  # text before a glued record or after a '\r' (a progress meter, usually)


_RANK_CACHE: dict[str, Rank] = {}


def _rank(tag: str) -> Rank | None:
    if not tag:
        return None
    cached = _RANK_CACHE.get(tag)
    if cached is None:
        fields = {name.lower(): int(num) for name, num in _RANK_PART_RE.findall(tag)}
        cached = Rank(**fields)
        if len(_RANK_CACHE) < 4096:
            _RANK_CACHE[tag] = cached
    return cached


EMBEDDED_RE = re.compile(r"\[(?:\d{4}-\d\d-\d\d \d\d:|\d\d:\d\d:\d\d[\] ])")


def simple_record(line: str) -> Record | None:
    """The common case in one regex match: a single prefixed record with no '\\r', ANSI or journald
    prefix and nothing glued to it. None means: use ``split_records``."""
    if not line.startswith("[") or "\r" in line or "\x1b" in line:
        return None
    match = PREFIX_RE.match(line)
    if match is None or EMBEDDED_RE.search(line, match.end()) is not None:
        return None
    text = line[match.end():].rstrip()
    if text[:1] in "IWEDC" and ":" in text[:9]:
        text = _UVICORN_LEVEL_RE.sub("", text, count=1)
    ms = match.group(2)
    return Record(text, match.group(1), int(ms[:3].ljust(3, "0")) if ms else None, _rank(match.group(3).strip()))


def split_records(raw: str) -> Iterator[Record]:
    """Yield the records in one raw line (which may hold several, glued by ``\\r`` meters)."""
    line = raw.rstrip("\n")
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    line = strip_journal(line)
    pieces = line.split("\r") if "\r" in line else (line,)
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        if "[" not in piece:
            yield Record(piece.rstrip(), fragment=index > 0)
            continue
        matches = list(PREFIX_RE.finditer(piece))
        if not matches:
            yield Record(piece.rstrip(), fragment=index > 0)
            continue
        head = piece[: matches[0].start()]
        if head.strip():
            yield Record(head.rstrip(), fragment=True)
        for number, match in enumerate(matches):
            end = matches[number + 1].start() if number + 1 < len(matches) else len(piece)
            text = piece[match.end():end].rstrip()
            if text[:1] in "IWEDC" and ":" in text[:9]:
                text = _UVICORN_LEVEL_RE.sub("", text, count=1)
            ms = match.group(2)
            yield Record(text, ts=match.group(1), ms=int(ms[:3].ljust(3, "0")) if ms else None,
                         rank=_rank(match.group(3).strip()))
