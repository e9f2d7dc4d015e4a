"""``requests_per_s`` means one thing on every engine: finished requests, whatever the reason
(stop, length, abort, error); ``errors_per_s`` is the aborted and failed part of them."""

from __future__ import annotations

import pytest

from console.profiles import get_profile, load_profiles
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth

# Over 10 s: 60 stopped, 20 cut at max length, 10 aborted by the client, 10 failed in the engine.
STOP, LENGTH, ABORT, ERROR = 60.0, 20.0, 10.0, 10.0
FINISHED, FAILED = STOP + LENGTH + ABORT + ERROR, ABORT + ERROR


def _vllm(k: float) -> str:
    lab = {"model_name": "m", "engine": "0"}
    series = [({**lab, "finished_reason": r}, k * n) for r, n in
              (("stop", STOP), ("length", LENGTH), ("abort", ABORT), ("error", ERROR))]  # fmt: skip
    return synth.simple("vllm:request_success_total", "counter", series)


def _sglang(k: float) -> str:
    # num_requests_total counts every finished request, aborted ones included; errors end as aborts.
    lab = {"model_name": "m", "tp_rank": "0"}
    return synth.simple("sglang:num_requests_total", "counter", [(lab, k * FINISHED)]) + synth.simple(
        "sglang:num_aborted_requests_total", "counter", [(lab, k * FAILED)]
    )


def _trtllm(k: float) -> str:
    # Finished by the engine, by reason; HTTP errors never reach it and have their own counter.
    lab = {"model_name": "m", "engine_type": "trtllm"}
    reasons = (("stop", STOP), ("length", LENGTH), ("cancelled", ABORT))
    series = [({**lab, "finished_reason": r}, k * n) for r, n in reasons]
    return (
        synth.simple("trtllm_prompt_cached_tokens_total", "counter", [(lab, 0.0)])
        + synth.simple("trtllm_request_success_total", "counter", series)
        + synth.simple("trtllm_request_error_total", "counter", [({**lab, "http_code": "500"}, k * ERROR)])
    )


def _tgi(k: float) -> str:
    # tgi_request_success counts successes only; every failure is in tgi_request_failure{err}.
    return (
        f"# TYPE tgi_request_success counter\ntgi_request_success {k * (STOP + LENGTH)}\n"
        "# TYPE tgi_request_failure counter\n"
        f'tgi_request_failure{{err="dropped"}} {k * ABORT}\ntgi_request_failure{{err="generation"}} {k * ERROR}\n'
    )


@pytest.mark.parametrize(
    ("engine", "payload"), [("vllm", _vllm), ("sglang", _sglang), ("trtllm", _trtllm), ("tgi", _tgi)]
)
def test_requests_per_s_counts_every_finished_request_on_every_engine(engine: str, payload: object) -> None:
    assert callable(payload)
    profile = get_profile(engine)
    st = EngineMetricsState(profile)
    st.ingest(0.0, normalize(profile, payload(1.0)))
    st.ingest(10.0, normalize(profile, payload(2.0)))
    _, total = st.metrics()
    assert total.request_rate.r15s == pytest.approx(FINISHED / 10), engine
    assert total.error_rate.r15s == pytest.approx(FAILED / 10), engine


def test_every_profile_maps_finished_and_failed_together() -> None:
    for name, profile in load_profiles().items():
        mapped = {c for c in ("requests_finished", "requests_failed") if c in profile.metrics.map}
        assert mapped in (set(), {"requests_finished", "requests_failed"}), name
