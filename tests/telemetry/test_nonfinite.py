"""Normalisation and windows are total: +Inf, -Inf, NaN and sums that overflow never raise, and
nothing non-finite reaches the status document (strict JSON)."""

from __future__ import annotations

import json
import math

import pytest

from console.model import EngineSnapshot, FleetSnapshot, Freshness, GpuFleet, ModelMetrics, SourceState
from console.profiles import get_profile
from console.status_doc import status_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth


def _payload(gauge_values: list[float], counter_values: list[float], bucket_scale: float) -> str:
    series = [({"model_name": "m", "engine": str(i)}, v) for i, v in enumerate(gauge_values)]
    text = synth.simple("vllm:num_requests_running", "gauge", series)
    text += synth.simple("vllm:num_requests_waiting", "gauge", series)
    text += synth.simple("vllm:kv_cache_usage_perc", "gauge", series)
    c_series = [({"model_name": "m", "engine": str(i)}, v) for i, v in enumerate(counter_values)]
    text += synth.simple("vllm:generation_tokens_total", "counter", c_series)
    text += synth.simple("vllm:prompt_tokens_total", "counter", c_series)
    buckets = [(0.1, 1.0 * bucket_scale), (1.0, 2.0 * bucket_scale), (math.inf, 3.0 * bucket_scale)]
    text += synth.histogram(
        "vllm:time_to_first_token_seconds",
        [({"model_name": "m", "engine": str(i)}, buckets, 1e308) for i in range(2)],
    )
    return text


def _finite_numbers(value: object, path: str = "") -> None:
    if isinstance(value, float):
        assert math.isfinite(value), f"{path} = {value}"
    elif isinstance(value, dict):
        for k, v in value.items():
            _finite_numbers(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _finite_numbers(v, f"{path}[{i}]")


CASES = {
    "+inf and -inf in a summed gauge": ([math.inf, -math.inf], [1.0, 2.0], 1.0),
    "two 1e308 gauges": ([1e308, 1e308], [1.0, 2.0], 1.0),
    "two 1e308 counters": ([1.0, 2.0], [1e308, 1e308], 1.0),
    "+inf counter": ([1.0], [math.inf, 5.0], 1.0),
    "-inf counter": ([1.0], [-math.inf, 5.0], 1.0),
    "nan everywhere": ([math.nan, math.nan], [math.nan, math.nan], math.nan),
    "huge bucket counts": ([1.0], [1.0], 1e308),
    "infinite bucket counts": ([1.0], [1.0], math.inf),
}


@pytest.mark.parametrize("case", list(CASES))
def test_non_finite_and_overflowing_values_never_raise(case: str) -> None:
    gauges, counters, scale = CASES[case]
    profile = get_profile("vllm")
    state = EngineMetricsState(profile)
    normal = normalize(profile, _payload([1.0, 2.0], [10.0, 20.0], 1.0))
    state.ingest(1.0, normal)
    bad = normalize(profile, _payload(gauges, counters, scale))
    assert bad.ok
    state.ingest(2.0, bad)
    state.ingest(3.0, normalize(profile, _payload(gauges, counters, scale)))
    models, total = state.metrics()
    state.ingest(4.0, normal)  # and back: no exception, nothing stuck
    models, total = state.metrics()
    for m in (*models, total):
        _check_model(m)
    state.ingest(5.0, bad)
    models, total = state.metrics()
    for m in (*models, total):
        _check_model(m)
    engine = EngineSnapshot(
        name="e", profile="vllm", url="http://127.0.0.1:1", taken_at=1.0, models=models, total=total,
        metrics_freshness=Freshness(SourceState.OK, updated_at=1.0),
    )
    doc = status_doc(FleetSnapshot(taken_at=1.0, engines=(engine,), gpus=GpuFleet(source="none")))
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN/Infinity
    _finite_numbers(doc)


def _check_model(m: ModelMetrics) -> None:
    for v in (m.running, m.waiting, m.kv_usage, m.kv_usage_mean, m.prefix_hit_rate, m.preemptions_total):
        assert v is None or math.isfinite(v)
    for r in (m.prompt_tps, m.generation_tps, m.request_rate, m.error_rate):
        for v in (r.r5s, r.r15s, r.r60s):
            assert v is None or (math.isfinite(v) and v >= 0)
    for q in (m.ttft, m.itl, m.tpot, m.e2e, m.queue_time):
        for v in (q.p50, q.p90, q.p99, q.mean, q.count):
            assert v is None or math.isfinite(v)
    for v in m.counters.values():
        assert math.isfinite(v)


def test_a_plus_inf_gauge_alone_is_left_out_not_summed() -> None:
    profile = get_profile("vllm")
    reading = normalize(profile, _payload([math.inf, 3.0], [1.0], 1.0))
    assert reading.models["m"].gauges["running"] == 3.0
