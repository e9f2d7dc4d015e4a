"""Metric names, types, labels and exposition conventions per flavour (parsed with prometheus_client)."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from console.sim.engines.sglang import TTFT_BUCKETS as SGLANG_TTFT
from console.sim.engines.tgi import DURATION_BUCKETS
from tests.sim.conftest import ENGINES, METRICS_PATH, chat, parse_metrics, sample_value, sim

# Family name (as prometheus_client's parser names it) -> type. What a console must find per engine.
EXPECTED = {
    "vllm": {
        "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge", "vllm:prefix_cache_queries": "counter",
        "vllm:prefix_cache_hits": "counter", "vllm:prompt_tokens": "counter", "vllm:generation_tokens": "counter",
        "vllm:prompt_tokens_cached": "counter", "vllm:num_preemptions": "counter",
        "vllm:request_success": "counter", "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:request_queue_time_seconds": "histogram", "vllm:request_time_per_output_token_seconds": "histogram",
        "vllm:iteration_tokens_total": "histogram",
    },
    "sglang": {
        "sglang:num_running_reqs": "gauge", "sglang:num_queue_reqs": "gauge", "sglang:token_usage": "gauge",
        "sglang:cache_hit_rate": "gauge", "sglang:prompt_tokens": "counter", "sglang:generation_tokens": "counter",
        "sglang:cached_tokens": "counter", "sglang:num_retracted_requests": "counter",
        "sglang:num_requests": "counter", "sglang:num_aborted_requests": "counter",
        "sglang:time_to_first_token_seconds": "histogram", "sglang:inter_token_latency_seconds": "histogram",
        "sglang:e2e_request_latency_seconds": "histogram", "sglang:queue_time_seconds": "histogram",
    },
    "trtllm": {
        "trtllm_num_requests_running": "gauge", "trtllm_num_requests_waiting": "gauge",
        "trtllm_kv_cache_utilization": "gauge", "trtllm_kv_cache_hit_rate": "gauge",
        "trtllm_prompt_tokens": "counter", "trtllm_generation_tokens": "counter",
        "trtllm_prompt_cached_tokens": "counter", "trtllm_request_success": "counter",
        "trtllm_kv_cache_reused_blocks": "counter", "trtllm_kv_cache_missed_blocks": "counter",
        "trtllm_time_to_first_token_seconds": "histogram", "trtllm_time_per_output_token_seconds": "histogram",
        "trtllm_e2e_request_latency_seconds": "histogram", "trtllm_request_queue_time_seconds": "histogram",
    },
    "tgi": {
        "tgi_queue_size": "gauge", "tgi_batch_current_size": "gauge", "tgi_request_count": "counter",
        "tgi_request_success": "counter", "tgi_request_input_length": "histogram",
        "tgi_request_generated_tokens": "histogram", "tgi_request_duration": "histogram",
        "tgi_request_queue_duration": "histogram", "tgi_request_mean_time_per_token_duration": "histogram",
    },
    # Exactly the 15 series of samples/llamacpp-real-server-8-streams.txt, with the same TYPEs.
    "llamacpp": {
        "llamacpp:prompt_tokens": "counter", "llamacpp:prompt_tokens_cached": "counter",
        "llamacpp:prompt_seconds": "counter", "llamacpp:tokens_predicted": "counter",
        "llamacpp:tokens_predicted_seconds": "counter", "llamacpp:n_decode": "counter",
        "llamacpp:n_tokens_max": "counter", "llamacpp:spec_decode_num_draft_tokens": "counter",
        "llamacpp:spec_decode_num_accepted_tokens": "counter", "llamacpp:spec_decode_num_drafts": "counter",
        "llamacpp:prompt_tokens_seconds": "gauge", "llamacpp:predicted_tokens_seconds": "gauge",
        "llamacpp:requests_processing": "gauge", "llamacpp:requests_deferred": "gauge",
        "llamacpp:n_busy_slots_per_decode": "gauge",
    },
}
MISSING = {
    "tgi": ("kv", "ttft", "prefix", "cache", "preempt", "time_to_first"),
    "llamacpp": ("kv_cache", "_bucket", "seconds_count"),
}


async def _metrics(s: aiohttp.ClientSession, url: str, engine: str) -> tuple[str, aiohttp.ClientResponse]:
    async with s.get(url + METRICS_PATH[engine]) as r:
        assert r.status == 200
        return await r.text(), r


async def _some_traffic(s: aiohttp.ClientSession, url: str, n: int = 3) -> None:
    await asyncio.gather(*(chat(s, url, f"prompt number {i}", max_tokens=4, ignore_eos=True) for i in range(n)))


@pytest.mark.parametrize("engine", ENGINES)
async def test_families_types_and_labels(engine: str) -> None:
    async with sim(engine, model="org/model-x") as srv, aiohttp.ClientSession() as s:
        await _some_traffic(s, srv.url)
        text, resp = await _metrics(s, srv.url, engine)
        fams = parse_metrics(text)
        for name, kind in EXPECTED[engine].items():
            assert name in fams, f"{engine}: {name} missing"
            assert fams[name].type == kind, f"{engine}: {name} is {fams[name].type}, want {kind}"
        for bad in MISSING.get(engine, ()):
            assert bad not in text, f"{engine} must not expose anything like {bad!r}"
        if engine == "vllm":
            s0 = fams["vllm:num_requests_running"].samples[0]
            assert s0.labels == {"model_name": "org/model-x", "engine": "0"}
            assert "vllm:prompt_tokens_created" in fams  # single-process prometheus_client registry
            assert "process_resident_memory_bytes" in fams
            # prometheus-fastapi-instrumentator series: no model_name label at all.
            http = fams["http_requests"]
            assert http.type == "counter"
            assert {s.labels["handler"] for s in http.samples if s.name == "http_requests_total"} == {
                "/v1/chat/completions"}
            ttft = [s.labels["le"] for s in fams["vllm:time_to_first_token_seconds"].samples
                    if s.name.endswith("_bucket")]
            assert len(ttft) == 23 and ttft[0] == "0.001" and ttft[-2] == "2560.0" and ttft[-1] == "+Inf"
            assert sample_value(fams, "vllm:generation_tokens", "vllm:generation_tokens_total") == 12
        elif engine == "sglang":
            gauge_labels = fams["sglang:num_running_reqs"].samples[0].labels
            assert {"model_name", "engine_type", "tp_rank", "pp_rank"} <= set(gauge_labels)
            assert fams["sglang:prompt_tokens"].samples[0].labels == {"model_name": "org/model-x"}
            assert "_created" not in text  # multiprocess registry
            les = [float(s.labels["le"]) for s in fams["sglang:time_to_first_token_seconds"].samples
                   if s.name.endswith("_bucket")]
            assert les[:-1] == [float(b) for b in SGLANG_TTFT]
        elif engine == "trtllm":
            assert fams["trtllm_num_requests_running"].samples[0].labels == {
                "model_name": "org/model-x", "engine_type": "pytorch"}
            assert "_created" not in text
            reasons = {s.labels["finished_reason"] for s in fams["trtllm_request_success"].samples}
            assert reasons == {"stop", "length"}
        elif engine == "tgi":
            assert "# HELP" not in text and "_created" not in text
            assert "\ntgi_request_count 3\n" in "\n" + text  # literal counter name, integer value
            les = [float(s.labels["le"]) for s in fams["tgi_request_duration"].samples if s.name.endswith("_bucket")]
            assert les[:-1] == pytest.approx(DURATION_BUCKETS) and len(les) == 36
            assert all(not s.labels for s in fams["tgi_queue_size"].samples)
        else:
            assert set(fams) == set(EXPECTED["llamacpp"])
            assert all(not s.labels for f in fams.values() for s in f.samples)
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            assert int(resp.headers["Process-Start-Time-Unix"]) > 0


async def test_vllm_legacy_names() -> None:
    async with sim("vllm", metrics_version="legacy") as srv, aiohttp.ClientSession() as s:
        await _some_traffic(s, srv.url)
        text, _ = await _metrics(s, srv.url, "vllm")
        fams = parse_metrics(text)
        for name in ("vllm:gpu_cache_usage_perc", "vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_hits",
                     "vllm:time_per_output_token_seconds"):
            assert name in fams
        for name in ("vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries", "vllm:inter_token_latency_seconds"):
            assert name not in fams
        assert fams["vllm:num_requests_running"].samples[0].labels == {"model_name": srv.flavour.model}
        assert sample_value(fams, "vllm:gpu_prefix_cache_queries", "vllm:gpu_prefix_cache_queries_total") > 0


async def test_trtllm_json_metrics_are_a_destructive_read() -> None:
    async with sim("trtllm") as srv, aiohttp.ClientSession() as s:
        await _some_traffic(s, srv.url)
        async with s.get(f"{srv.url}/metrics") as r:
            first = orjson.loads(await r.read())
        assert isinstance(first, list) and len(first) >= 4  # one entry per iteration
        it = first[-1]
        assert {"iter", "iterLatencyMS", "numActiveRequests", "numQueuedRequests", "kvCacheStats",
                "inflightBatchingStats", "timestamp"} <= set(it)
        assert {"maxNumBlocks", "freeNumBlocks", "usedNumBlocks", "tokensPerBlock", "reusedBlocks",
                "missedBlocks", "cacheHitRate"} <= set(it["kvCacheStats"])
        assert [x["iter"] for x in first] == sorted(x["iter"] for x in first)
        async with s.get(f"{srv.url}/metrics") as r:
            assert orjson.loads(await r.read()) == []  # drained by the first read
        await _some_traffic(s, srv.url, 1)
        async with s.get(f"{srv.url}/metrics") as r:
            again = orjson.loads(await r.read())
        assert again and again[0]["iter"] > first[-1]["iter"]


async def test_llamacpp_tokens_predicted_only_moves_at_finish() -> None:
    async with sim("llamacpp", speed=1.0) as srv, aiohttp.ClientSession() as s:
        task = asyncio.create_task(chat(s, srv.url, "long one", max_tokens=40, ignore_eos=True))
        await asyncio.sleep(0.25)
        text, _ = await _metrics(s, srv.url, "llamacpp")
        mid = parse_metrics(text)
        assert sample_value(mid, "llamacpp:requests_processing") == 1
        assert sample_value(mid, "llamacpp:n_decode", "llamacpp:n_decode_total") > 3
        assert sample_value(mid, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total") == 0
        status, _ = await task
        assert status == 200
        text, _ = await _metrics(s, srv.url, "llamacpp")
        end = parse_metrics(text)
        assert sample_value(end, "llamacpp:tokens_predicted", "llamacpp:tokens_predicted_total") == 40
        assert sample_value(end, "llamacpp:predicted_tokens_seconds") > 0
        # The throughput gauges are "since the previous scrape": a second scrape reads 0.
        text, _ = await _metrics(s, srv.url, "llamacpp")
        assert sample_value(parse_metrics(text), "llamacpp:predicted_tokens_seconds") == 0


async def test_gauges_follow_scheduler_state() -> None:
    async with sim("vllm", max_running=2) as srv, aiohttp.ClientSession() as s:
        tasks = [asyncio.create_task(chat(s, srv.url, f"q {i}", max_tokens=30, ignore_eos=True)) for i in range(5)]
        await asyncio.sleep(0.2)
        text, _ = await _metrics(s, srv.url, "vllm")
        fams = parse_metrics(text)
        async with s.get(f"{srv.url}/_sim/state") as r:
            state = await r.json()
        assert sample_value(fams, "vllm:num_requests_running") == state["running"] == 2
        assert sample_value(fams, "vllm:num_requests_waiting") == state["waiting"] == 3
        assert state["kv_usage"] > 0
        assert sample_value(fams, "vllm:kv_cache_usage_perc") == pytest.approx(state["kv_usage"])
        await asyncio.gather(*tasks)
