"""One invocation's log, as it is written: ``journalctl -o json`` in a subprocess, decoded safely.

The filter is ``_SYSTEMD_INVOCATION_ID=<id> + INVOCATION_ID=<id>``: the service's own lines carry the
first, PID 1's lines about the unit ("Started …", "Main process exited …") the second. Filtering by
invocation, never by unit name, is what keeps two runs' logs apart.

``-a`` makes journalctl send lines with control characters as data (``MESSAGE`` is then a list of byte
values), ``-n all`` starts at the invocation's first line (``-f`` alone starts ten lines back).
``JournalLine.text`` keeps ``\\r`` and ANSI escapes (the startup parser handles them); ``.display``
is the last progress-bar frame without colours, for people.

Reads are bounded to what the caller needs, never a server's whole history (an invocation can live for
weeks): ``read(since=, until=)`` asks journalctl for a time window (it seeks there through the journal's
index), ``read(stop_after=)`` stops journalctl at the line the caller was waiting for (the startup log
ends at the ready line), and ``max_lines`` caps any read.

The command prefix is configurable (``Journal(command=...)``) so the log of a sandboxed systemd is read
from outside with ``journalctl --root /proc/PID/root``, or over SSH.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Callable, Sequence

from deployctl.adapters.aio import bounded, kill_child
from deployctl.errors import SystemdError
from deployctl.startup.journal_line import JournalLine

# SGLang's server_args dump reaches 19 KB; as a JSON list of byte values a line is up to 4× longer.
_STREAM_LIMIT = 16 * 1024 * 1024
# No read returns more lines than this: a startup log is a few hundred, a benchmark trial's window a few
# thousand at most.
MAX_LINES = 200_000
_EXIT_WAIT_S = 5.0

log = logging.getLogger("deployctl.journal")


def decode_message(value: Any) -> str:
    """``MESSAGE`` as journalctl's JSON gives it: a string, a list of byte values, or null."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if value and isinstance(value[0], list):  # a field present several times: take the first
            value = value[0]
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def parse_entry(raw: bytes | str) -> JournalLine | None:
    """One line of ``journalctl -o json`` output → JournalLine (None for a line that is not an entry)."""
    try:
        entry = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(entry, dict) or "MESSAGE" not in entry:
        return None
    try:
        ts = int(entry.get("__REALTIME_TIMESTAMP", 0)) / 1e6
    except (TypeError, ValueError):
        ts = 0.0
    return JournalLine(
        ts=ts,
        text=decode_message(entry["MESSAGE"]),
        from_manager="_SYSTEMD_INVOCATION_ID" not in entry,
    )


def journal_argv(command: Sequence[str], invocation_id: str, *, follow: bool, lines: str = "all",
                 since: float | None = None, until: float | None = None) -> list[str]:
    """``since``/``until`` are epoch seconds (journalctl's ``@SECONDS`` form, microsecond precision)."""
    if not re.fullmatch(r"[0-9a-f]{32}", invocation_id):
        raise ValueError(f"not an invocation id: {invocation_id!r}")
    argv = [*command, "-o", "json", "--no-pager", "-a", "-n", lines]
    if since is not None:
        argv.append(f"--since=@{since:.6f}")
    if until is not None:
        argv.append(f"--until=@{until:.6f}")
    if follow:
        argv.append("-f")
    return [*argv, f"_SYSTEMD_INVOCATION_ID={invocation_id}", "+", f"INVOCATION_ID={invocation_id}"]


class Follower:
    """An async iterator over one invocation's lines; ``aclose()`` (or ``async with``) ends journalctl."""

    def __init__(self, argv: list[str]) -> None:
        self._argv = argv
        self._proc: asyncio.subprocess.Process | None = None
        self._closed = False
        self._eof = False

    async def _start(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            try:
                self._proc = await asyncio.create_subprocess_exec(
                    *self._argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL, limit=_STREAM_LIMIT,
                )
            except OSError as exc:
                raise SystemdError(f"cannot run {self._argv[0]}: {exc.strerror}",
                                   hint="journalctl (systemd) must be installed on the host") from exc
        return self._proc

    def __aiter__(self) -> "Follower":
        return self

    async def __anext__(self) -> JournalLine:
        if self._closed:
            raise StopAsyncIteration
        proc = await self._start()
        assert proc.stdout is not None
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                self._eof = True
                raise StopAsyncIteration
            line = parse_entry(raw)
            if line is not None:
                return line

    async def aclose(self) -> None:
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not self._eof:  # after EOF journalctl has exited by itself
            kill_child(proc)
        try:
            await bounded(proc.wait(), _EXIT_WAIT_S)
        except asyncio.TimeoutError:  # its pipe still open somewhere: do not hang the caller on it
            log.warning("journalctl (pid %s) did not end within %g s of being stopped", proc.pid, _EXIT_WAIT_S)

    async def __aenter__(self) -> "Follower":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Journal:
    def __init__(self, command: Sequence[str] = ("journalctl",)) -> None:
        self.command = tuple(command)

    def follow(self, invocation_id: str) -> Follower:
        """Every line of the invocation from its first, then new ones as they are written, until closed."""
        return Follower(journal_argv(self.command, invocation_id, follow=True))

    async def read(self, invocation_id: str, *, last: int | None = None, since: float | None = None,
                   until: float | None = None, stop_after: Callable[[JournalLine], bool] | None = None,
                   max_lines: int = MAX_LINES) -> list[JournalLine]:
        """The invocation's lines written so far: the last ``last``; those stamped in [``since``, ``until``]
        (epoch seconds); up to and including the first for which ``stop_after`` is true; never more than
        ``max_lines`` (the first ones)."""
        argv = journal_argv(self.command, invocation_id, follow=False, lines=str(last) if last else "all",
                            since=since, until=until)
        lines: list[JournalLine] = []
        async with Follower(argv) as follower:
            async for line in follower:
                lines.append(line)
                if len(lines) >= max_lines or (stop_after is not None and stop_after(line)):
                    break  # leaving the block stops journalctl: the rest is never read
        return lines


def follow(invocation_id: str, *, command: Sequence[str] = ("journalctl",)) -> Follower:
    return Journal(command).follow(invocation_id)

