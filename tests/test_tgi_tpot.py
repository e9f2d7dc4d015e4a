"""TGI's per-request mean time per token is a TPOT, not an ITL: mapped as such and explained."""

from __future__ import annotations

import math

from console.profiles import get_profile
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from console.ui.explain import explain
from tests.telemetry import synth

_BOUNDS = (0.01, 0.05, 0.1)


def _tgi(cum: list[float], total: float) -> str:
    buckets = list(zip([*_BOUNDS, math.inf], cum, strict=True))
    return synth.simple("tgi_queue_size", "gauge", [({}, 0.0)]) + synth.histogram(
        "tgi_request_mean_time_per_token_duration", [({}, buckets, total)], created=False
    )


def test_tgi_mean_time_per_token_is_tpot_not_itl() -> None:
    tgi = get_profile("tgi")
    assert "itl" not in tgi.metrics.map
    assert tgi.metrics.map["tpot"].names == ("tgi_request_mean_time_per_token_duration",)
    st = EngineMetricsState(tgi)
    st.ingest(0.0, normalize(tgi, _tgi([0, 0, 0, 0], 0.0)))
    st.ingest(5.0, normalize(tgi, _tgi([10, 30, 40, 40], 1.2)))
    (m,), _ = st.metrics()
    assert m.tpot.count == 40.0 and m.tpot.p50 is not None
    assert m.itl.count is None and m.itl.p50 is None  # n/a: TGI has no inter-token histogram


def test_explain_itl_on_tgi_points_at_its_tpot() -> None:
    text = explain("itl_p50", get_profile("tgi"), engine_name="tgi-a").plain
    assert "tgi_request_mean_time_per_token_duration" in text
    assert "TPOT" in text and "n/a" in text
    # An engine with both keeps its ITL explanation without the TPOT remark.
    assert "TPOT" not in explain("itl_p50", get_profile("vllm")).plain
