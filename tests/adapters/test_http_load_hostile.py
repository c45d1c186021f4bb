"""The load client against a broken or hostile server: every oddity costs one request, never the sweep,
and nothing the server sends grows the client's memory without bound."""

from __future__ import annotations

import asyncio
import json

import pytest

from deployctl.adapters.http_load import MAX_ERROR_BODY, LoadClient, LoadError, _Connection
from deployctl.bench.metrics import StreamRecorder
from deployctl.bench.plan import LevelPlan, Workload
from deployctl.bench.sse import MAX_EVENT_BYTES, SseDecoder, SseEventTooLong
from deployctl.load.trial import run_trial

GOOD = (b"data: " + json.dumps({"choices": [{"text": "a"}], "usage": None}).encode() + b"\n\n"
        + b"data: " + json.dumps({"choices": [], "usage": {"completion_tokens": 1, "prompt_tokens": 3}}).encode()
        + b"\n\ndata: [DONE]\n\n")


def _length(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.fixture
async def scripted():
    """A server that answers request n with ``responses[n % len]`` and keeps the connection open."""
    servers = []

    async def start(*responses: bytes) -> str:
        count = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal count
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                    response = responses[count % len(responses)]
                    count += 1
                    writer.write(response)
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("chunk", [b"[1, 2]", b'"text"', b"42", b"null", b'{"choices": [7]}', b'{"choices": "x"}',
                                   b'{"usage": [1]}'])
async def test_a_json_chunk_that_is_not_the_expected_object_fails_that_request(scripted, chunk: bytes) -> None:
    url = await scripted(_length(b"data: " + chunk + b"\n\n" + GOOD))
    recorder = StreamRecorder(0.0, 3, 1)
    async with LoadClient(url, timeout_s=5) as client:
        try:
            await client.stream("/v1/completions", b"{}", recorder)
            error = None
        except LoadError as exc:
            error = exc.kind
    record = recorder.finish(1.0, error)
    assert not record.sample.ok and record.sample.error in ("protocol", "bad_chunk")


async def test_one_bad_stream_fails_one_request_and_the_trial_goes_on(scripted) -> None:
    url = await scripted(_length(GOOD), _length(b"data: [1]\n\n" + GOOD), _length(GOOD))
    level = LevelPlan(concurrency=3, trial=0, requests=12, workload=Workload("m", 3, 1), first_index=0)
    async with LoadClient(url, timeout_s=5) as client:
        run = await asyncio.wait_for(run_trial(client, level), 30)
    errors = [r.sample.error for r in run.records]
    assert len(errors) == 12 and not run.interrupted
    assert errors.count("protocol") == 4 and errors.count(None) == 8


@pytest.mark.parametrize(("response", "what"), [
    (b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 200_000, "headers longer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 200_000, "chunk-size line longer"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\ndata: " + b"a" * 2_000_000, "SSE event longer"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "bad Content-Length"),
])
async def test_unbounded_input_is_a_protocol_failure_not_a_timeout(scripted, response: bytes, what: str) -> None:
    url = await scripted(response)
    async with LoadClient(url, timeout_s=20) as client:
        with pytest.raises(LoadError) as info:
            await asyncio.wait_for(client.stream("/v1/completions", b"{}", StreamRecorder(0.0, 1, 1)), 10)
    assert info.value.kind == "protocol" and what in str(info.value)


def test_an_error_body_is_kept_only_as_far_as_its_message_needs() -> None:
    loop = asyncio.new_event_loop()
    try:
        conn = _Connection()
        conn.connection_made(_NullTransport())
        done = loop.create_future()
        conn.begin(lambda t, p: None, done)
        conn.data_received(b"HTTP/1.1 503 Busy\r\nContent-Length: 3000000\r\n\r\n")
        for _ in range(100):
            conn.data_received(b"x" * 10_000)
        assert sum(map(len, conn._error_body)) <= MAX_ERROR_BODY
        conn.data_received(b"y" * 2_000_000)
        assert isinstance(done.exception(), LoadError) and done.exception().kind == "http_503"
    finally:
        loop.close()


def test_sse_decoder_bounds_an_open_event() -> None:
    decoder = SseDecoder()
    decoder.feed(b"data: " + b"a" * (MAX_EVENT_BYTES // 2))
    with pytest.raises(SseEventTooLong):
        decoder.feed(b"a" * MAX_EVENT_BYTES)
    assert decoder.feed(b"data: ok\n\n") == [b"ok"]  # the decoder is usable again (a new request resets it anyway)


class _NullTransport(asyncio.Transport):
    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass
