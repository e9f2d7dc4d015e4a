"""OpenMetrics lines the text 0.0.4 parser must not drop: float timestamps and exemplars.

Each payload is checked against prometheus_client's own OpenMetrics parser, which is what vLLM,
SGLang and trtllm-serve render with: whatever it reads, we read with the same values.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.openmetrics.exposition import generate_latest as om_generate
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from console.profiles import get_profile
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.promtext import parse

HAND_WRITTEN = """\
# TYPE vllm:request_success counter
vllm:request_success_total{model_name="m",finished_reason="stop"} 17 1700000000.125
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 3 1700000000.25 # {trace_id="abc # x"} 0.07
vllm:time_to_first_token_seconds_bucket{model_name="m",le="1.0"} 9 1700000000.25 # {trace_id="d}"} 0.7 1.7e9
vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 10 1700000000.25 # {trace_id="ghi"} 4.2
vllm:time_to_first_token_seconds_count{model_name="m"} 10 1700000000.25
vllm:time_to_first_token_seconds_sum{model_name="m"} 9.5 1700000000.25
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 4 1.7e9
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{model_name="m"} 100 # {trace_id="t"} 12
# EOF
"""


def _reference(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample prometheus_client's OpenMetrics parser reads (``_created`` aside)."""
    out = {}
    for fam in text_string_to_metric_families(text):  # type: ignore[no-untyped-call]  # unannotated in prometheus_client
        for s in fam.samples:
            if not s.name.endswith("_created"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _ours(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    result = parse(text)
    assert result.errors == [], result.errors
    return {(s.name, s.labels): s.value for fam in result.families.values() for s in fam.samples}


def test_float_timestamps_and_exemplars_keep_their_samples() -> None:
    ref = _reference(HAND_WRITTEN)
    assert len(ref) == 8
    assert _ours(HAND_WRITTEN) == ref
    vllm = get_profile("vllm")
    r = normalize(vllm, HAND_WRITTEN)
    m = r.models["m"]
    assert m.gauges["running"] == 4.0
    assert m.counter_total("requests_finished") == 17.0
    assert m.counter_total("prompt_tokens") == 100.0
    (h,) = m.histograms["ttft"].values()
    assert h.counts == (3.0, 9.0, 10.0) and h.count == 10.0 and h.sum == 9.5


def test_prometheus_client_openmetrics_exposition_with_exemplars() -> None:
    # trtllm-serve's names (no ':'; prometheus_client escapes ':' in OpenMetrics sample names).
    registry = CollectorRegistry()
    ttft = Histogram("trtllm_time_to_first_token_seconds", "ttft", ["model_name"], buckets=(0.1, 1.0),
                     registry=registry)  # fmt: skip
    done = Counter("trtllm_request_success", "done", ["model_name", "finished_reason"], registry=registry)
    for v, trace in ((0.05, "a1"), (0.5, "b2"), (3.0, "c3")):
        ttft.labels("m").observe(v, exemplar={"trace_id": trace})
    done.labels("m", "stop").inc(5, exemplar={"trace_id": "d4"})
    text = om_generate(registry).decode()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client
    assert " # {" in text  # the exposition really carries exemplars (with float timestamps)
    ref = _reference(text)
    assert len(ref) == 6  # three buckets, count, sum, one counter
    assert _ours(text) == pytest.approx(ref)
    r = normalize(get_profile("trtllm"), text)
    m = r.models["m"]
    assert m.counter_total("requests_finished") == 5.0
    (h,) = m.histograms["ttft"].values()
    assert h.counts == (1.0, 2.0, 3.0) and h.count == 3.0
