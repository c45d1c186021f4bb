"""The SSE decoder, fed SGLang-shaped streams in every possible split."""

from __future__ import annotations

import json
import random

import pytest

from deployctl.bench.sse import SseDecoder


def sglang_completion_stream(texts: list[str], completion_tokens: int) -> bytes:
    """The bytes of a /v1/completions stream as SGLang writes them (log facts §8)."""
    parts = []
    for text in texts:
        chunk = {
            "id": "abc",
            "object": "text_completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": None, "matched_stop": None}],
            "usage": None,
        }
        parts.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage = {"prompt_tokens": 5, "total_tokens": 5 + completion_tokens, "completion_tokens": completion_tokens}
    final = {"id": "abc", "object": "text_completion", "created": 1, "model": "m", "choices": [], "usage": usage}
    parts.append(b"data: " + json.dumps(final).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def decode_in_pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    decoder = SseDecoder()
    out: list[bytes] = []
    start = 0
    for cut in sorted(cuts) + [len(stream)]:
        out.extend(decoder.feed(stream[start:cut]))
        start = cut
    return out


def test_whole_stream_gives_each_chunk_then_done() -> None:
    stream = sglang_completion_stream(["Hel", "lo", " world"], 3)
    payloads = SseDecoder().feed(stream)
    assert payloads[-1] == b"[DONE]"
    texts = [json.loads(p)["choices"][0]["text"] for p in payloads[:3]]
    assert texts == ["Hel", "lo", " world"]
    assert json.loads(payloads[3])["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("seed", range(20))
def test_any_split_gives_the_same_events(seed: int) -> None:
    stream = sglang_completion_stream([f"t{i}" for i in range(30)], 30)
    whole = SseDecoder().feed(stream)
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(stream)), k=rng.randint(1, 200))
    assert decode_in_pieces(stream, cuts) == whole


def test_byte_at_a_time() -> None:
    stream = sglang_completion_stream(["a", "b"], 2)
    assert decode_in_pieces(stream, list(range(1, len(stream)))) == SseDecoder().feed(stream)


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_other_line_endings_split_anywhere(newline: bytes) -> None:
    lf = sglang_completion_stream(["x", "y"], 2)
    stream = lf.replace(b"\n", newline)
    expected = SseDecoder().feed(lf)
    for cut in range(1, len(stream)):
        assert decode_in_pieces(stream, [cut]) == expected


def test_multiline_data_comments_and_other_fields() -> None:
    stream = b": keep-alive\n\nevent: message\nid: 7\ndata: first\ndata:second\nretry: 10\n\n"
    assert SseDecoder().feed(stream) == [b"first\nsecond"]


def test_event_without_data_is_not_dispatched() -> None:
    assert SseDecoder().feed(b"event: ping\n\n: comment\n\n") == []


def test_incomplete_event_is_held_until_its_blank_line() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: {\"a\": 1}\n") == []
    assert decoder.feed(b"\n") == [b'{"a": 1}']


def test_data_without_space_after_colon_and_empty_data() -> None:
    assert SseDecoder().feed(b"data:x\n\ndata:\n\n") == [b"x", b""]
