"""The status document and text built from real readings: what a consumer of `status` sees."""

from __future__ import annotations

import json
import math

from console.commands.status import render_text
from console.model import EngineSnapshot, FleetSnapshot, Freshness, GpuFleet, Phase, SourceState
from console.profiles import EngineProfile, get_profile
from console.status_doc import status_doc
from console.telemetry.normalize import normalize
from console.telemetry.windows import EngineMetricsState
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
