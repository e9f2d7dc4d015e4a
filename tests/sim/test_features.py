"""Simulator modes for speculative decoding, P/D (decode side) and LoRA, read back by the console:
the series have the real engines' names (checked with prometheus_client's own parser), and the
console's figures (normalise -> windows) follow from them; without the modes nothing of it exists."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from console.profiles import get_profile
from console.sim.engines.features import KV_BYTES_PER_TOKEN, LINK_GB_S, SpecMode, lora_adapters, spec_counts
from console.status_doc import model_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.sim.conftest import chat, parse_metrics, sample_value, sim


async def _scrape(s: aiohttp.ClientSession, url: str) -> str:
    async with s.get(f"{url}/metrics") as r:
        return await r.text()


async def _state(s: aiohttp.ClientSession, url: str) -> dict[str, int]:
    async with s.get(f"{url}/_sim/state?requests=0") as r:
        counters: dict[str, int] = (await r.json())["counters"]
        return counters


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
async def test_without_the_modes_there_is_no_panel(engine: str) -> None:
    profile = get_profile(engine)
    async with sim(engine) as one, aiohttp.ClientSession() as s:
        st = EngineMetricsState(profile)
        for t in (0.0, 5.0):
            assert (await chat(s, one.url, "hi", max_tokens=4))[0] == 200
            text = await _scrape(s, one.url)
            st.ingest(t, normalize(profile, text))
    _, total = st.metrics()
    assert total.spec is None and total.kv_transfer is None and total.lora is None
    doc = model_doc(total)
    assert doc["spec_decode"] is None and doc["kv_transfer"] is None and doc["lora"] is None
    assert not any(n in text for n in ("nixl", "kv_transfer", "lora"))
    if engine == "sglang":  # SGLang 0.5.23 sets its spec gauges on every log: 0 with it off
        fams = parse_metrics(text)
        assert sample_value(fams, "sglang:spec_accept_length") == 0.0
        assert sample_value(fams, "sglang:spec_accept_rate") == 0.0
    else:
        assert "spec_" not in text


async def test_vllm_spec_decode_pd_and_lora_series_and_what_the_console_makes_of_them() -> None:
    mode = SpecMode.parse("3:0.6")
    profile = get_profile("vllm")
    async with sim("vllm", spec_decode="3:0.6", pd_decode=True, pd_fail_every=4, max_lora=2) as one, \
            aiohttp.ClientSession() as s:  # fmt: skip
        st = EngineMetricsState(profile)
        st.ingest(0.0, normalize(profile, await _scrape(s, one.url)))
        replies = await asyncio.gather(*(chat(s, one.url, f"request {i} " * 20, max_tokens=40) for i in range(8)))
        assert all(status == 200 for status, _ in replies)
        text = await _scrape(s, one.url)
        truth = await _state(s, one.url)
        st.ingest(10.0, normalize(profile, text))
    fams = parse_metrics(text)
    gen = truth["generation_tokens"]
    want = spec_counts(mode, gen)
    assert sample_value(fams, "vllm:spec_decode_num_drafts", "vllm:spec_decode_num_drafts_total") == want.drafts
    assert sample_value(fams, "vllm:spec_decode_num_accepted_tokens",
                        "vllm:spec_decode_num_accepted_tokens_total") == want.accepted  # fmt: skip
    per_pos = [sample_value(fams, "vllm:spec_decode_num_accepted_tokens_per_pos",
                            "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i)) for i in range(3)]
    assert per_pos == list(want.per_pos) and per_pos[0] > per_pos[1] > per_pos[2]
    # 8 requests reached their first token: 8 pulls, every 4th failed.
    assert sample_value(fams, "vllm:nixl_num_failed_transfers", "vllm:nixl_num_failed_transfers_total") == 2
    assert sample_value(fams, "vllm:nixl_xfer_time_seconds", "vllm:nixl_xfer_time_seconds_count") == 6
    moved = sample_value(fams, "vllm:nixl_bytes_transferred", "vllm:nixl_bytes_transferred_sum")
    assert moved > 0 and moved % KV_BYTES_PER_TOKEN == 0
    info = [x for x in fams["vllm:lora_requests_info"].samples]
    assert len(info) == 1 and info[0].labels["max_lora"] == "2" and "model_name" not in info[0].labels

    _, total = st.metrics()
    spec = total.spec
    assert spec is not None and spec.window == "60s"
    assert spec.acceptance_rate == pytest.approx(want.accepted / want.draft_tokens)
    assert spec.acceptance_length == pytest.approx(1 + want.accepted / want.drafts)
    assert spec.draft_share == pytest.approx(want.accepted / gen)
    # Per position, Δaccepted[i] / Δdrafts: about P, P², P³ (floors of the simulator's counts).
    assert spec.per_position == pytest.approx([n / want.drafts for n in want.per_pos])
    assert spec.per_position == pytest.approx([0.6, 0.36, 0.216], abs=0.05)
    kv = total.kv_transfer
    assert kv is not None and kv.bytes_per_s == pytest.approx(moved / 10.0)
    # Δbytes / Δtransfer time: the simulated link plus 0.4 ms per transfer, 6 transfers.
    assert kv.link_gb_s == pytest.approx(moved / (moved / (LINK_GB_S * 1e9) + 6 * 0.0004) / 1e9)
    assert kv.latency_s is not None and kv.latency_s > 0
    assert kv.failures_per_s.r60s == pytest.approx(2 / 10.0)
    lora = total.lora
    assert lora is not None and lora.slots_total == 2.0 and lora.running == 0.0 and lora.waiting == 0.0
    doc = model_doc(total)
    assert doc["spec_decode"]["window"] == "60s" and doc["spec_decode"]["acceptance_rate"] == pytest.approx(
        want.accepted / want.draft_tokens, abs=1e-6)
    assert doc["kv_transfer"]["failures_per_s"]["60s"] == pytest.approx(0.2) and doc["lora"]["slots_total"] == 2.0


async def test_sglang_spec_pd_and_lora_gauges() -> None:
    mode = SpecMode.parse("4")
    profile = get_profile("sglang")
    async with sim("sglang", spec_decode="4", pd_decode=True, max_lora=3) as one, aiohttp.ClientSession() as s:
        st = EngineMetricsState(profile)
        st.ingest(0.0, normalize(profile, await _scrape(s, one.url)))
        assert (await chat(s, one.url, "a prompt " * 30, max_tokens=8))[0] == 200
        text = await _scrape(s, one.url)
        st.ingest(5.0, normalize(profile, text))
    _, total = st.metrics()
    assert total.spec is not None and total.spec.window == "gauge"
    assert total.spec.acceptance_length == pytest.approx(mode.per_step())
    assert total.kv_transfer is not None and total.kv_transfer.link_gb_s is not None
    assert total.kv_transfer.latency_s is not None and total.kv_transfer.latency_s < 0.1
    assert total.lora is not None and total.lora.slots_total == 3.0 and total.lora.slots_used == 0.0
    assert "sglang:num_transfer_failed_reqs_total" in text


async def test_sglang_newest_shapes_by_default_and_older_ones_on_request() -> None:
    """0.5.23: P/D transfer histograms, TPOT histogram, priority-labelled queue gauges; legacy: gauges."""
    profile = get_profile("sglang")
    async with sim("sglang", pd_decode=True, priority_levels=2) as one, aiohttp.ClientSession() as s:
        st = EngineMetricsState(profile)
        st.ingest(0.0, normalize(profile, await _scrape(s, one.url)))
        replies = await asyncio.gather(*(chat(s, one.url, f"prompt {i} " * 30, max_tokens=8) for i in range(4)))
        assert all(status == 200 for status, _ in replies)
        text = await _scrape(s, one.url)
        st.ingest(5.0, normalize(profile, text))
    fams = parse_metrics(text)  # prometheus_client's own parser
    assert fams["sglang:kv_transfer_latency_ms"].type == "histogram"
    assert fams["sglang:kv_transfer_total_mb"].type == "histogram"
    assert fams["sglang:request_time_per_output_token_seconds"].type == "histogram"
    running = {s.labels["priority"]: s.value for s in fams["sglang:num_running_reqs"].samples}
    assert set(running) == {"", "0", "1"} and running[""] == running["0"] + running["1"]
    _, total = st.metrics()
    kv = total.kv_transfer
    assert kv is not None and kv.latency_s is not None and kv.link_gb_s is not None
    assert kv.link_gb_s == pytest.approx(LINK_GB_S, rel=0.5)  # the fixed post cost slows small pulls
    assert total.tpot.count == 4
    assert total.pd_queues is not None and total.pd_queues.prealloc == 0.0
    assert total.spec is None
    async with sim("sglang", pd_decode=True, metrics_version="legacy") as one, aiohttp.ClientSession() as s:
        assert (await chat(s, one.url, "a prompt " * 30, max_tokens=8))[0] == 200
        legacy = parse_metrics(await _scrape(s, one.url))
    assert legacy["sglang:kv_transfer_latency_ms"].type == "gauge"
    assert "sglang:request_time_per_output_token_seconds" not in legacy
    assert "sglang:spec_accept_length" not in legacy


def test_lora_adapters_wait_only_when_the_slots_are_full() -> None:
    assert lora_adapters(2, 1, 5) == (["sim-lora-0"], [])
    assert lora_adapters(2, 3, 5) == (["sim-lora-0", "sim-lora-1"], ["sim-lora-2", "sim-lora-3"])
    assert lora_adapters(2, 0, 0) == ([], [])


def test_comma_lists_of_lora_requests_info_newest_sample_wins() -> None:
    text = (
        "# TYPE vllm:lora_requests_info gauge\n"
        'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b,c",waiting_lora_adapters=""} 1700000000.0\n'
        'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a",waiting_lora_adapters="d, e"} 1700000005.0\n'
        '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name="m",engine="0"} 2\n'
    )
    reading = normalize(get_profile("vllm"), text)
    assert list(reading.models) == ["m"]  # the engine-wide info gauge joins the served model
    g = reading.models["m"].gauges
    assert (g["lora_running"], g["lora_waiting"], g["lora_slots_total"]) == (1.0, 2.0, 4.0)
