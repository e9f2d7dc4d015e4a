"""Start-up behaviour per engine (--load-time) and injected faults."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time

import aiohttp
import orjson
import pytest

from console.sim.faults import parse_faults
from tests import procgroup
from tests.sim.conftest import METRICS_PATH, read_sse, sim


async def _probe(s: aiohttp.ClientSession, url: str) -> str:
    try:
        async with s.get(url, timeout=aiohttp.ClientTimeout(total=1)) as r:
            return str(r.status)
    except aiohttp.ClientConnectorError:
        return "refused"


async def _observe(url: str, seconds: float) -> list[str]:
    """Distinct consecutive probe results of GET url over ``seconds``."""
    seen: list[str] = []
    async with aiohttp.ClientSession() as s:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            r = await _probe(s, url)
            if not seen or seen[-1] != r:
                seen.append(r)
            if r == "200":
                break
            await asyncio.sleep(0.02)
    return seen


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "tgi"])
async def test_refused_while_loading_then_ready(engine: str) -> None:
    async with sim(engine, load_time=0.8, wait_ready=False) as srv:
        assert await _observe(f"{srv.url}/health", 5) == ["refused", "200"]


async def test_sglang_refused_then_503_warmup_then_ready() -> None:
    async with sim("sglang", load_time=1.0, wait_ready=False) as srv:
        assert await _observe(f"{srv.url}/health", 5) == ["refused", "503", "200"]


async def test_llamacpp_503_on_every_route_while_loading() -> None:
    async with sim("llamacpp", load_time=1.0, wait_ready=False, api_key="k") as srv, aiohttp.ClientSession() as s:
        await srv.listening.wait()
        expected = {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}
        for path in ("/health", "/v1/models", "/metrics", "/props"):
            async with s.get(srv.url + path) as r:  # no key: the loading check comes before auth
                assert r.status == 503 and orjson.loads(await r.read()) == expected, path
        async with s.post(f"{srv.url}/v1/chat/completions", json={"messages": []}) as r:
            assert r.status == 503
        assert (await _observe(f"{srv.url}/health", 5))[-1] == "200"


async def test_slow_hang_and_garbage_metrics() -> None:
    async with aiohttp.ClientSession() as s:
        async with sim("vllm", faults=parse_faults(["slow-metrics=0.5"])) as srv:
            t0 = time.monotonic()
            async with s.get(srv.url + "/metrics") as r:
                assert r.status == 200
            assert time.monotonic() - t0 >= 0.5
        async with sim("sglang", faults=parse_faults(["hang-metrics"])) as srv:
            with pytest.raises(asyncio.TimeoutError):
                await s.get(srv.url + "/metrics", timeout=aiohttp.ClientTimeout(total=0.5))
            async with s.get(srv.url + "/health") as r:  # the rest of the server is fine
                assert r.status == 200
        async with sim("trtllm", faults=parse_faults(["garbage-metrics"])) as srv:
            r = await s.get(srv.url + METRICS_PATH["trtllm"])
            body = await r.read()
            assert r.status == 200 and b"\x00" in body and not body.startswith(b"#")


async def test_decode_stall() -> None:
    async with sim("vllm", faults=parse_faults(["stall=0.2:0.8"])) as srv, aiohttp.ClientSession() as s:
        payload = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 60, "ignore_eos": True,
                   "stream": True}
        stamps: list[float] = []
        async with s.post(f"{srv.url}/v1/chat/completions", json=payload) as r:
            async for _ in r.content.iter_any():
                stamps.append(time.monotonic())
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert max(gaps) >= 0.6


async def test_stream_abort_is_counted() -> None:
    async with sim("vllm") as srv, aiohttp.ClientSession() as s:
        payload = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 500, "ignore_eos": True,
                   "stream": True}
        async with s.post(f"{srv.url}/v1/chat/completions", json=payload) as r:
            await r.content.readany()
        # Closing the response mid-stream drops the connection; the server aborts the request.
        for _ in range(100):
            async with s.get(f"{srv.url}/_sim/state") as st:
                state = await st.json()
            if state["counters"]["requests_failed"] == 1:
                break
            await asyncio.sleep(0.05)
        assert state["counters"]["requests_failed"] == 1 and state["running"] == 0
        assert state["requests"][-1]["finish_reason"] == "abort"


def test_crash_after_exits_1_with_a_last_line(tmp_path: object) -> None:
    from console.ports import free_port

    port = free_port()
    t0 = time.monotonic()
    proc = procgroup.run([sys.executable, "-m", "console", "sim", "--engine", "vllm", "--port", str(port),
                          "--fault", "crash-after=0.5"], capture_output=True, text=True, timeout=20,
                         cwd=os.getcwd())
    assert proc.returncode == 1
    assert time.monotonic() - t0 < 10
    assert "fatal error" in proc.stdout.strip().splitlines()[-1]


async def test_sim_state_format() -> None:
    async with sim("sglang") as srv, aiohttp.ClientSession() as s:
        payload = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3, "stream": True,
                   "ignore_eos": True}
        async with s.post(f"{srv.url}/v1/chat/completions", json=payload) as r:
            await read_sse(r)
        async with s.get(f"{srv.url}/_sim/state") as r:
            st = await r.json()
        assert {"engine", "model", "time", "running", "waiting", "kv_usage", "kv_blocks_total", "kv_blocks_used",
                "counters", "requests"} <= set(st)
        assert set(st["counters"]) == {"prompt_tokens", "generation_tokens", "prefix_cache_queries",
                                       "prefix_cache_hits", "cached_prompt_tokens", "preemptions",
                                       "requests_finished", "requests_failed"}
        (req,) = st["requests"]
        assert set(req) == {"id", "arrival", "first_token", "finish", "prompt_tokens", "cached_tokens",
                            "completion_tokens", "ttft", "e2e", "queue_time", "finish_reason"}
        assert req["completion_tokens"] == 3 and req["arrival"] <= req["first_token"] <= req["finish"]
        assert st["counters"]["generation_tokens"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sim", "--engine", "vllm", "--fault", "bogus"], "unknown fault"),
        (["sim", "--engine", "vllm", "--fault", "error-rate=2"], "bad value"),
        (["sim", "--engine", "trtllm", "--api-key", "k"], "no API key option"),
        (["sim", "--engine", "tgi", "--metrics-version", "legacy"], "only for --engine vllm"),
        (["sim"], "needs --engine"),
        (["sim", "--fleet", "--engines", "vllm,nope"], "unknown engine"),
    ],
)
def test_cli_bad_input_is_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("enginedeck: ") and message in err and "\n" not in err
