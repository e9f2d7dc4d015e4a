"""The pure parts of the Prometheus source: federate splitting, profile choice, selectors, the
config table, query_range steps and PromQL, and history backfill (no server needed)."""

from __future__ import annotations

import math

import orjson
import pytest

from console.config import parse_config
from console.errors import ConfigError, UserError
from console.profiles import load_profiles
from console.prometheus.api import MAX_POINTS, Matrix, _flat_series, _pair_series, accept_encoding, duration_s, step_for
from console.prometheus.backfill import bucket_quantiles, grid, queries_for
from console.prometheus.federate import profile_for, split_federate
from console.sources import PromTarget, display_url, parse_selector
from console.telemetry.metrics.history import History
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import histogram_quantile

# What Prometheus 2.42 federates: a TYPE line per sample name, target labels, ms timestamps.
FEDERATED = """\
# TYPE up untyped
up{instance="a:1",job="v",llm_d_ai_role="decode",pod="d0"} 1 1700000000500
up{instance="b:1",job="vllm"} 0 1700000000400
# TYPE vllm:num_requests_running untyped
vllm:num_requests_running{engine="0",instance="a:1",job="v",model_name="q",pod="d0"} 3 1700000000500
vllm:num_requests_running{engine="0",instance="c:1",job="vllm",model_name="q"} 7 1700000000100
# TYPE vllm:generation_tokens_created untyped
vllm:generation_tokens_created{engine="0",instance="a:1",job="v",model_name="q",pod="d0"} 1.7e+09 1700000000500
# TYPE vllm:generation_tokens_total untyped
vllm:generation_tokens_total{engine="0",instance="a:1",job="v",model_name="q",pod="d0"} 120 1700000000500
# TYPE vllm:time_to_first_token_seconds_bucket untyped
vllm:time_to_first_token_seconds_bucket{instance="a:1",job="v",le="0.1",model_name="q",pod="d0"} 2 1700000000500
vllm:time_to_first_token_seconds_bucket{instance="a:1",job="v",le="+Inf",model_name="q",pod="d0"} 5 1700000000500
# TYPE vllm:time_to_first_token_seconds_count untyped
vllm:time_to_first_token_seconds_count{instance="a:1",job="v",model_name="q",pod="d0"} 5 1700000000500
# TYPE vllm:time_to_first_token_seconds_sum untyped
vllm:time_to_first_token_seconds_sum{instance="a:1",job="v",model_name="q",pod="d0"} 0.9 1700000000500
# TYPE scrape_duration_seconds untyped
scrape_duration_seconds{instance="c:1",job="vllm"} 0.01 1700000000100
"""


def test_federate_splits_by_pod_then_instance_and_drops_target_labels() -> None:
    parts = split_federate(FEDERATED, ("pod", "instance"), ("llm_d_ai_role",))
    assert set(parts) == {"d0", "b:1", "c:1"}
    pod = parts["d0"]
    assert pod.ident_label == "pod" and pod.role == "decode" and pod.up == 1.0
    assert pod.ts_ms == 1700000000500
    assert all("instance=" not in line and "job=" not in line and "pod=" not in line for line in pod.lines)
    assert 'vllm:num_requests_running{engine="0",model_name="q"} 3' in pod.lines
    # A _created series comes after its counter, so the parser takes it as the birth time.
    assert pod.text.index("generation_tokens_total") < pod.text.index("generation_tokens_created")
    down = parts["b:1"]
    assert down.up == 0.0 and not down.lines  # only `up`: no engine series
    assert "scrape_duration_seconds" not in parts["c:1"].families


def test_a_federated_engine_reads_like_its_own_payload() -> None:
    profiles = load_profiles()
    pod = split_federate(FEDERATED, ("pod", "instance"))["d0"]
    profile = profile_for(pod.families, profiles)
    assert profile is not None and profile.name == "vllm"
    fed = normalize(profile, pod.text)
    own = normalize(profile, pod.text.replace("vllm:time_to_first_token_seconds_count", "# x\nvllm:time_to_first"
                                              "_token_seconds_count"))
    assert fed.models["q"].counters["generation_tokens"] == own.models["q"].counters["generation_tokens"]
    hist = next(iter(fed.models["q"].histograms["ttft"].values()))
    assert hist.count == 5 and hist.sum == pytest.approx(0.9)
    assert "generation_tokens" in fed.models["q"].created  # the _created line was read as a birth time
    assert "vllm:generation_tokens_created" not in fed.unmapped


def test_profile_from_names_or_config() -> None:
    profiles = load_profiles()
    assert profile_for({"sglang_num_running_reqs", "sglang_token_usage"}, profiles).name == "sglang"  # type: ignore[union-attr]
    assert profile_for({"tgi_queue_size"}, profiles).name == "tgi"  # type: ignore[union-attr]
    assert profile_for({"http_requests_total"}, profiles) is None
    assert profile_for({"http_requests_total"}, profiles, "vllm").name == "vllm"  # type: ignore[union-attr]


def test_selectors() -> None:
    assert parse_selector('{job="vllm", pod=~"decode-.*"}') == (("job", "=", "vllm"), ("pod", "=~", "decode-.*"))
    assert parse_selector("vllm:num_requests_running") == (("__name__", "=", "vllm:num_requests_running"),)
    for bad in ("{job=vllm}", "{job=\"x\"", "", "1abc{}", "{job=\"a\" pod=\"b\"}"):
        with pytest.raises(UserError):
            parse_selector(bad)


def test_sources_in_the_config() -> None:
    cfg = parse_config({"sources": {"prom": {"prometheus": "http://me:pw@prom:9090/", "selector": '{job="vllm"}',
                                             "history": "30m"}}}, "c.toml")
    (src,) = cfg.sources
    assert isinstance(src, PromTarget)
    assert src.url == "http://me:pw@prom:9090" and src.history_s == 1800
    assert src.label_matchers == (("job", "=", "vllm"),)
    assert src.display == "http://prom:9090"  # never the password
    assert display_url("https://[::1]:9090/p") == "https://[::1]:9090/p"
    for table, where in (({"prometheus": "prom:9090"}, "sources.p.prometheus"),
                         ({"prometheus": "http://p", "selector": "{x=1}"}, "sources.p.selector"),
                         ({"prometheus": "http://p", "profile": "nope"}, "sources.p.profile"),
                         ({"prometheus": "http://p", "token": "x"}, "sources.p.token: secrets are never written"),
                         ({"prometheus": "http://p", "history": "soon"}, "sources.p.history")):
        with pytest.raises(ConfigError) as exc:
            parse_config({"sources": {"p": table}}, "c.toml")
        assert where in str(exc.value) and "\n" not in str(exc.value)


def test_step_keeps_within_prometheus_point_limit() -> None:
    assert step_for(900, 1.0) == 1.0
    assert step_for(900, 15.0) == 15.0
    week = 7 * 86400
    assert week / step_for(week, 1.0) <= MAX_POINTS
    assert duration_s("1m30s") == 90 and duration_s("500ms") == 0.5 and duration_s("15s") == 15


def test_queries_cover_the_chart_series_for_every_engine_at_once() -> None:
    profile = load_profiles()["vllm"]
    fams = {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
            "vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total",
            "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total",
            "vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
            "vllm:e2e_request_latency_seconds_bucket"}
    made = queries_for(profile, fams, (("job", "=", "vllm"),), "pod", ["a", "b"], 1.0)
    qs = {q.series: q.promql for q in made}
    series = {q.series for q in made if not q.quantiles} | {n for q in made for n, _q in q.quantiles}
    assert series >= {"running", "waiting", "kv_usage", "generation_tps", "prompt_tps", "request_rate",
                       "error_rate", "prefix_hit_rate", "ttft_p50", "ttft_p99", "itl_p99", "e2e_p50"}
    assert qs["running"] == 'sum by (pod) (vllm:num_requests_running{job="vllm",pod=~"a|b"})'
    assert qs["kv_usage"].startswith("max by (pod)")
    assert "rate(vllm:generation_tokens_total{" in qs["generation_tps"] and "[5s]" in qs["generation_tps"]
    assert 'finished_reason=~"abort|error"' in qs["error_rate"]
    # A histogram: one query of the raw bucket counts for both quantiles (bucket_quantiles).
    ttft = next(q for q in queries_for(profile, fams, (), "pod", ["a"], 1.0) if q.series == "ttft")
    assert ttft.promql == 'vllm:time_to_first_token_seconds_bucket{pod=~"a"}' and ttft.window_s == 60
    assert [n for n, _q in ttft.quantiles] == ["ttft_p50", "ttft_p99"] and "ttft_p99" not in qs
    # A 15 s scrape interval widens the 5 s rate window to two samples and more (not the 60 s one).
    slow = {q.series: q.promql for q in queries_for(profile, fams, (), "pod", ["a"], 15.0)}
    assert "[38s]" in slow["generation_tps"]


def test_query_range_answers_read_flat_as_their_pairs_and_loopback_unzipped() -> None:
    def answer(*values: str) -> bytes:
        points = ",".join(f'[{1700000000.5 + k},"{v}"]' for k, v in enumerate(values))
        label = b'"le":"x},\\"values\\":[","pod":"a"'  # the points' key, inside a label value
        return (b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{' + label + b'},'
                b'"values":[' + points.encode() + b']}]}}')
    plain = answer("5", "0.25", "1e+06", "12345678901234567890", "0")
    flat = _flat_series(plain)
    assert flat is not None and flat == _pair_series(orjson.loads(plain)["data"])
    assert flat[0][0] == {"le": 'x},"values":[', "pod": "a"} and flat[0][2][:2] == (5.0, 0.25)
    for odd in ("NaN", "+Inf", "-0"):  # not a JSON number, or one that loses its sign: read as pairs
        body = answer("1", odd)
        assert _flat_series(body) is None and _pair_series(orjson.loads(body)["data"])[0][2][0] == 1.0
    assert accept_encoding("http://127.0.0.1:9090") == accept_encoding("http://[::1]:9090") == "identity"
    assert accept_encoding("http://localhost:9090") == "identity" and accept_encoding("https://prom.example") == "gzip"


def test_grid_and_backfill_put_older_points_before_the_live_ones() -> None:
    m = Matrix(((({"pod": "a"}), (100.0, 102.0), (1.0, 3.0)),))
    times, values = grid(m, "pod", 100.0, 103.0, 1.0)["a"]
    assert times == [100.0, 101.0, 102.0, 103.0] and values == [1.0, None, 3.0, None]
    h = History(capacity=5)
    h.append(("e", "running"), 101.5, None)  # a gap recorded before the source's first read: gives way
    h.append(("e", "running"), 102.5, 9.0)
    h.append(("e", "running"), 103.5, 10.0)
    h.backfill(("e", "running"), times, values)
    pts = h.points(("e", "running"))
    assert [t for t, _ in pts] == [100.0, 101.0, 102.0, 102.5, 103.5]
    assert pts[0][1] == 1.0 and math.isnan(pts[1][1]) and pts[-1][1] == 10.0


def test_bucket_quantiles_are_the_live_windows_quantiles_of_the_raw_counts() -> None:
    ttft = next(q for q in queries_for(load_profiles()["vllm"], {"vllm:time_to_first_token_seconds_bucket"}, (),
                                       "pod", ["a"], 1.0) if q.series == "ttft")
    bounds = (0.1, 0.5, float("inf"))
    # Cumulative counts every second from t=0 (the window's start) to 70: 1, 5, 6 more a second in
    # the three buckets; the engine restarts at 65 (counts drop); a second model's series joins at 30.
    def counts(t: int, i: int) -> float:
        return float((t - 65) * (1, 5, 6)[i]) if t >= 65 else float(t * (1, 5, 6)[i])
    series = [({"pod": "a", "le": str(b)}, tuple(float(t) for t in range(71)), tuple(counts(t, i) for t in range(71)))
              for i, b in enumerate(bounds)]
    series += [({"pod": "a", "le": str(b), "model": "m2"}, tuple(float(t) for t in range(30, 71)), (2.0,) * 41)
               for b in bounds]
    out = bucket_quantiles(Matrix(tuple(series)), "pod", 60.0, 70.0, 1.0, ttft)["a"]
    times, p99 = out["ttft_p99"]
    assert times[0] == 60.0 and len(times) == 11
    want, _ = histogram_quantile(0.99, bounds, (60.0 + 2, 300.0 + 2, 360.0 + 2))  # m2 counts from 0 (born since)
    assert p99[0] == pytest.approx(want) and out["ttft_p50"][1][0] == pytest.approx(
        histogram_quantile(0.5, bounds, (62.0, 302.0, 362.0))[0])
    assert p99[4] is not None and all(v is None for v in p99[5:])  # the drop at 65 lies in every later window
