"""vLLM's server errors: a completion answered with HTTP 5xx never reaches the engine, so
``vllm:request_success_total`` does not count it; vLLM's API server counts it in
``http_requests_total{status="5xx"}`` (prometheus-fastapi-instrumentator). The console counts it as
a finished, failed request, and so do the exported Prometheus rules."""

from __future__ import annotations

import asyncio

import aiohttp

from console.alerts.export import rate
from console.profiles import get_profile
from console.sim.faults import Faults
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.sim.conftest import chat, parse_metrics, sample_value, sim


async def test_vllm_5xx_responses_are_errors() -> None:
    profile = get_profile("vllm")
    st = EngineMetricsState(profile)
    async with sim("vllm", faults=Faults(error_rate=0.3), seed=7) as one, aiohttp.ClientSession() as s:
        async with s.get(f"{one.url}/metrics") as r:
            st.ingest(0.0, normalize(profile, await r.text()))
        replies = await asyncio.gather(*(chat(s, one.url, f"request {i}", max_tokens=4) for i in range(40)))
        async with s.get(f"{one.url}/metrics") as r:
            text = await r.text()
        st.ingest(10.0, normalize(profile, text))
    failed = sum(1 for status, _ in replies if status >= 500)
    assert 0 < failed < 40 and all(status in (200, 500) for status, _ in replies)
    fams = parse_metrics(text)
    assert sample_value(fams, "http_requests", "http_requests_total", handler="/v1/chat/completions", method="POST",
                        status="5xx") == failed
    models, total = st.metrics()
    # One model: the unlabelled HTTP series belong to the engine's only model, not to a model "".
    assert [m.model for m in models] == ["Qwen/Qwen3-0.6B"]
    assert total.error_rate.r5s is not None and total.request_rate.r5s is not None
    assert total.error_rate.r5s * 10 == failed
    assert total.request_rate.r5s * 10 == 40


def test_the_exported_error_rate_adds_the_5xx_responses() -> None:
    expr = rate(get_profile("vllm"), "requests_failed", "1m")
    assert 'vllm:request_success_total{finished_reason=~"abort|error"}' in expr
    assert 'http_requests_total{status=~"5xx"}' in expr
