"""Counter series the engine creates on first use count from 0; the error rate is 0 before the first
error where the engine has the error counter family, and n/a where it has none."""

from __future__ import annotations

import pytest

from console.profiles import get_profile
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth

TRT = {"model_name": "m", "engine_type": "trtllm"}


def _trtllm(stop: float, errors: dict[str, float]) -> str:
    text = synth.simple("trtllm_num_requests_running", "gauge", [(TRT, 2.0)])
    # Pre-created at start (same trtllm build as request_error_total): evidence the build has it.
    text += synth.simple("trtllm_prompt_cached_tokens_total", "counter", [(TRT, 0.0)])
    text += synth.simple("trtllm_request_success_total", "counter", [({**TRT, "finished_reason": "stop"}, stop)])
    if errors:
        series = [({**TRT, "http_code": code}, n) for code, n in errors.items()]
        text += synth.simple("trtllm_request_error_total", "counter", series)
    return text


def test_trtllm_first_http_error_is_counted_and_the_rate_is_zero_before() -> None:
    trt = get_profile("trtllm")
    st = EngineMetricsState(trt)
    for t in range(3):
        st.ingest(float(t), normalize(trt, _trtllm(10.0 * t, {})))
    (m,), _ = st.metrics()
    assert m.error_rate.r5s == 0.0 and m.error_rate.r60s == 0.0  # not None: no error yet
    st.ingest(3.0, normalize(trt, _trtllm(30.0, {"500": 1.0})))  # the first error, ever
    (m,), _ = st.metrics()
    assert m.error_rate.r5s == pytest.approx(1.0 / 3.0)  # one error since the oldest frame (3 s)
    st.ingest(4.0, normalize(trt, _trtllm(40.0, {"500": 1.0, "400": 2.0})))
    (m,), _ = st.metrics()
    assert m.counters["requests_failed"] == 3.0
    assert m.error_rate.r5s == pytest.approx(3.0 / 4.0)


def test_trtllm_build_without_the_error_counter_family_is_na() -> None:
    trt = get_profile("trtllm")
    st = EngineMetricsState(trt)
    text = synth.simple("trtllm_num_requests_running", "gauge", [(TRT, 2.0)])  # older build: no evidence
    for t in range(3):
        st.ingest(float(t), normalize(trt, text))
    (m,), _ = st.metrics()
    assert m.error_rate.r5s is None


def _tgi(success: float, failures: dict[str, float]) -> str:
    # metrics-exporter-prometheus: no _total suffix, no _created; a labelled counter appears on first use.
    text = "# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n"
    if success:
        text += f"# TYPE tgi_request_success counter\ntgi_request_success {success}\n"
    if failures:
        text += "# TYPE tgi_request_failure counter\n"
        text += "".join(f'tgi_request_failure{{err="{e}"}} {n}\n' for e, n in failures.items())
    return text


def test_tgi_single_failure_shows_and_error_rate_is_zero_before() -> None:
    tgi = get_profile("tgi")
    st = EngineMetricsState(tgi)
    st.ingest(0.0, normalize(tgi, _tgi(0.0, {})))
    st.ingest(1.0, normalize(tgi, _tgi(4.0, {})))  # the first successes
    (m,), _ = st.metrics()
    assert m.error_rate.r5s == 0.0
    assert m.request_rate.r5s == pytest.approx(4.0)  # born after the first scrape: counted from 0
    st.ingest(2.0, normalize(tgi, _tgi(4.0, {"generation": 1.0})))  # a single failure
    (m,), _ = st.metrics()
    assert m.error_rate.r5s == pytest.approx(0.5)  # 1 failure over 2 s
    assert m.counters["requests_failed"] == 1.0


def test_created_decides_for_prometheus_client_engines() -> None:
    """vLLM-style series with ``_created``: born after the previous scrape counts from 0, born long
    before (an existing series the console had not seen) starts at its baseline."""
    vllm = get_profile("vllm")

    def payload(series: dict[str, tuple[float, float]]) -> str:
        lab = 'model_name="m",finished_reason'
        lines = ["# TYPE vllm:request_success_total counter"]
        lines += [f'vllm:request_success_total{{{lab}="{r}"}} {v}' for r, (v, _) in series.items()]
        lines += ["# TYPE vllm:request_success_created gauge"]
        lines += [f'vllm:request_success_created{{{lab}="{r}"}} {c}' for r, (_, c) in series.items()]
        return "\n".join(lines) + "\n"

    wall = 1.8e9
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, payload({"stop": (10.0, wall - 100)})), wall=wall)
    # "abort" born 2 s after the first scrape (6 aborts so far); "length" born before it (unseen).
    st.ingest(5.0, normalize(vllm, payload({"stop": (20.0, wall - 100), "abort": (6.0, wall + 2),
                                            "length": (500.0, wall - 50)})), wall=wall + 5)  # fmt: skip
    (m,), _ = st.metrics()
    assert m.request_rate.r5s == pytest.approx((10.0 + 6.0) / 5)  # "length" adds nothing yet
    assert m.error_rate.r5s == pytest.approx(6.0 / 5)
