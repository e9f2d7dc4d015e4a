"""vLLM with data-parallel engine ranks (``sim --data-parallel N``) and a shared rendering of
/metrics (``--metrics-every S``): what the hub's scale benchmark serves to many scrapers."""

from __future__ import annotations

import asyncio

import aiohttp

from console.profiles import get_profile
from console.telemetry.metrics.normalize import normalize
from tests.sim.conftest import chat, parse_metrics, sample_value, sim


async def test_every_engine_series_once_per_rank_and_totals_stay_the_truth() -> None:
    async with sim("vllm", data_parallel=3) as one, sim("vllm") as plain, aiohttp.ClientSession() as s:
        status, _ = await chat(s, one.url, "hello there", max_tokens=8)
        assert status == 200
        async with s.get(f"{one.url}/metrics") as r:
            text = await r.text()
        async with s.get(f"{plain.url}/metrics") as r:
            single = await r.text()
        async with s.get(f"{one.url}/_sim/state") as r:
            truth = (await r.json())["counters"]
    fams = parse_metrics(text)
    ranked = [line for line in single.splitlines() if 'engine="0"' in line]
    for rank in ("1", "2"):
        # Every series that carries the engine label comes once per rank, nothing else is added.
        assert sum(f'engine="{rank}"' in line for line in text.splitlines()) == len(ranked)
        assert sample_value(fams, "vllm:generation_tokens", "vllm:generation_tokens_total", engine=rank) == 0
        assert sample_value(fams, "vllm:cache_config_info", engine=rank) == 1.0
    assert sample_value(fams, "vllm:generation_tokens", "vllm:generation_tokens_total") == truth["generation_tokens"]
    # The console reads the ranks as replicas of the one model and sums them: the ground truth.
    reading = normalize(get_profile("vllm"), text.encode())
    assert reading.ok
    model = reading.models["Qwen/Qwen3-0.6B"]
    assert model.replicas == 3
    assert sum(model.counters["generation_tokens"].values()) == truth["generation_tokens"]
    plain_lines = len([x for x in single.splitlines() if x and not x.startswith("#")])
    all_lines = len([x for x in text.splitlines() if x and not x.startswith("#")])
    assert all_lines > 2.5 * plain_lines


async def test_metrics_every_serves_one_rendering_to_every_scraper_within_the_period() -> None:
    async with sim("vllm", metrics_every=30.0) as srv, aiohttp.ClientSession() as s:
        async with s.get(f"{srv.url}/metrics") as r:
            first = await r.read()
            kind = r.headers["Content-Type"]
        status, _ = await chat(s, srv.url, "hello there", max_tokens=8)
        assert status == 200
        await asyncio.sleep(0.05)
        async with s.get(f"{srv.url}/metrics") as r:
            again = await r.read()
        assert again == first and kind.startswith("text/plain")
    async with sim("vllm") as srv, aiohttp.ClientSession() as s:  # default: rendered per scrape
        async with s.get(f"{srv.url}/metrics") as r:
            first = await r.read()
        status, _ = await chat(s, srv.url, "hello there", max_tokens=8)
        async with s.get(f"{srv.url}/metrics") as r:
            assert await r.read() != first
