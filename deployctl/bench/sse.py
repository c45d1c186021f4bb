"""Incremental, sans-IO decoder for Server-Sent Events (the ``text/event-stream`` of SGLang's streams).

Bytes go in as they arrive, in any split; complete events' ``data`` payloads come out. No socket, no
clock: the transport timestamps each read and hands the bytes here.

Follows the event-stream grammar (WHATWG HTML §9.2) as far as a load client needs it:
- lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a blank line dispatches the event;
- several ``data:`` lines in one event are joined with ``\\n``; one space after the colon is dropped;
- comments (``:`` lines) and other fields (``event``, ``id``, ``retry``) are ignored;
- an event without a ``data`` field is not dispatched; a trailing event without its blank line is
  held until more bytes arrive (a stream cut mid-event yields nothing for it).

SGLang writes ``data: {json}\\n\\n`` per chunk and ``data: [DONE]\\n\\n`` last, so the hot path is a
split on ``\\n\\n`` with one prefix check per event.
"""

from __future__ import annotations

# An event still open past this many bytes raises SseEventTooLong: a server that never ends an event
# must not grow the client's memory without bound (SGLang's events are a few kB).
MAX_EVENT_BYTES = 1 << 20


class SseEventTooLong(ValueError):
    """An event grew past ``MAX_EVENT_BYTES`` without its blank line."""


class SseDecoder:
    """Feed bytes with :meth:`feed`; get back the ``data`` payloads of the events they complete."""

    __slots__ = ("_buf", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[bytes]:
        if b"\r" in chunk or self._pending_cr:
            chunk = self._normalise(chunk)
        buf = self._buf + chunk if self._buf else chunk
        if b"\n\n" not in buf:
            self._keep(buf)
            return []
        *events, rest = buf.split(b"\n\n")
        self._keep(rest)
        out: list[bytes] = []
        for event in events:
            if event.startswith(b"data: ") and b"\n" not in event:
                out.append(event[6:])
            elif event:
                payload = _parse_event(event)
                if payload is not None:
                    out.append(payload)
        return out

    def _keep(self, rest: bytes) -> None:
        if len(rest) > MAX_EVENT_BYTES:
            self._buf = b""
            raise SseEventTooLong(f"an SSE event longer than {MAX_EVENT_BYTES} bytes without its blank line")
        self._buf = rest

    def _normalise(self, chunk: bytes) -> bytes:
        # A "\r" ending one read ends a line now; if the next read starts with "\n", that "\n" is
        # the second half of a "\r\n" split across reads and must not end another line.
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = chunk.endswith(b"\r")
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _parse_event(event: bytes) -> bytes | None:
    data: list[bytes] = []
    for line in event.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, sep, value = line.partition(b":")
        if name != b"data":
            continue
        if sep and value.startswith(b" "):
            value = value[1:]
        data.append(value)
    return b"\n".join(data) if data else None
