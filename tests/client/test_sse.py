"""SSE parsing: chunk boundaries anywhere, comments, CRLF/CR, multi-line data, errors, [DONE]."""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from console.client.sse import DONE, SSEEvent, SSEParser
from console.client.stream import OpenAIStreamSink, error_message
from console.client.timing import RequestRecord, compute

# A real llama-server stream, kept with the other real payloads (tests/fixtures/samples/SOURCES.md).
SAMPLE = Path(__file__).parents[1] / "fixtures" / "samples" / "llamacpp-real-server-stream.txt"


def sample_bytes() -> bytes:
    return SAMPLE.read_bytes()


def feed_all(parser: SSEParser, data: bytes, cuts: list[int]) -> list[SSEEvent]:
    out: list[SSEEvent] = []
    prev = 0
    for c in [*cuts, len(data)]:
        out.extend(parser.feed(data[prev:c]))
        prev = c
    return out


def test_real_llamacpp_stream_in_one_piece() -> None:
    events = SSEParser().feed(sample_bytes())
    assert events[-1].data == DONE
    assert len(events) == 12
    first = orjson.loads(events[0].data)
    assert first["choices"][0]["delta"]["role"] == "assistant"


@pytest.mark.parametrize("seed", range(20))
def test_chunk_boundaries_anywhere(seed: int) -> None:
    data = sample_bytes()
    whole = SSEParser().feed(data)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), rng.randint(1, 60)))
    assert feed_all(SSEParser(), data, cuts) == whole


def test_every_single_byte_split_with_crlf() -> None:
    data = sample_bytes().replace(b"\n", b"\r\n")
    whole = SSEParser().feed(sample_bytes())
    parser = SSEParser()
    got = feed_all(parser, data, list(range(1, len(data))))
    assert got == whole
    assert parser.pending == 0


def test_lone_cr_line_endings() -> None:
    data = b"data: a\r\rdata: b\r\r"
    parser = SSEParser()
    got = feed_all(parser, data, [7, 8])
    assert [e.data for e in got] == [b"a"]  # the last CR may be half of a CRLF: held back
    assert [e.data for e in parser.close()] == [b"b"]


def test_comments_pings_and_fields() -> None:
    data = b": ping\n\n:keep-alive\n\nevent: error\ndata: {\"x\":1}\nid: 7\n\ndata:nospace\n\ndata: [DONE]\n\n"
    events = SSEParser().feed(data)
    assert events == [SSEEvent(b'{"x":1}', "error"), SSEEvent(b"nospace"), SSEEvent(DONE)]


def test_multiline_data_joined_with_newline() -> None:
    events = SSEParser().feed(b"data: {\"a\":\ndata: 1}\n\n")
    assert orjson.loads(events[0].data) == {"a": 1}


def test_unterminated_event_is_held() -> None:
    p = SSEParser()
    assert p.feed(b"data: {\"a\": 1}\n") == []
    assert p.pending > 0
    assert p.feed(b"\n") == [SSEEvent(b'{"a": 1}')]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"error": {"message": "bad", "type": "BadRequestError", "code": 400}}, "bad (BadRequestError)"),  # vLLM
        ({"object": "error", "message": "too long", "type": "invalid", "code": 400}, "too long (invalid)"),  # SGLang
        ({"error": "Input validation error", "error_type": "validation"}, "Input validation error (validation)"),  # TGI
        ({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
         "Loading model (unavailable_error)"),  # llama.cpp
        ({"error": "1 validation error for CompletionRequest"}, "1 validation error for CompletionRequest"),  # trtllm
        ({"choices": []}, None),
    ],
)
def test_error_shapes(body: dict[str, object], expected: str | None) -> None:
    assert error_message(body) == expected


def test_sink_on_real_stream_ignores_role_chunk_and_reads_usage() -> None:
    rec = RequestRecord(index=0, t_send_ns=1_000, status=200)
    sink = OpenAIStreamSink(rec, keep_text=True)
    data = sample_bytes()
    # one read per event, 1 ms apart
    t = 2_000_000
    for block in data.split(b"\n\n"):
        if block:
            sink.on_body(block + b"\n\n", t)
            t += 1_000_000
    sink.on_end(t)
    assert rec.text == " alert now who with alive own than it"
    assert len(rec.event_t_ns) == 8  # role-only and finish chunks are not token-bearing
    assert rec.t_first_event_ns == 2_000_000  # role chunk: diagnostic only
    assert rec.event_t_ns[0] == 3_000_000
    assert rec.completion_tokens == 8 and rec.prompt_tokens == 30 and rec.cached_tokens == 0
    assert rec.finish_reason == "length"
    m = compute(rec)
    assert m.ttft_ms == pytest.approx((3_000_000 - 1_000) / 1e6)
    assert m.output_tokens == 8 and not m.tokens_estimated and m.bundling == 1.0


def test_stream_error_event_is_recorded() -> None:
    rec = RequestRecord(index=0, t_send_ns=1, status=200)
    sink = OpenAIStreamSink(rec)
    sink.on_body(b'data: {"error": {"message": "boom", "type": "InternalServerError", "code": 500}}\n\n', 5)
    assert rec.error is not None and "boom" in rec.error
