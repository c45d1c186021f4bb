"""Remove the prefixes that log collectors put in front of SGLang's lines (pure).

People paste what their tool printed, not SGLang's stream:

- ``docker compose logs``: ``sglang  | `` or ``sglang-1  | `` (the service name padded to a column);
- ``kubectl logs --timestamps``: ``2026-01-01T00:00:00.123456789Z `` (RFC 3339, nanoseconds);
- journalctl: ``Dec 01 12:00:00 host unit[pid]: `` (and the other ``-o short*`` stamps);
- ``kubectl logs --prefix``: ``[pod/sglang-0/sglang] ``; torch's ``[rank3]: `` before a traceback line;
- a quoted paste (GitHub issues, mail): ``> ``;

and combinations of them (``> sglang-1  | 2026-…Z [2026-… TP0] …``). ``Unwrapper.unwrap`` removes them
before the line is parsed. A docker-style ``name | `` is the one shape a plain line can also have (a
line that merely contains ``|``), so it is removed only once that exact prefix has been seen in front of
an SGLang line (a timestamped record, a traceback, a usage block), or on two lines in a row: a plain
log's parse is unchanged.
"""

from __future__ import annotations

import re

# journalctl -o short / short-precise / short-iso / short-full, syslog-style captures.
JOURNAL_RE = re.compile(
    r"(?:[A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d|Z)?"
    r"|[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [A-Z]+"
    r"|\[ *\d+\.\d+\])"  # short-monotonic
    r" \S+ [^\s:]+?(?:\[\d+\])?:(?: |$)"
)
# kubectl logs --timestamps (and docker logs -t): an RFC 3339 stamp and one space, nothing else.
# Always UTC ("Z"): journalctl's short-iso stamp carries an offset and is followed by "host unit[pid]: ".
_K8S_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")
# kubectl logs --prefix: "[pod/sglang-0/sglang] "; torch's per-rank prefix before a Python line: "[rank3]: ".
_BRACKET_RE = re.compile(r"\[(?:pod/[^\]\s]+|rank\d+)\]:? ")
_HOST_UNIT_RE = re.compile(r"[\w.-]+ [\w@.-]+\[\d+\]: ")
# docker compose: a service (container) name, padding, "| " (the blank line of a traceback: "svc  |").
_COMPOSE_RE = re.compile(r"([A-Za-z0-9][\w.-]*)( +)\|(?: |$)")
# What proves that the rest of a line is SGLang's: a record stamp, a traceback, argparse's usage block.
_SGLANG_START_RE = re.compile(
    r"\[(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d)|Traceback \(most recent call last\)|usage: |"
    r"\S+: error: |\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|  File \"|"
    r"[A-Za-z_][\w.]*(?:Error|Exception)(?::|$)|/\S+\.py:\d+: \w*Warning: "
)
_MAX_PREFIXES = 64
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_journal(line: str) -> str:
    """The line without a journald prefix (unchanged when it has none)."""
    first = line[:1]
    if first and (first.isdigit() or first.isupper() or (first == "[" and line[1:2] in " 0123456789")):
        match = JOURNAL_RE.match(line)
        if match:
            return line[match.end():]
    return line


class Unwrapper:
    """Strips wrapper prefixes; remembers the docker-style prefixes proven to wrap SGLang lines."""

    __slots__ = ("_proven", "_last_candidate", "_fast", "wrapped")

    def __init__(self) -> None:
        self._proven: set[str] = set()
        self._last_candidate: str | None = None
        self._fast: str | None = None  # the last proven compose prefix, with its "| ": most lines carry it
        self.wrapped = 0  # lines a prefix was removed from

    def unwrap(self, line: str) -> str:
        """The line as SGLang printed it. Cheap when there is nothing to remove (the first character
        rules most shapes out)."""
        if line[:1] == "\x1b":  # a coloured collector prefix (docker compose on a terminal)
            line = _ANSI_RE.sub("", line)
        original = line
        fast = self._fast
        if fast is not None and line.startswith(fast):
            rest = line[len(fast):]
            first = rest[:1]
            if (first == "[" and rest[1:2].isdigit()) or first == " " or first == "\r":
                self.wrapped += 1  # the common case: a record, a frame or a meter behind the known prefix
                return rest
        for _ in range(4):  # combinations: "> svc | 2026-…Z [ts] …"
            before = line
            first = line[:1]
            if first == ">":
                line = line[2:] if line[1:2] == " " else line[1:]
            elif first.isdigit() and line[4:5] == "-" and line[10:11] == "T":
                match = _K8S_RE.match(line)
                if match:
                    line = line[match.end():]
                    unit = _HOST_UNIT_RE.match(line)  # journalctl -o short-iso --utc: "…Z host unit[pid]: "
                    if unit:
                        line = line[unit.end():]
                else:  # journalctl -o short-iso: the stamp (with an offset), then "host unit[pid]: "
                    line = strip_journal(line)
            elif first == "[" and line[1:5] in ("pod/", "rank"):
                match = _BRACKET_RE.match(line)
                if match:
                    line = line[match.end():]
            elif first.isupper() or first == "[":
                line = strip_journal(line)
            if first.isalnum() and line is before:
                line = self._compose(line)
            if line is before or line == before:
                break
        if line is not original and line != original:
            self.wrapped += 1
        return line

    def strip_proven(self, text: str) -> str:
        """``text`` without a compose prefix proven after it was read (the first of two lines in a row)."""
        match = _COMPOSE_RE.match(text) if self._proven and "|" in text[:80] else None
        if match and match.group(1) + match.group(2) in self._proven:
            return text[match.end():]
        return text

    def _compose(self, line: str) -> str:
        if "|" not in line[:80]:
            return line
        match = _COMPOSE_RE.match(line)
        if match is None:
            return line
        prefix = match.group(1) + match.group(2)  # the blank line "svc  |" has no space after the bar
        rest = line[match.end():]
        if prefix in self._proven:
            if match.group(0)[-1:] == " ":
                self._fast = match.group(0)
            return rest
        if len(self._proven) < _MAX_PREFIXES and (
                _SGLANG_START_RE.match(rest.lstrip("> ")) or prefix == self._last_candidate):
            self._proven.add(prefix)
            return rest
        self._last_candidate = prefix
        return line
