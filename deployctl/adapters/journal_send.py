"""Structured journal entries over systemd-journald's native protocol: one datagram to its socket.

No compiled binding (python-systemd): the protocol is ``NAME=value`` lines; a value holding a newline
is sent as ``NAME\\n`` + its length (64-bit little endian) + the bytes + ``\\n``. Where journald is not
running (a container, a test), sending is a no-op that says so: the journal is not the only record.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Mapping

JOURNAL_SOCKET = Path("/run/systemd/journal/socket")
PRIORITY = {"err": 3, "warning": 4, "notice": 5, "info": 6}


def encode(fields: Mapping[str, str]) -> bytes:
    out = bytearray()
    for name, value in fields.items():
        data = str(value).encode()
        if b"\n" in data:
            out += name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += name.encode() + b"=" + data + b"\n"
    return bytes(out)


def send(message: str, *, priority: str = "info", fields: Mapping[str, str] | None = None,
         identifier: str = "deployctl", path: Path = JOURNAL_SOCKET) -> bool:
    """Log ``message`` with ``fields`` (upper-case names); False when journald could not be reached."""
    entry = {"MESSAGE": message, "PRIORITY": str(PRIORITY[priority]), "SYSLOG_IDENTIFIER": identifier,
             **(fields or {})}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(encode(entry), str(path))
    except OSError:
        return False  # no journald here (or an entry over the datagram limit): stderr still says it
    return True
