"""Group 2 of the hostile-input suite: the server's usage numbers are claims.

A fake server on 127.0.0.1 claims 3e8, 1e308, -5 or 2.5 completion tokens (or a bad prompt or
cached count). The claim is checked (finite, whole, >= 0, within max_tokens and within what was
streamed); a bad one fails its request with "bad usage", nothing is allocated per claimed token,
the run writes its JSON, and in an A/B run the healthy engine's results survive. The playground
takes the same checks: no 2.5e11 tok/s, no memory growth per exchange.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from console.client.aggregate import summarize
from console.client.loadgen import LevelSpec, Target, run_level
from console.client.playground import live_stats, send_turn
from console.client.stream import GenParams, OpenAIStreamSink, StreamRejected, stream_request, token_count
from console.client.timing import RequestRecord, compute
from console.client.workloads import WorkloadSpec, generate
from console.profiles import get_profile
from console.target import EngineTarget
from console.transport.http import HTTPClient
from tests.hostile._bench_fakes import (
    ROOT,
    bench_cmd,
    chunk,
    claim_stream,
    fake_server,
    good_stream,
    isolated_env,
    kill_group,
    run_bench,
    streams,
    usage,
)

DONE = b"data: [DONE]\n\n"
MB = 1024 * 1024


async def one_level(events: list[bytes], n: int = 2, max_tokens: int = 4) -> tuple[list[RequestRecord], Any]:
    with fake_server(streams(events)) as srv:
        target = Target(EngineTarget("fake", get_profile("vllm"), srv.url), "m")
        prompts = generate(WorkloadSpec(input_len=8, output_len=4), n, 0)
        raw = await run_level(target, LevelSpec("closed", 1, num_prompts=n, warmup=0), prompts,
                              GenParams(max_tokens=max_tokens, fixed_length=True),
                              scrape_metrics=False, request_timeout=30)  # fmt: skip
    return raw.records, summarize(raw)


BAD_COMPLETION_CLAIMS: list[tuple[str, Any]] = [
    ("3e8", 3e8),
    ("3e8-int", 300_000_000),
    ("1e308", 1e308),
    ("1e30", 1e30),
    ("big-int", 10**30),
    ("5e7", 5e7),
    ("just-above-max", 5),
    ("negative", -5),
    ("negative-float", -2305.0),
    ("fraction", 2.5),
    ("string", "4"),
    ("boolean", True),
    ("object", {"n": 4}),
    ("array", [4]),
]


@pytest.mark.parametrize("claim", [pytest.param(c, id=i) for i, c in BAD_COMPLETION_CLAIMS])
async def test_a_bad_completion_claim_fails_the_request(claim: Any) -> None:
    tracemalloc.start()
    try:
        records, summary = await one_level(claim_stream(claim))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * MB, f"{peak / MB:.0f} MB allocated for a claim of {claim!r}"
    for r in records:
        assert r.error is not None and r.error.startswith("bad usage: completion_tokens"), r.error
        assert r.completion_tokens is None  # the claim is not kept as a count
    req = summary["requests"]
    assert (req["completed"], req["failed"]) == (0, 2)
    assert summary["tokens"]["output_total"] == 0
    assert summary["throughput"].get("output_tput") in (None, 0)
    json.dumps(summary, allow_nan=False)  # nothing infinite or NaN in the result


BAD_PROMPT_CLAIMS: list[tuple[str, dict[str, Any], str]] = [
    ("prompt-1e308", {"prompt_tokens": 1e308, "completion_tokens": 4}, "prompt_tokens"),
    ("prompt-negative", {"prompt_tokens": -3, "completion_tokens": 4}, "prompt_tokens"),
    ("prompt-fraction", {"prompt_tokens": 7.5, "completion_tokens": 4}, "prompt_tokens"),
    ("cached-above-prompt", {"prompt_tokens": 8, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 9}},
     "cached_tokens"),
    ("cached-negative", {"prompt_tokens": 8, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": -1}},
     "cached_tokens"),
]


@pytest.mark.parametrize(("claim", "word"), [pytest.param(c, w, id=i) for i, c, w in BAD_PROMPT_CLAIMS])
async def test_a_bad_prompt_or_cached_claim_fails_the_request(claim: dict[str, Any], word: str) -> None:
    events = [*(chunk(f"t{i} ") for i in range(4)), chunk(None, usage=claim, finish="length"), DONE]
    records, summary = await one_level(events)
    for r in records:
        assert r.error is not None and r.error.startswith("bad usage") and word in r.error, r.error
    assert summary["requests"]["failed"] == 2
    json.dumps(summary, allow_nan=False)


async def test_a_count_that_goes_down_is_bad_usage() -> None:
    events = [chunk("a", usage=usage(2)), chunk("b", usage=usage(1)), DONE]
    records, _ = await one_level(events)
    assert all(r.error and "went down" in r.error for r in records)


async def test_an_honest_claim_is_kept() -> None:
    records, summary = await one_level(good_stream(4))
    assert all(r.ok and r.completion_tokens == 4 for r in records)
    assert summary["tokens"]["output_total"] == 8


async def test_without_max_tokens_a_claim_is_bounded_by_the_bytes_streamed() -> None:
    with fake_server(streams(claim_stream(10**6))) as srv:
        client = HTTPClient(srv.url)
        try:
            rec = await stream_request(client, "/v1/completions", b'{"prompt": "hi", "stream": true}', RequestRecord(0),
                                       max_tokens=None)  # fmt: skip
        finally:
            client.close()
    assert rec.error is not None and "bytes streamed" in rec.error, rec.error


def test_the_sink_never_allocates_per_claimed_token() -> None:
    """Straight to the sink: a final usage claim of 3e8 on a stream of 64 events."""
    rec = RequestRecord(0)
    sink = OpenAIStreamSink(rec, max_tokens=None)
    for i in range(64):
        sink.on_body(chunk(f"w{i} "), i)
    tracemalloc.start()
    try:
        with pytest.raises(StreamRejected, match="bad usage"):
            sink.on_body(chunk(None, usage=usage(300_000_000), finish="length"), 99)
        sink.on_end(100)
        if rec.event_t_ns:
            compute(rec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 * MB
    assert rec.completion_tokens is None and rec.error and "bad usage" in rec.error


@pytest.mark.parametrize(
    ("value", "ok"),
    [(0, True), (4, True), (4.0, True), (-1, False), (float("nan"), False), (float("inf"), False), (1.5, False),
     (True, False), (None, False), ("4", False), (5, False)],
)  # fmt: skip
def test_token_count_accepts_only_whole_counts_within_the_limit(value: Any, ok: bool) -> None:
    if ok:
        assert token_count(value, "completion_tokens", 4, "max_tokens") == int(value)
    else:
        with pytest.raises(StreamRejected, match="bad usage"):
            token_count(value, "completion_tokens", 4, "max_tokens")


# Forks the bench from a small process and reports its peak RSS: measured from pytest itself, the
# kernel would count the RSS of the forked copy of pytest (before the exec) as the bench's peak.
_LAUNCHER = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_maxrss]))
"""


def _peak_rss_kb_of(cmd: list[str], env: dict[str, str]) -> tuple[int, int]:
    """(exit status, peak RSS in kB of the bench and the children it waited for)."""
    proc = subprocess.Popen([sys.executable, "-c", _LAUNCHER, *cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        kill_group(proc.pid)
    status, rss_kb = json.loads(out.strip().splitlines()[-1])
    return int(status), int(rss_kb)


@pytest.mark.parametrize("claim", [3e8, 1e308], ids=["3e8", "1e308"])
def test_bench_survives_a_huge_claim_within_100_mb(tmp_path: Path, claim: float) -> None:
    out = tmp_path / "bench.json"
    with fake_server(streams(claim_stream(claim))) as srv:
        status, rss_kb = _peak_rss_kb_of(bench_cmd(srv.ref, json_out=out), isolated_env(tmp_path))
    assert rss_kb < 100 * 1024, f"peak RSS {rss_kb / 1024:.0f} MB"
    assert status == 1  # no request succeeded: said so, after the JSON was written
    doc = json.loads(out.read_text())
    req = doc["runs"][0]["levels"][0]["requests"]
    assert (req["completed"], req["failed"]) == (0, 3)
    assert req["errors"] and req["errors"][0].startswith("bad usage: completion_tokens")


def test_ab_run_keeps_the_healthy_engines_results(tmp_path: Path) -> None:
    with fake_server(streams(good_stream(4))) as good, fake_server(streams(claim_stream(1e308))) as bad:
        proc, doc = run_bench(good.ref, bad.ref, tmp=tmp_path)
    assert doc is not None, proc.stderr
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr
    by_engine = {run["engine"]: run["levels"][0]["requests"] for run in doc["runs"]}
    assert by_engine[f"vllm@{good.url}"]["completed"] == 3
    assert by_engine[f"vllm@{bad.url}"]["failed"] == 3
    level = doc["summary"]["levels"][0]["engines"][f"vllm@{good.url}"]
    assert level["output_tokens_mean"]["median"] == 4


async def test_playground_shows_no_claimed_rate_and_grows_no_memory() -> None:
    """5e7 claimed tokens: the turn fails with bad usage, live stats count what streamed, and an
    exchange allocates no memory per claimed token."""
    claim = [*(chunk(None, raw={"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]}) for i in range(8)),
             chunk(None, raw={"choices": [], "usage": usage(5e7)}), DONE]  # fmt: skip
    with fake_server(streams(claim, gap=0.002)) as srv:
        engine = EngineTarget("fake", get_profile("vllm"), srv.url)
        tracemalloc.start()
        try:
            turn = await send_turn(engine, "m", [{"role": "user", "content": "hi"}], GenParams(max_tokens=256))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    rec = turn.record
    assert rec.error is not None and rec.error.startswith("bad usage"), rec.error
    assert peak < 10 * MB
    stats = live_stats(rec, rec.t_done_ns or rec.event_t_ns[-1])
    assert stats["tokens"] is not None and stats["tokens"] <= 8
    assert stats["tok_s"] is None or stats["tok_s"] < 1e6


def test_playground_rate_needs_a_measurable_span() -> None:
    rec = RequestRecord(0, t_send_ns=0)
    rec.event_t_ns = [1_000_000, 1_000_100]
    rec.completion_tokens = 200
    assert live_stats(rec, 1_000_200)["tok_s"] is None  # 200 tokens "in 200 ns" is no rate


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
