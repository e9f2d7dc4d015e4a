"""Group 7 of the hostile-input suite: no request vanishes from the bench's counts.

Fake servers on 127.0.0.1 send one bad shape each (a line without ``data:``, invalid JSON, a
top-level array, ``choices: "abc"``, ``finish_reason: {}``...). Every request must end exactly once,
as ok or failed with a reason that names the problem (never the connection), with no traceback and
no asyncio error; failed requests add nothing to throughput; ``--max-duration`` bounds warmup and
measured requests alike; the SSE reader is linear in the bytes it gets; an engine's error body is
scrubbed of credentials before it reaches the JSON or the terminal.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from console.client.aggregate import summarize
from console.client.loadgen import LevelRaw, LevelSpec, Target, run_level
from console.client.sse import MAX_EVENT_BYTES, SSEEventTooLarge, SSEParser
from console.client.stream import GenParams
from console.client.workloads import WorkloadSpec, generate
from console.profiles import get_profile
from console.target import EngineTarget
from tests.hostile._bench_fakes import (
    chunk,
    endless,
    fake_server,
    good_stream,
    run_bench,
    streams,
    usage,
)

DONE = b"data: [DONE]\n\n"


def ev(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def level(reply: Any, n: int = 3, *, warmup: int = 0, max_duration: float | None = None,
                timeout: float = 30.0, concurrency: int = 1) -> tuple[LevelRaw, dict[str, Any]]:  # fmt: skip
    with fake_server(reply) as srv:
        target = Target(EngineTarget("fake", get_profile("vllm"), srv.url), "m")
        spec = LevelSpec("closed", concurrency, num_prompts=n, warmup=warmup, max_duration=max_duration)
        prompts = generate(WorkloadSpec(input_len=8, output_len=4), n + warmup, 0)
        raw = await run_level(target, spec, prompts, GenParams(max_tokens=4, fixed_length=True),
                              scrape_metrics=False, request_timeout=timeout)  # fmt: skip
    return raw, summarize(raw)


def assert_counted_once(raw: LevelRaw, summary: dict[str, Any]) -> None:
    req = summary["requests"]
    assert req["sent"] == req["completed"] + req["failed"] + req["cut"], req
    for r in raw.records:
        if not r.ok:
            assert r.error or r.cancelled, r


@pytest.fixture
def no_async_noise(caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> Any:
    """Fails the test if asyncio logged anything (a callback's traceback, "Task exception was never
    retrieved") or a traceback reached stderr."""
    caplog.set_level(logging.WARNING, logger="asyncio")
    yield
    noise = [r.getMessage() for r in caplog.get_records("call") if r.name.startswith("asyncio")]
    assert not noise, noise
    err = capsys.readouterr().err
    assert "Traceback" not in err and "never retrieved" not in err, err


# (id, events of the stream, a word the failure reason must hold)
MALFORMED_STREAMS: list[tuple[str, list[bytes], str]] = [
    ("json-without-data-prefix", [b'{"choices": [{"text": "x"}]}\n\n', DONE], "without data"),
    ("unknown-field-line", [b"event: message\nfoo: bar\n\n", DONE], "without data"),
    ("invalid-json", [b"data: {not json\n\n", DONE], "not JSON"),
    ("truncated-json", [b'data: {"choices": [{"te\n\n', DONE], "not JSON"),
    ("nan-usage", [chunk("x"), b'data: {"choices": [], "usage": {"completion_tokens": NaN}}\n\n', DONE], "not JSON"),
    ("infinity-usage", [chunk("x"), b'data: {"choices": [], "usage": {"completion_tokens": Infinity}}\n\n'],
     "not JSON"),
    ("top-level-array", [b"data: [1, 2]\n\n", DONE], "array"),
    ("top-level-string", [b'data: "x"\n\n', DONE], "string"),
    ("top-level-number", [b"data: 5\n\n", DONE], "number"),
    ("top-level-null", [b"data: null\n\n", DONE], "null"),
    ("only-comments", [b": ping\n\n", b": ping\n\n"], "without a token"),
    ("only-done", [DONE], "without a token"),
    ("empty-text-chunks", [chunk(""), chunk("", finish="stop"), DONE], "without a token"),
]


@pytest.mark.parametrize(("events", "word"), [pytest.param(e, w, id=i) for i, e, w in MALFORMED_STREAMS])
async def test_a_malformed_stream_fails_each_request_with_its_reason(
    events: list[bytes], word: str, no_async_noise: None
) -> None:
    raw, summary = await level(streams(events))
    assert_counted_once(raw, summary)
    assert summary["requests"]["failed"] == 3 and summary["requests"]["completed"] == 0
    for r in raw.records:
        assert r.error is not None and word in r.error, r.error
        assert "connection" not in r.error


def choice(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, **fields}]}


# Wrong JSON types in a chunk: each ends its request failed, naming the field.
WRONG_TYPES: list[tuple[str, dict[str, Any], str]] = [
    ("choices-string", {"choices": "abc"}, "choices"),
    ("choices-number", {"choices": 5}, "choices"),
    ("choices-object", {"choices": {"text": "x"}}, "choices"),
    ("choices-of-strings", {"choices": ["a"]}, "choices[0]"),
    ("choices-of-numbers", {"choices": [5]}, "choices[0]"),
    ("delta-number", choice(delta=5), "delta"),
    ("delta-string", choice(delta="x"), "delta"),
    ("delta-content-number", choice(delta={"content": 7}), "delta.content"),
    ("delta-content-array", choice(delta={"content": ["a"]}), "delta.content"),
    ("delta-reasoning-number", choice(delta={"reasoning_content": 5}), "reasoning"),
    ("delta-tool-calls-string", choice(delta={"tool_calls": "x"}), "tool_calls"),
    ("text-number", choice(text=7), "text"),
    ("text-object", choice(text={}), "text"),
    ("finish-reason-object", choice(text="x", finish_reason={}), "finish_reason"),
    ("finish-reason-array", choice(text="x", finish_reason=[1]), "finish_reason"),
    ("finish-reason-number", choice(text="x", finish_reason=5), "finish_reason"),
    ("usage-empty-array", {"choices": [], "usage": []}, "usage"),
    ("usage-array", {"choices": [], "usage": [1]}, "usage"),
    ("usage-string", {"choices": [], "usage": "abc"}, "usage"),
    ("usage-number", {"choices": [], "usage": 5}, "usage"),
    ("details-number", {"choices": [], "usage": {"prompt_tokens": 8, "prompt_tokens_details": 5}}, "details"),
]


@pytest.mark.parametrize(("obj", "word"), [pytest.param(o, w, id=i) for i, o, w in WRONG_TYPES])
async def test_a_wrong_json_type_fails_the_request_not_the_run(obj: dict[str, Any], word: str,
                                                               no_async_noise: None) -> None:  # fmt: skip
    raw, summary = await level(streams([chunk("a"), ev(obj), chunk("b"), DONE]))
    assert_counted_once(raw, summary)
    assert summary["requests"]["failed"] == 3, summary["requests"]
    for r in raw.records:
        assert r.error is not None and r.error.startswith(("malformed", "bad usage")) and word in r.error, r.error
        assert "connection closed" not in r.error


async def test_a_bad_request_among_good_ones_is_counted_once(no_async_noise: None) -> None:
    served = iter(range(100))

    def reply(h: Any, body: dict[str, Any]) -> None:
        bad = next(served) % 2 == 1
        h.stream([chunk("a"), ev({"choices": "abc"}), DONE] if bad else good_stream(4))

    raw, summary = await level(reply, n=6)
    assert_counted_once(raw, summary)
    assert (summary["requests"]["completed"], summary["requests"]["failed"]) == (3, 3)
    assert summary["tokens"]["output_total"] == 12


async def test_failed_requests_add_nothing_to_throughput(no_async_noise: None) -> None:
    """Even requests stream 4 tokens and then an error event: failed. Only the ok requests' tokens
    count, in the whole-run and in the steady-state throughput alike."""
    served = iter(range(100))

    def reply(h: Any, body: dict[str, Any]) -> None:
        i = next(served)
        tail = [ev({"error": {"message": "boom", "type": "server_error"}})] if i % 2 == 1 else []
        h.stream([*(chunk(f"t{k} ") for k in range(4)), *tail, chunk(None, usage=usage(4), finish="length"), DONE],
                 gap=0.002)  # fmt: skip

    _, summary = await level(reply, n=4)
    assert (summary["requests"]["completed"], summary["requests"]["failed"]) == (2, 2)
    tp = summary["throughput"]
    assert tp["output_tput"] * tp["duration_s"] == pytest.approx(8.0)
    # Steady window: from the first send to the last send; requests 0-2 lie inside it, and of them
    # only 0 and 2 succeeded: 8 tokens (a failed request's 4 would make it 12).
    assert tp["steady_output_tput"] * tp["steady_window_s"] == pytest.approx(8.0)


@pytest.mark.parametrize("warmup", [1, 0], ids=["warmup", "measured"])
async def test_max_duration_cuts_an_endless_stream(warmup: int, no_async_noise: None) -> None:
    t0 = time.monotonic()
    raw, summary = await level(endless(0.05), n=2, warmup=warmup, max_duration=1.0, timeout=60.0)
    took = time.monotonic() - t0
    assert took < 15, f"an endless stream ran {took:.0f} s despite --max-duration 1"
    assert_counted_once(raw, summary)
    cut = [r for r in raw.records if r.error and "max duration" in r.error]
    assert len(cut) == 1 and cut[0].warmup == bool(warmup) and cut[0].cut
    assert raw.stopped_early.startswith("max duration") and not raw.stopped_on_errors
    # Cut short by the time limit is no failure of the engine's: counted apart, no error rate.
    req = summary["requests"]
    assert (req["cut"], req["failed"]) == ((0, 0) if warmup else (1, 0)), req
    assert not req["error_rate"], req


async def test_an_oversized_event_fails_with_a_clear_reason(no_async_noise: None) -> None:
    def reply(h: Any, body: dict[str, Any]) -> None:
        h.start_stream()
        piece = b"data: " + b"x" * (1 << 20)
        for _ in range(MAX_EVENT_BYTES // len(piece) + 4):  # no blank line, ever
            h.write_chunk(piece)
        h.end_stream()

    raw, summary = await level(reply, n=1)
    (r,) = raw.records
    assert summary["requests"]["failed"] == 1
    assert r.error is not None and "exceeded" in r.error and str(MAX_EVENT_BYTES) in r.error


def _feed_cpu(size: int, piece: int = 4096) -> float:
    parser = SSEParser()
    data = b"data: " + b"y" * size
    t = time.process_time()
    for i in range(0, len(data), piece):
        parser.feed_fast(data[i : i + piece])
    (one,) = parser.feed_fast(b"\n\n")
    t = time.process_time() - t
    assert one == b"y" * size
    return t


def test_one_big_event_costs_time_linear_in_its_size() -> None:
    """Fed in 4 KiB reads, an event 4x the size costs about 4x the CPU (linear), not 16x (a copy of
    the growing buffer per read). 12 MiB that way would take many seconds if quadratic."""
    _feed_cpu(1 << 20)  # warm up
    small = min(_feed_cpu(3 << 20) for _ in range(2))
    big = _feed_cpu(12 << 20)
    assert big < 8 * max(small, 0.002), (small, big)


def test_an_event_over_the_cap_raises_too_large() -> None:
    parser = SSEParser(max_event=1000)
    parser.feed_fast(b"data: " + b"z" * 600)
    with pytest.raises(SSEEventTooLarge, match="1000"):
        parser.feed_fast(b"z" * 600)
    assert parser.pending == 0  # nothing kept after the refusal


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 13])
def test_events_split_anywhere_come_out_whole(cut: int) -> None:
    stream = b"data: a\n\ndata: bb\n\n: ping\n\nevent: error\ndata: c\n\ndata: dd\r\n\r\ndata: e\n\n"
    parser = SSEParser()
    got: list[Any] = []
    for i in range(0, len(stream), cut):
        got += parser.feed(stream[i : i + cut])
    assert [(e.data, e.event) for e in got] == [(b"a", None), (b"bb", None), (b"c", "error"), (b"dd", None),
                                                 (b"e", None)]  # fmt: skip


SECRET_BODIES = [
    ("url-userinfo", "upstream http://admin:hunter2pass@10.0.0.5:8000/v1 refused", "hunter2pass"),
    ("url-token-query", "fetch https://hub.example/m?token=tok_SECRET123&x=1 failed", "tok_SECRET123"),
    ("bearer", "bad header Authorization: Bearer abcdefghijklmnop1234", "abcdefghijklmnop1234"),
    ("openai-key", "invalid key sk-proj-AAAAAAAAAAAAAAAAAAAA", "sk-proj-AAAAAAAAAAAAAAAAAAAA"),
    ("api-key-assignment", "config api_key='supersecretvalue'", "supersecretvalue"),
]


@pytest.mark.parametrize(("text", "secret"), [pytest.param(t, s, id=i) for i, t, s in SECRET_BODIES])
async def test_an_error_body_is_scrubbed_in_the_record(text: str, secret: str) -> None:
    raw, summary = await level(lambda h, body: h.send_json(500, {"error": {"message": text}}), n=1)
    (r,) = raw.records
    assert r.error is not None and r.error.startswith("HTTP 500") and "****" in r.error
    assert secret not in r.error and secret not in json.dumps(summary)


HOSTILE_ERROR = "boom \x1b]0;pwned\x07 \x1b[2J \x1b]52;c;cHduZWQ=\x07 http://admin:hunter2pass@db:5432/x?token=tok_SECRET123"


@pytest.mark.parametrize("where", ["http-error", "stream-error-event"])
def test_bench_json_holds_an_engine_error_body_scrubbed(tmp_path: Path, where: str) -> None:
    def reply(h: Any, body: dict[str, Any]) -> None:
        if where == "http-error":
            h.send_raw(500, HOSTILE_ERROR.encode(), "text/plain")
        else:
            h.stream([chunk("a"), ev({"error": {"message": HOSTILE_ERROR, "type": "internal"}}), DONE])

    with fake_server(reply) as srv:
        proc, doc = run_bench(srv.ref, tmp=tmp_path)
    assert doc is not None, proc.stderr
    text = json.dumps(doc)
    assert "hunter2pass" not in text and "tok_SECRET123" not in text
    errors = doc["runs"][0]["levels"][0]["requests"]["errors"]
    assert errors and "****" in errors[0] and "\x1b" in errors[0]  # JSON keeps the text, json-escaped
    for out in (proc.stdout, proc.stderr):
        assert "\x1b" not in out and "\x07" not in out and "hunter2pass" not in out
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("shape", ["json-error", "text-body"])
def test_bench_prints_an_unready_engines_error_inert_and_masked(tmp_path: Path, shape: str) -> None:
    """The readiness check prints what /v1/models answered: scrubbed, and with every escape shown
    as a placeholder (no title change, no clipboard write, no cleared screen)."""
    def reply(h: Any, body: dict[str, Any]) -> None:  # never reached: the readiness check fails first
        h.send_json(500, {})

    with fake_server(reply) as srv:
        srv.models_reply = (500, {"error": {"message": HOSTILE_ERROR}} if shape == "json-error"
                            else {"error": HOSTILE_ERROR, "error_type": "x\x1b[31m"})  # fmt: skip
        proc, doc = run_bench(srv.ref, tmp=tmp_path)
    assert proc.returncode == 2 and doc is None
    err = proc.stderr
    assert "\x1b" not in err and "\x07" not in err, repr(err)
    assert "hunter2pass" not in err and "tok_SECRET123" not in err and "****" in err
    assert "␛" in err  # shown, not obeyed


def test_bench_masks_credentials_of_an_unreachable_engine_url(tmp_path: Path) -> None:
    from console.ports import free_port

    url = f"http://admin:hunter2pass@127.0.0.1:{free_port()}"
    proc, doc = run_bench(f"vllm@{url}", tmp=tmp_path)
    assert proc.returncode == 2 and doc is None
    assert "hunter2pass" not in proc.stderr and "****" in proc.stderr, proc.stderr
