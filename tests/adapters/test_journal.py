"""Journal entries decoded safely, and the follower's subprocess plumbing (with a stand-in journalctl)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from deployctl.adapters.journal import (
    Journal,
    decode_message,
    journal_argv,
    parse_entry,
)
from deployctl.startup.journal_line import JournalLine

INV = "0123456789abcdef0123456789abcdef"


def entry(message: object, *, own: bool = True, us: int = 1_700_000_000_123_456) -> str:
    fields: dict[str, object] = {"__REALTIME_TIMESTAMP": str(us), "MESSAGE": message}
    fields["_SYSTEMD_INVOCATION_ID" if own else "INVOCATION_ID"] = INV
    return json.dumps(fields)


def test_plain_string_message() -> None:
    line = parse_entry(entry("Load weight begin."))
    assert line == JournalLine(ts=1_700_000_000.123456, text="Load weight begin.", from_manager=False)


def test_message_as_byte_values_keeps_cr_and_ansi() -> None:
    raw = "\x1b[32mCapturing batches (bs=8):  50%|\rCapturing batches (bs=4):  75%|\x1b[0m".encode()
    line = parse_entry(entry(list(raw)))
    assert line is not None and line.text == raw.decode()
    assert line.display == "Capturing batches (bs=4):  75%|"


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    line = parse_entry(entry([0x66, 0x6F, 0xFF, 0x6F]))
    assert line is not None and line.text == "fo\ufffdo"


def test_pid1_message_is_marked() -> None:
    line = parse_entry(entry("x.service: Main process exited, code=exited, status=1/FAILURE", own=False))
    assert line is not None and line.from_manager


@pytest.mark.parametrize("raw", ["", "not json", "[1, 2]", json.dumps({"__CURSOR": "s=1"})])
def test_non_entries_are_skipped(raw: str) -> None:
    assert parse_entry(raw) is None


def test_decode_message_variants() -> None:
    assert decode_message(None) == ""
    assert decode_message([[104, 105], [120]]) == "hi"
    assert decode_message(7) == "7"


def test_argv_filters_by_invocation_both_fields() -> None:
    argv = journal_argv(("journalctl", "--root", "/proc/1/root"), INV, follow=True)
    assert argv[:3] == ["journalctl", "--root", "/proc/1/root"]
    assert ["-a", "-n", "all", "-f"] == argv[6:10]
    assert argv[-3:] == [f"_SYSTEMD_INVOCATION_ID={INV}", "+", f"INVOCATION_ID={INV}"]
    with pytest.raises(ValueError):
        journal_argv(("journalctl",), "abc; rm -rf /", follow=False)


def fake_journalctl(tmp_path: Path, lines: list[str]) -> tuple[str, ...]:
    """A stand-in for journalctl that prints the given JSON lines and ignores its arguments."""
    data = tmp_path / "entries.jsonl"
    data.write_text("".join(line + "\n" for line in lines))
    script = tmp_path / "fake_journalctl.py"
    script.write_text(f"import sys\nsys.stdout.write(open({str(data)!r}).read())\n")
    return (sys.executable, str(script))


async def test_follower_streams_a_long_line_whole(tmp_path: Path) -> None:
    # 20 KB with control characters travels as a list of byte values: ~80 KB of JSON on one line.
    long = ("server_args=ServerArgs(" + "x" * 20_000 + ")\r").encode()
    journal = Journal(fake_journalctl(tmp_path, [entry("first"), entry(list(long)), "garbage", entry("last")]))
    async with journal.follow(INV) as follower:
        got = [line.text async for line in follower]
    assert got == ["first", long.decode(), "last"]


async def test_read_returns_every_line(tmp_path: Path) -> None:
    journal = Journal(fake_journalctl(tmp_path, [entry("a"), entry("b", own=False)]))
    lines = await journal.read(INV)
    assert [(line.text, line.from_manager) for line in lines] == [("a", False), ("b", True)]


async def test_missing_journalctl_is_a_systemd_error(tmp_path: Path) -> None:
    from deployctl.errors import SystemdError

    with pytest.raises(SystemdError):
        await Journal((str(tmp_path / "no-such-journalctl"),)).read(INV)


async def test_a_closed_follower_ends_and_starts_nothing(tmp_path: Path) -> None:
    journal = Journal(fake_journalctl(tmp_path, [entry("a")]))
    follower = journal.follow(INV)
    await follower.aclose()
    assert [line async for line in follower] == []


def test_argv_asks_journalctl_for_the_time_window() -> None:
    argv = journal_argv(("journalctl",), INV, follow=False, since=1_700_000_000.5, until=1_700_000_010.25)
    assert "--since=@1700000000.500000" in argv and "--until=@1700000010.250000" in argv
    assert not any(a.startswith(("--since", "--until")) for a in journal_argv(("journalctl",), INV, follow=False))


async def test_read_stops_at_the_line_asked_for_and_at_the_cap(tmp_path: Path) -> None:
    lines = [entry(f"startup {i}") for i in range(5)] + [entry("ready")] + [entry(f"serving {i}") for i in range(50)]
    journal = Journal(fake_journalctl(tmp_path, lines))
    got = await journal.read(INV, stop_after=lambda line: line.text == "ready")
    assert [line.text for line in got] == [f"startup {i}" for i in range(5)] + ["ready"]
    assert len(await journal.read(INV, max_lines=7)) == 7
