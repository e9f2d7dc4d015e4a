"""The all-models total of a one-model engine is that model's metrics under the total's name
(computed once, not twice: it is on the hub's per-scrape path)."""

from __future__ import annotations

import dataclasses

from console.profiles import get_profile
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import TOTAL_MODEL, EngineMetricsState
from tests.telemetry import synth


def _payload(models: list[str], tokens: float) -> str:
    series = [({"model_name": m, "engine": "0"}, tokens) for m in models]
    buckets = [(0.1, tokens / 4), (1.0, tokens / 2), (float("inf"), tokens)]
    return (synth.simple("vllm:num_requests_running", "gauge", series)
            + synth.simple("vllm:generation_tokens_total", "counter", series)
            + synth.histogram("vllm:time_to_first_token_seconds", [(lab, buckets, tokens) for lab, _ in series]))


def test_one_model_total_equals_the_full_computation() -> None:
    for models in (["a"], ["a", "b"]):
        state = EngineMetricsState(get_profile("vllm"))
        for t in range(1, 8):
            state.ingest(float(t), normalize(get_profile("vllm"), _payload(models, 100.0 * t)))
        per_model, total = state.metrics()
        full = state._model_metrics(TOTAL_MODEL, models)
        assert total == full and total.model == TOTAL_MODEL
        if len(models) == 1:
            assert dataclasses.replace(per_model[0], model=TOTAL_MODEL) == total
            assert total.generation_tps.r5s is not None and total.ttft.p50 is not None
