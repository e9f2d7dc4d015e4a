"""Laws every flavour's metrics obey, checked only through each engine's own metrics endpoint.

(1) prefix-cache hit rate over a window = the shared fraction of the prompts (± 5 points);
(2) the TTFT histogram counts one observation per completed request;
(3) the generation-token counter grows by exactly the sum of ``usage.completion_tokens``;
(4) under KV pressure (vLLM, small pool, concurrency 32) KV usage passes 0.5, requests wait and
    preemptions are counted. SIM_LAW4_SECONDS=30 SIM_LAW4_SPEED=1 runs the long version by hand.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import aiohttp
import pytest

from console.sim.tokens import WORDS
from tests.sim.conftest import ENGINES, METRICS_PATH, chat, parse_metrics, read_sse, sample_value, sim, sse_json


async def scrape(s: aiohttp.ClientSession, url: str, engine: str) -> dict[str, Any]:
    async with s.get(url + METRICS_PATH[engine]) as r:
        assert r.status == 200
        return parse_metrics(await r.text())


def hit_counters(engine: str, fams: dict[str, Any]) -> tuple[float, float]:
    """(hits, lookups) in tokens, from the engine's own series."""
    if engine == "vllm":
        return (sample_value(fams, "vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total"),
                sample_value(fams, "vllm:prefix_cache_queries", "vllm:prefix_cache_queries_total"))
    if engine == "sglang":
        return (sample_value(fams, "sglang:cached_tokens", "sglang:cached_tokens_total"),
                sample_value(fams, "sglang:prompt_tokens", "sglang:prompt_tokens_total"))
    if engine == "trtllm":
        return (sample_value(fams, "trtllm_prompt_cached_tokens", "trtllm_prompt_cached_tokens_total"),
                sample_value(fams, "trtllm_prompt_tokens", "trtllm_prompt_tokens_total"))
    cached = sample_value(fams, "llamacpp:prompt_tokens_cached", "llamacpp:prompt_tokens_cached_total")
    evaluated = sample_value(fams, "llamacpp:prompt_tokens", "llamacpp:prompt_tokens_total")
    return cached, cached + evaluated


def gen_counter(engine: str, fams: dict[str, Any]) -> float:
    return {
        "vllm": lambda: sample_value(fams, "vllm:generation_tokens", "vllm:generation_tokens_total"),
        "sglang": lambda: sample_value(fams, "sglang:generation_tokens", "sglang:generation_tokens_total"),
        "trtllm": lambda: sample_value(fams, "trtllm_generation_tokens", "trtllm_generation_tokens_total"),
        "tgi": lambda: sample_value(fams, "tgi_request_generated_tokens", "tgi_request_generated_tokens_sum"),
        "llamacpp": lambda: sample_value(fams, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total"),
    }[engine]()


async def completion(s: aiohttp.ClientSession, url: str, prompt: str, **body: Any) -> dict[str, Any]:
    async with s.post(f"{url}/v1/completions", json={"prompt": prompt, "stream": False, **body}) as r:
        assert r.status == 200, await r.text()
        return dict(await r.json())


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp"])
@pytest.mark.parametrize("shared_pct", [25, 75])
async def test_law1_prefix_hit_rate_matches_shared_fraction(engine: str, shared_pct: int) -> None:
    rng = random.Random(shared_pct)
    total = 512
    shared = " ".join(rng.choice(WORDS) for _ in range(total * shared_pct // 100))
    async with sim(engine, max_running=8) as srv, aiohttp.ClientSession() as s:
        def prompt() -> str:
            return shared + " " + " ".join(rng.choice(WORDS) for _ in range(total - total * shared_pct // 100))

        warm = await completion(s, srv.url, prompt(), max_tokens=2)  # the first one fills the cache
        assert warm["usage"]["prompt_tokens"] == total
        before = hit_counters(engine, await scrape(s, srv.url, engine))
        sem = asyncio.Semaphore(4)

        async def one() -> None:
            async with sem:
                await completion(s, srv.url, prompt(), max_tokens=2)

        await asyncio.gather(*(one() for _ in range(16)))
        after = hit_counters(engine, await scrape(s, srv.url, engine))
        rate = 100 * (after[0] - before[0]) / (after[1] - before[1])
        assert rate == pytest.approx(shared_pct, abs=5), f"{engine}: windowed hit rate {rate:.1f}%"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
async def test_law2_ttft_count_equals_completed_requests(engine: str) -> None:
    prefix = {"vllm": "vllm:", "sglang": "sglang:", "trtllm": "trtllm_"}[engine]
    fam = f"{prefix}time_to_first_token_seconds"
    async with sim(engine) as srv, aiohttp.ClientSession() as s:
        before = sample_value(await scrape(s, srv.url, engine), fam, fam + "_count")
        results = await asyncio.gather(*(chat(s, srv.url, f"question {i}", max_tokens=6) for i in range(13)))
        assert all(st == 200 for st, _ in results)
        after = await scrape(s, srv.url, engine)
        assert sample_value(after, fam, fam + "_count") - before == 13
        assert sample_value(after, fam, fam + "_bucket", le="+Inf") - before == 13


@pytest.mark.parametrize("engine", ENGINES)
async def test_law3_generation_counter_equals_usage_sum(engine: str) -> None:
    async with sim(engine, speed=3.0) as srv, aiohttp.ClientSession() as s:
        before = gen_counter(engine, await scrape(s, srv.url, engine))
        # Natural EOS lengths (varying), streamed and whole, concurrently.
        results = await asyncio.gather(
            *(chat(s, srv.url, f"tell me story {i}", stream=bool(i % 2), max_tokens=80,
                   stream_options={"include_usage": True}) for i in range(12)))
        total = 0
        for status, body in results:
            assert status == 200
            usage = body[-1]["usage"] if isinstance(body, list) else body["usage"]
            total += usage["completion_tokens"]
        after = gen_counter(engine, await scrape(s, srv.url, engine))
        assert after - before == total
        assert total > 12  # lengths really vary (not one token each)


async def test_law4_kv_pressure_queues_and_preempts() -> None:
    seconds = float(os.environ.get("SIM_LAW4_SECONDS", "3"))
    speed = float(os.environ.get("SIM_LAW4_SPEED", "4"))
    # 96 blocks x 16 tokens; 32 clients with ~120-token prompts and 100-token answers cannot all fit.
    async with sim("vllm", kv_blocks=96, max_running=64, speed=speed) as srv, aiohttp.ClientSession() as s:
        stop = time.monotonic() + seconds
        rng = random.Random(4)

        async def client(i: int) -> None:
            while time.monotonic() < stop:
                body = {"messages": [{"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(120))}],
                        "max_tokens": 100, "ignore_eos": True, "stream": True}
                async with s.post(f"{srv.url}/v1/chat/completions", json=body) as r:
                    assert r.status == 200
                    sse_json(await read_sse(r))

        clients = [asyncio.create_task(client(i)) for i in range(32)]
        max_kv = max_wait = 0.0
        while time.monotonic() < stop:
            fams = await scrape(s, srv.url, "vllm")
            max_kv = max(max_kv, sample_value(fams, "vllm:kv_cache_usage_perc"))
            max_wait = max(max_wait, sample_value(fams, "vllm:num_requests_waiting"))
            await asyncio.sleep(0.1)
        await asyncio.gather(*clients)
        fams = await scrape(s, srv.url, "vllm")
        preemptions = sample_value(fams, "vllm:num_preemptions", "vllm:num_preemptions_total")
        async with s.get(f"{srv.url}/_sim/state") as r:
            truth = (await r.json())["counters"]
        print(f"law4 over {seconds:g}s: max kv {max_kv:.2f}, max waiting {max_wait:g}, preemptions {preemptions:g}")
        assert max_kv > 0.5
        assert max_wait > 0
        assert preemptions > 0 and preemptions == truth["preemptions"]
