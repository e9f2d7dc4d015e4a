"""Windows: counter rates with per-series resets, windowed quantiles, hit rate, totals, n/a."""

from __future__ import annotations

import math

import pytest

from console.profiles import EngineProfile, get_profile
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState, histogram_quantile
from tests.telemetry import synth

BOUNDS = (0.1, 0.5, 1.0)


@pytest.fixture(scope="module")
def vllm() -> EngineProfile:
    return get_profile("vllm")


def _vllm(
    tokens: dict[str, float] | None = None,
    *,
    model: str = "m",
    hist: dict[str, tuple[list[float], float]] | None = None,
    hits: float | None = None,
    queries: float | None = None,
    running: float = 1.0,
    kv: float = 0.5,
) -> str:
    """vLLM payload; ``tokens``/``hist`` keyed by DP engine index; hist = (cumulative counts, sum)."""
    text = synth.simple("vllm:num_requests_running", "gauge", [({"model_name": model, "engine": "0"}, running)])
    text += synth.simple("vllm:kv_cache_usage_perc", "gauge", [({"model_name": model, "engine": "0"}, kv)])
    if tokens is not None:
        series = [({"model_name": model, "engine": e}, v) for e, v in tokens.items()]
        text += synth.simple("vllm:prompt_tokens_total", "counter", series, created=True)
    if hits is not None and queries is not None:
        lab = {"model_name": model, "engine": "0"}
        text += synth.simple("vllm:prefix_cache_hits_total", "counter", [(lab, hits)])
        text += synth.simple("vllm:prefix_cache_queries_total", "counter", [(lab, queries)])
    if hist is not None:
        series_h = []
        for e, (cum, total) in hist.items():
            buckets = list(zip([*BOUNDS, math.inf], cum, strict=True))
            series_h.append(({"model_name": model, "engine": e}, buckets, total))
        text += synth.histogram("vllm:time_to_first_token_seconds", series_h)
    return text


def test_steady_counter_rates(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    for t in range(0, 71):
        st.ingest(float(t), normalize(vllm, _vllm({"0": 100.0 * t, "1": 50.0 * t})))
    (m,), total = st.metrics()
    assert m.prompt_tps.r5s == pytest.approx(150.0)
    assert m.prompt_tps.r15s == pytest.approx(150.0)
    assert m.prompt_tps.r60s == pytest.approx(150.0)
    assert m.counters["prompt_tokens"] == 150.0 * 70
    assert total.prompt_tps.r60s == pytest.approx(150.0)


def test_single_reading_has_no_rates_yet(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm({"0": 10.0})))
    (m,), _ = st.metrics()
    assert m.prompt_tps.r5s is None and m.prompt_tps.r60s is None
    assert m.counters["prompt_tokens"] == 10.0
    assert m.running == 1.0


def test_engine_restart_mid_window_gives_no_negative_rate_and_no_spike(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    seen: list[float] = []
    value = 0.0
    for t in range(0, 90):
        if t == 40:
            value = 5000.0  # restarted, and much happened before the first scrape: not a spike
        elif t == 41:
            value = 30.0  # now a real restart: the value dropped
        else:
            value += 100.0
        st.ingest(float(t), normalize(vllm, _vllm({"0": value})))
        (m,), _ = st.metrics()
        seen += [r for r in (m.prompt_tps.r5s, m.prompt_tps.r15s, m.prompt_tps.r60s) if r is not None]
    assert st.resets == 1
    assert min(seen) >= 0.0
    # The jump to 5000 at t=40 is an increase (counters may jump); the drop at t=41 adds 0.
    assert max(seen) <= 100.0 + 4900.0 / 5 + 1e-9
    (m,), _ = st.metrics()
    assert m.prompt_tps.r15s == pytest.approx(100.0)  # well after the restart: the true rate


def test_reset_of_one_dp_replica_keeps_the_others(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm({"0": 1000.0, "1": 1000.0})))
    st.ingest(10.0, normalize(vllm, _vllm({"0": 2000.0, "1": 10.0})))  # replica 1 restarted
    (m,), _ = st.metrics()
    assert m.prompt_tps.r15s == pytest.approx(100.0)  # replica 0's 1000 over 10 s; replica 1 adds 0
    assert st.resets == 1
    st.ingest(20.0, normalize(vllm, _vllm({"0": 3000.0, "1": 510.0})))
    (m,), _ = st.metrics()
    assert m.prompt_tps.r5s == pytest.approx(150.0)
    assert m.counters["prompt_tokens"] == pytest.approx(3000.0 + 1000.0 + 500.0)


def test_new_series_created_before_the_previous_scrape_starts_at_its_baseline(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    wall = 1.7958e9 + 3600.0  # the payloads' _created (1.7958e9) is an hour before the first scrape
    st.ingest(0.0, normalize(vllm, _vllm({"0": 100.0})), wall=wall)
    st.ingest(5.0, normalize(vllm, _vllm({"0": 600.0, "3": 10**9})), wall=wall + 5)  # DP engine 3 appears
    (m,), _ = st.metrics()
    assert m.prompt_tps.r5s == pytest.approx(100.0)


def test_missing_metrics_are_none_never_zero() -> None:
    llama = get_profile("llamacpp")
    st = EngineMetricsState(llama)
    for t in range(3):
        st.ingest(float(t), normalize(llama, f"llamacpp:requests_processing 2\nllamacpp:prompt_tokens_total {t}\n"))
    (m,), _ = st.metrics()
    assert m.model == ""
    assert m.running == 2.0
    assert m.waiting is None  # mapped, absent from this payload
    assert m.kv_usage is None and m.kv_usage_mean is None  # llama.cpp has none
    assert m.request_rate.r5s is None and m.error_rate.r60s is None
    assert m.ttft.p50 is None and m.ttft.count is None  # no such histogram: n/a, not 0 observations
    assert m.prefix_hit_rate is None  # no cached-token counter in this build
    assert m.prompt_tps.r5s == pytest.approx(1.0)
    assert m.preemptions_total is None


def test_histogram_quantiles_match_hand_computation(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm(hist={"0": ([10, 20, 30, 30], 9.0), "1": ([0, 0, 0, 0], 0.0)})))
    # Window deltas, cumulative: engine 0 (10, 30, 50, 50), engine 1 (10, 30, 50, 50); summed
    # (20, 60, 100, 100): 20 in (0, 0.1], 40 in (0.1, 0.5], 40 in (0.5, 1]. Ranks 50, 90, 99.
    st.ingest(30.0, normalize(vllm, _vllm(hist={"0": ([20, 50, 80, 80], 29.0), "1": ([10, 30, 50, 50], 30.0)})))
    (m,), _ = st.metrics()
    q = m.ttft
    assert q.count == 100.0
    assert q.p50 == pytest.approx(0.1 + (0.5 - 0.1) * (50 - 20) / 40)  # 0.4
    assert q.p90 == pytest.approx(0.5 + (1.0 - 0.5) * (90 - 60) / 40)  # 0.875
    assert q.p99 == pytest.approx(0.5 + (1.0 - 0.5) * (99 - 60) / 40)  # 0.9875
    assert q.mean == pytest.approx((20.0 + 30.0) / 100)
    assert not q.low_sample and q.capped == ()


def test_quantile_in_inf_bucket_reports_highest_finite_bound_marked(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm(hist={"0": ([0, 0, 0, 0], 0.0)})))
    st.ingest(10.0, normalize(vllm, _vllm(hist={"0": ([10, 20, 40, 100], 500.0)})))
    (m,), _ = st.metrics()
    assert m.ttft.p50 == 1.0 and m.ttft.p90 == 1.0 and m.ttft.p99 == 1.0
    assert m.ttft.capped == ("p50", "p90", "p99")


def test_low_sample_flag_and_window_expiry(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm(hist={"0": ([0, 0, 0, 0], 0.0)})))
    st.ingest(1.0, normalize(vllm, _vllm(hist={"0": ([5, 5, 5, 5], 0.25)})))
    (m,), _ = st.metrics()
    assert m.ttft.count == 5.0 and m.ttft.low_sample
    assert m.ttft.p50 == pytest.approx(0.05)
    for t in range(2, 70):  # no new observations for more than the 60 s window
        st.ingest(float(t), normalize(vllm, _vllm(hist={"0": ([5, 5, 5, 5], 0.25)})))
    (m,), _ = st.metrics()
    assert m.ttft.count == 0.0 and m.ttft.p50 is None and m.ttft.low_sample


def test_histogram_reset_never_gives_negative_counts(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm(hist={"0": ([100, 200, 300, 300], 150.0)})))
    st.ingest(10.0, normalize(vllm, _vllm(hist={"0": ([1, 2, 2, 2], 0.6)})))  # restarted
    st.ingest(20.0, normalize(vllm, _vllm(hist={"0": ([21, 42, 42, 42], 10.6)})))
    (m,), _ = st.metrics()
    assert m.ttft.count == 40.0  # only what happened after the restart's first scrape
    assert m.ttft.p50 == pytest.approx(0.1 + 0.4 * (20 - 20) / 20)
    assert m.ttft.mean == pytest.approx(10.0 / 40)


def test_prefix_hit_rate_over_window_and_idle(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _vllm(hits=100.0, queries=1000.0)))
    st.ingest(10.0, normalize(vllm, _vllm(hits=400.0, queries=2000.0)))
    (m,), _ = st.metrics()
    assert m.prefix_hit_rate == pytest.approx(0.3)
    assert m.prefix_hit_rate_window == "60s"
    for t in range(11, 90):
        st.ingest(float(t), normalize(vllm, _vllm(hits=400.0, queries=2000.0)))
    (m,), _ = st.metrics()
    assert m.prefix_hit_rate is None  # idle: Δqueries == 0 over the window


def test_prefix_hit_rate_falls_back_to_the_gauge_without_counters() -> None:
    sglang = get_profile("sglang")
    text = synth.simple("sglang:cache_hit_rate", "gauge", [({"model_name": "q", "tp_rank": "0"}, 0.25)])
    st = EngineMetricsState(sglang)
    st.ingest(0.0, normalize(sglang, text))
    st.ingest(1.0, normalize(sglang, text))
    (m,), _ = st.metrics()
    assert m.prefix_hit_rate == 0.25
    assert m.prefix_hit_rate_window == "gauge"
    tgi = get_profile("tgi")
    st2 = EngineMetricsState(tgi)
    st2.ingest(0.0, normalize(tgi, "tgi_queue_size 1\n"))
    (m2,), _ = st2.metrics()
    assert m2.prefix_hit_rate is None


def test_the_first_scrape_shows_the_engines_own_gauge_until_the_counters_have_a_window() -> None:
    """SGLang has both: its gauge (the last prefill batch) stands in until a second scrape gives Δcounters."""
    sglang = get_profile("sglang")
    labels = {"model_name": "q", "tp_rank": "0"}

    def payload(cached: float, prompt: float) -> str:
        return (synth.simple("sglang:cache_hit_rate", "gauge", [(labels, 0.8)])
                + synth.simple("sglang:cached_tokens_total", "counter", [(labels, cached)])
                + synth.simple("sglang:prompt_tokens_total", "counter", [(labels, prompt)]))

    st = EngineMetricsState(sglang)
    st.ingest(0.0, normalize(sglang, payload(100.0, 1000.0)))
    (m,), _ = st.metrics()
    assert (m.prefix_hit_rate, m.prefix_hit_rate_window) == (0.8, "gauge")
    st.ingest(1.0, normalize(sglang, payload(400.0, 2000.0)))
    (m,), _ = st.metrics()
    assert m.prefix_hit_rate == pytest.approx(0.3) and m.prefix_hit_rate_window == "60s"
    vllm = get_profile("vllm")
    st2 = EngineMetricsState(vllm)
    st2.ingest(0.0, normalize(vllm, _vllm(hits=100.0, queries=1000.0)))
    (m2,), _ = st2.metrics()
    assert m2.prefix_hit_rate is None  # no gauge: n/a until the window


def test_totals_across_models(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    for t in (0.0, 10.0):
        text = _vllm({"0": 10.0 * t}, model="a", running=3.0, kv=0.2) + _vllm(
            {"0": 30.0 * t}, model="b", running=4.0, kv=0.7
        )
        st.ingest(t, normalize(vllm, text))
    models, total = st.metrics()
    assert [m.model for m in models] == ["a", "b"]
    assert total.model == "*"
    assert total.running == 7.0
    assert total.kv_usage == 0.7  # max, not a sum
    assert total.kv_usage_mean == pytest.approx(0.45)
    assert total.prompt_tps.r15s == pytest.approx(40.0)
    assert total.waiting is None


def test_clock_not_advancing_is_ignored_for_rates(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    st.ingest(5.0, normalize(vllm, _vllm({"0": 0.0})))
    st.ingest(10.0, normalize(vllm, _vllm({"0": 500.0})))
    st.ingest(10.0, normalize(vllm, _vllm({"0": 900.0}, running=9.0)))
    (m,), _ = st.metrics()
    assert m.running == 9.0
    assert m.prompt_tps.r5s == pytest.approx(100.0)


def test_empty_state_and_garbage_reading(vllm: EngineProfile) -> None:
    st = EngineMetricsState(vllm)
    assert st.metrics()[0] == ()
    st.ingest(0.0, normalize(vllm, b"\x00garbage"))
    models, total = st.metrics()
    assert models == () and total.running is None


def test_histogram_quantile_edge_cases() -> None:
    assert histogram_quantile(0.5, (), ()) == (None, False)
    assert histogram_quantile(0.5, (1.0, math.inf), (0.0, 0.0)) == (None, False)
    assert histogram_quantile(0.5, (math.inf,), (4.0,)) == (None, True)
    assert histogram_quantile(0.5, (-1.0, 1.0, math.inf), (4.0, 4.0, 4.0)) == (-1.0, False)
    assert histogram_quantile(0.5, (2.0, math.inf), (4.0, 4.0)) == (1.0, False)
