"""The status document and text built from real readings: what a consumer of `status` sees."""

from __future__ import annotations

import json
import math

from console.commands.status import render_text
from console.model import EngineSnapshot, FleetSnapshot, Freshness, GpuFleet, Phase, SourceState
from console.profiles import EngineProfile, get_profile
from console.status_doc import status_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth

BOUNDS = (0.1, 0.5, 1.0)


def _ttft(cum: list[float], total: float) -> str:
    buckets = list(zip([*BOUNDS, math.inf], cum, strict=True))
    lab = {"model_name": "m", "engine": "0"}
    return synth.simple("vllm:num_requests_running", "gauge", [(lab, 1.0)]) + synth.histogram(
        "vllm:time_to_first_token_seconds", [(lab, buckets, total)]
    )


def _fleet(profile: EngineProfile, payloads: list[str]) -> FleetSnapshot:
    st = EngineMetricsState(profile)
    for t, text in enumerate(payloads):
        st.ingest(float(t * 5), normalize(profile, text))
    models, total = st.metrics()
    engine = EngineSnapshot(
        name="e", profile=profile.name, url="http://127.0.0.1:1", taken_at=1.0, phase=Phase.READY, reachable=True,
        models=models, total=total, metrics_freshness=Freshness(SourceState.OK, updated_at=1.0),
    )  # fmt: skip
    return FleetSnapshot(taken_at=1.0, engines=(engine,), gpus=GpuFleet(source="none"))


def test_p99_in_the_inf_bucket_is_a_lower_bound_in_json_and_text() -> None:
    vllm = get_profile("vllm")
    # 100 observations in the window: 50 below 0.5 s, 45 in (0.5, 1], 5 above the top bound 1 s.
    snap = _fleet(vllm, [_ttft([0, 0, 0, 0], 0.0), _ttft([10, 50, 95, 100], 80.0)])
    doc = json.loads(json.dumps(status_doc(snap), allow_nan=False))
    ttft = doc["engines"][0]["summary"]["ttft_s"]
    assert ttft["p99"] == 1.0 and ttft["capped"] == ["p99"]  # truth: > 1 s
    assert doc["engines"][0]["per_model"][0]["ttft_s"]["capped"] == ["p99"]
    assert doc["engines"][0]["summary"]["itl_s"]["capped"] == []
    row = render_text(snap).splitlines()[1]
    assert ">1000ms" in row  # TTFT99 column
    assert ">" not in row.split(">1000ms")[0][-12:]  # p50 (0.5 s) is not marked


def test_status_json_is_strict_even_with_non_finite_values_anywhere() -> None:
    from console.model import GpuSnapshot, HostSnapshot, ModelMetrics, Quantiles, Rates
    from console.status_doc import status_json

    bad = ModelMetrics(
        model="m", running=math.inf, waiting=math.nan, kv_usage=-math.inf, prefix_hit_rate=math.nan,
        generation_tps=Rates(math.inf, math.nan, 1.0), preemptions_total=math.inf,
        ttft=Quantiles(p50=math.nan, p99=math.inf, mean=math.inf, count=math.inf, low_sample=False),
    )  # fmt: skip
    engine = EngineSnapshot(name="e", profile="vllm", url="http://127.0.0.1:1", taken_at=1.0, models=(bad,), total=bad,
                            cpu_percent=math.nan)  # fmt: skip
    gpu = GpuSnapshot(index=0, name="g", uuid="u", taken_at=1.0, temperature_c=math.nan, power_w=math.inf)
    host = HostSnapshot(taken_at=1.0, cpu_percent=math.nan, load_avg=(math.inf, 1.0, 1.0))
    snap = FleetSnapshot(taken_at=1.0, engines=(engine,), gpus=GpuFleet(gpus=(gpu,), source="nvml"), host=host)
    for indent in (None, 2):
        text = status_json(snap, indent=indent)

        def reject(name: str) -> None:
            raise AssertionError(f"non-JSON constant {name} in status --json")

        doc = json.loads(text, parse_constant=reject)
        s = doc["engines"][0]["summary"]
        assert s["running"] is None and s["waiting"] is None and s["kv_usage"] is None
        assert s["generation_tokens_per_s"]["5s"] is None and s["generation_tokens_per_s"]["60s"] == 1.0
        assert s["ttft_s"]["p99"] is None and s["ttft_s"]["count"] is None
        assert doc["gpus"]["devices"][0]["power_w"] is None and doc["host"]["load_avg"][0] is None
