"""Profile-driven normalisation: names across versions, models kept apart, DP summed, TP not."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.profiles import EngineProfile, get_profile, parse_profile
from console.schema import dump
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.telemetry import synth


@pytest.fixture(scope="module")
def vllm() -> EngineProfile:
    return get_profile("vllm")


def _vllm_dp_payload(*, old_names: bool = False) -> str:
    """vLLM with 4 DP engines serving 2 models (engine label "0".."3")."""
    models = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"]
    running, waiting, kv, tokens = [], [], [], []
    hist = []
    for mi, m in enumerate(models):
        for e in range(4):
            lab = {"model_name": m, "engine": str(e)}
            running.append((lab, float(e + 1 + 10 * mi)))  # model 0: 1+2+3+4=10; model 1: 11+..+14=50
            waiting.append((lab, float(e)))  # 0+1+2+3 = 6
            kv.append((lab, [0.1, 0.8, 0.3, 0.2][e] if mi == 0 else 0.05))
            tokens.append((lab, 1000.0 * (e + 1)))
            per_bucket = [0.0] * 23
            per_bucket[3] = 5.0
            hist.append((lab, synth.cumulative(synth.VLLM_TTFT_BUCKETS, per_bucket), 0.1))
    kv_name = "vllm:gpu_cache_usage_perc" if old_names else "vllm:kv_cache_usage_perc"
    itl_name = "vllm:time_per_output_token_seconds" if old_names else "vllm:inter_token_latency_seconds"
    return (
        synth.simple("vllm:num_requests_running", "gauge", running)
        + synth.simple("vllm:num_requests_waiting", "gauge", waiting)
        + synth.simple(kv_name, "gauge", kv)
        + synth.simple("vllm:prompt_tokens_total", "counter", tokens, created=True)
        + synth.histogram("vllm:time_to_first_token_seconds", hist)
        + synth.histogram(itl_name, hist)
        + synth.simple("vllm:lora_requests_info", "gauge", [({"max_lora": "1"}, 1.7e9)])
    )


def test_dp_engines_sum_running_per_model_and_never_sum_kv(vllm: EngineProfile) -> None:
    r = normalize(vllm, _vllm_dp_payload())
    assert list(r.models) == ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"]
    llama, qwen = r.models["meta-llama/Llama-3.1-8B-Instruct"], r.models["Qwen/Qwen3-8B"]
    assert llama.gauges["running"] == 10.0
    assert qwen.gauges["running"] == 50.0
    assert llama.gauges["waiting"] == 6.0
    assert llama.gauges["kv_usage"] == 0.8  # max over DP engines
    assert llama.kv_usage_mean == pytest.approx(0.35)  # mean, not the sum 1.4
    assert qwen.gauges["kv_usage"] == 0.05
    assert llama.replicas == 4
    # Counters stay per series (per DP engine) for reset detection.
    assert llama.counters["prompt_tokens"] == {(("engine", str(e)),): 1000.0 * (e + 1) for e in range(4)}
    assert llama.counter_total("prompt_tokens") == 10000.0
    ttft = llama.histograms["ttft"]
    assert len(ttft) == 4
    h = ttft[(("engine", "0"),)]
    assert h.bounds[-1] == math.inf and len(h.bounds) == 23
    assert h.count == 5.0 and h.counts[3] == 5.0 and h.counts[2] == 0.0
    assert r.resolved["kv_usage"].raw_name == "vllm:kv_cache_usage_perc"
    assert not r.resolved["kv_usage"].legacy
    assert not r.unmapped  # lora_requests_info (engine-wide, no model label) feeds every model's LoRA gauges
    assert all(m.gauges["lora_slots_total"] == 1.0 and m.gauges["lora_running"] == 0.0 for m in r.models.values())
    assert "prefix_hits" in r.missing and "running" not in r.missing
    assert all(not n.endswith("_created") for n in r.unmapped)


def test_old_vllm_names_resolve_and_are_flagged_legacy(vllm: EngineProfile) -> None:
    r = normalize(vllm, _vllm_dp_payload(old_names=True))
    assert r.resolved["kv_usage"].raw_name == "vllm:gpu_cache_usage_perc"
    assert r.resolved["kv_usage"].legacy
    assert r.resolved["itl"].raw_name == "vllm:time_per_output_token_seconds"
    assert r.resolved["itl"].legacy
    assert r.models["Qwen/Qwen3-8B"].gauges["kv_usage"] == 0.05


def test_new_name_wins_when_both_are_present(vllm: EngineProfile) -> None:
    text = synth.simple("vllm:gpu_cache_usage_perc", "gauge", [({"model_name": "m"}, 0.9)]) + synth.simple(
        "vllm:kv_cache_usage_perc", "gauge", [({"model_name": "m"}, 0.4)]
    )
    r = normalize(vllm, text)
    assert r.models["m"].gauges["kv_usage"] == 0.4
    assert not r.resolved["kv_usage"].legacy
    assert r.unmapped == ("vllm:gpu_cache_usage_perc",)


def test_finished_reason_match_and_legacy_finish_reason(vllm: EngineProfile) -> None:
    series = [({"model_name": "m", "finished_reason": r}, v) for r, v in
              (("stop", 10.0), ("length", 5.0), ("abort", 2.0), ("error", 1.0))]  # fmt: skip
    r = normalize(vllm, synth.simple("vllm:request_success_total", "counter", series))
    assert r.models["m"].counter_total("requests_finished") == 18.0
    assert r.models["m"].counter_total("requests_failed") == 3.0
    trt = get_profile("trtllm")
    old = synth.simple("request_success_total", "counter",
                       [({"model_name": "undefined", "finish_reason": "stop"}, 2.0)])  # fmt: skip
    rt = normalize(trt, old)
    assert rt.models["undefined"].counter_total("requests_finished") == 2.0
    assert rt.resolved["requests_finished"].legacy


def test_failed_counter_present_but_nothing_matched_is_zero_not_na(vllm: EngineProfile) -> None:
    series = [({"model_name": "m", "finished_reason": "stop"}, 4.0)]
    r = normalize(vllm, synth.simple("vllm:request_success_total", "counter", series))
    assert r.models["m"].counter_total("requests_failed") == 0.0
    assert r.models["m"].counter_total("preemptions") is None


def test_sglang_tp_ranks_are_not_summed_dp_ranks_are() -> None:
    sglang = get_profile("sglang")
    run, usage, tokens = [], [], []
    for dp in range(2):
        for tp in range(4):
            lab = {"model_name": "qwen", "engine_type": "unified", "tp_rank": str(tp), "pp_rank": "0",
                   "moe_ep_rank": "0", "dp_rank": str(dp)}  # fmt: skip
            run.append((lab, 7.0 + dp))  # every TP rank of a DP replica reports the same batch
            usage.append((lab, 0.5 if dp == 0 else 0.25 + 0.01 * tp))
    tokens.append(({"model_name": "qwen"}, 12345.0))
    text = (
        synth.simple("sglang:num_running_reqs", "gauge", run)
        + synth.simple("sglang:token_usage", "gauge", usage)
        + synth.simple("sglang:prompt_tokens_total", "counter", tokens, created=True)
    )
    r = normalize(sglang, text)
    m = r.models["qwen"]
    assert m.gauges["running"] == 7.0 + 8.0  # DP summed, TP ranks collapsed (not 4x)
    assert m.gauges["kv_usage"] == 0.5
    assert m.kv_usage_mean == pytest.approx((0.5 + 0.28) / 2)  # per replica: max over its TP ranks
    assert m.replicas == 2
    assert m.counter_total("prompt_tokens") == 12345.0


def test_sglang_tp_histogram_keeps_one_shard_whole() -> None:
    sglang = get_profile("sglang")
    series = []
    for tp, n in ((0, 10.0), (1, 9.0)):
        lab = {"model_name": "q", "tp_rank": str(tp)}
        series.append((lab, [(0.1, n / 2), (1.0, n), (math.inf, n)], n * 0.2))
    r = normalize(sglang, synth.histogram("sglang:queue_time_seconds", series))
    hs = r.models["q"].histograms["queue_time"]
    assert list(hs) == [()]
    assert hs[()].count == 10.0 and hs[()].counts == (5.0, 10.0, 10.0)


def test_tgi_token_counters_from_histogram_sums_and_no_model_label() -> None:
    tgi = get_profile("tgi")
    text = (
        "# TYPE tgi_request_input_length histogram\n"
        'tgi_request_input_length_bucket{le="100"} 3\n'
        'tgi_request_input_length_bucket{le="+Inf"} 4\n'
        "tgi_request_input_length_sum 512\n"
        "tgi_request_input_length_count 4\n"
        "# TYPE tgi_request_generated_tokens histogram\n"
        'tgi_request_generated_tokens_bucket{le="+Inf"} 4\n'
        "tgi_request_generated_tokens_sum 1024\n"
        "tgi_request_generated_tokens_count 4\n"
        "# TYPE tgi_request_failure counter\n"
        'tgi_request_failure{err="validation"} 2\n'
        'tgi_request_failure{err="generation"} 1\n'
        "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\n"
        "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 5\n"
    )
    r = normalize(tgi, text)
    assert list(r.models) == [""]
    m = r.models[""]
    assert m.counter_total("prompt_tokens") == 512.0
    assert m.counter_total("generation_tokens") == 1024.0
    assert m.counter_total("requests_failed") == 3.0
    assert m.gauges == {"running": 5.0, "waiting": 3.0}
    assert "kv_usage" not in m.gauges


def test_scale_multiplies_values() -> None:
    data = dump(get_profile("llamacpp"), by_alias=True, exclude=frozenset({"source"}))
    data["metrics"]["map"]["running"]["scale"] = 0.5
    prof = parse_profile(data, "test")
    r = normalize(prof, "llamacpp:requests_processing 8\n")
    assert r.models[""].gauges["running"] == 4.0


def test_trtllm_json_sniffed_and_mapped() -> None:
    trt = get_profile("trtllm")
    payload = b'[{"iter": 1, "numActiveRequests": 9, "numQueuedRequests": 1},' \
              b' {"iter": 2, "numActiveRequests": 3, "numQueuedRequests": 4,' \
              b' "kvCacheStats": {"usedNumBlocks": 25, "maxNumBlocks": 100, "cacheHitRate": 0.5}}]'  # fmt: skip
    r = normalize(trt, payload)
    assert r.format == "trtllm-json"
    m = r.models[""]
    assert m.gauges["running"] == 3.0 and m.gauges["waiting"] == 4.0  # newest iteration
    assert m.gauges["kv_usage"] == 0.25
    assert m.gauges["prefix_hit_rate_gauge"] == 0.5


@pytest.mark.parametrize(
    ("payload", "fmt", "summary"),
    [
        (b"", "prometheus", "no samples"),
        (b"\x00\xff\xfe", "prometheus",
         "2 problems; first: payload: invalid UTF-8 at byte 1; decoded with replacement characters"),
        (b"<html><body>404</body></html>", "prometheus",
         "1 problem; first: line 1: invalid metric name: '<html><body>404</body></html>'"),
        (b'{"error": "Unauthorized"}', "trtllm-json", "no samples"),  # JSON without numbers: nothing to read
        ("\n\n\n", "prometheus", "no samples"),
        (b"[1, 2", "trtllm-json", "1 problem; first: not valid JSON (*); reading \"key\": number pairs instead"),
    ],
)  # fmt: skip
def test_garbage_gives_an_empty_reading_with_errors_not_an_exception(
    vllm: EngineProfile, payload: bytes, fmt: str, summary: str
) -> None:
    r = normalize(vllm, payload)
    assert r.empty and not r.ok
    assert r.models == {}
    # Every mapped metric is missing, except those of optional features (spec decode, P/D, LoRA).
    assert set(r.missing) == {c for c, m in vllm.metrics.map.items() if not m.optional}
    assert r.format == fmt
    # The decoder's own wording (inside the parentheses) is not ours to pin.
    head, _, tail = summary.partition("*")
    got = r.error_summary()
    if tail:
        assert got.startswith(head) and got.endswith(tail), got
    else:
        assert got == summary


def test_full_false_parses_only_mapped_families(vllm: EngineProfile) -> None:
    # A family no mapping reads (the payload's own lora_requests_info now feeds the LoRA gauges).
    text = _vllm_dp_payload() + ('# TYPE vllm:mm_cache_queries counter\n'
                                 'vllm:mm_cache_queries_total{engine="0"} 1.0\n')
    fast, full = normalize(vllm, text, full=False), normalize(vllm, text)
    assert fast.models == full.models
    assert fast.unmapped == ()
    assert len(full.raw) > len(fast.raw) > 0
    assert {s.kind for s in full.raw} >= {"gauge", "counter", "histogram"}


def test_openmetrics_counter_family_is_found_by_sample_name(vllm: EngineProfile) -> None:
    text = '# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{model_name="m",engine="0"} 7.0\n'
    r = normalize(vllm, text)
    assert r.models["m"].counter_total("prompt_tokens") == 7.0
    assert "vllm:prompt_tokens" not in r.unmapped


_PROFILES = [get_profile(n) for n in ("vllm", "sglang", "trtllm", "tgi", "llamacpp")]


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(_PROFILES),
    st.one_of(
        st.binary(max_size=600),
        st.text(
            alphabet=st.sampled_from(list('[]{}",:0123456789.eE-+ \nabnumActiveRequestskvCacheStats')), max_size=300
        ),
        st.lists(
            st.sampled_from(
                [
                    'vllm:num_requests_running{engine="0",model_name="m"} 1',
                    'sglang:token_usage{tp_rank="1"} NaN',
                    "tgi_request_input_length_sum 5",
                    "llamacpp:requests_processing +Inf",
                    'time_to_first_token_seconds_bucket{le="x"} 1',
                    'trtllm_time_to_first_token_seconds_bucket{le="1.0",model_name="a"} 3',
                    'trtllm_time_to_first_token_seconds_count{model_name="a"} 2',
                    "# TYPE x histogram",
                    "...",
                    "x_bucket 1",
                ]
            ),
            max_size=12,
        ).map("\n".join),
    ),
)
def test_normalize_never_raises(profile: EngineProfile, payload: bytes | str) -> None:
    r = normalize(profile, payload)
    assert r.ok == (r.sample_count > 0)
    optional = {c for c, m in profile.metrics.map.items() if m.optional}  # absent is not "missing"
    assert set(r.missing) | set(r.resolved) | optional == set(profile.metrics.map)
    assert not optional & set(r.missing)
    r.raw  # noqa: B018 - builds lazily; must not raise either
    state = EngineMetricsState(profile)
    state.ingest(0.0, r)
    state.ingest(1.0, normalize(profile, payload))
    models, total = state.metrics()
    assert len(models) == len(r.models)
    for m in (*models, total):
        for rates in (m.prompt_tps, m.generation_tps, m.request_rate):
            assert all(v is None or v >= 0 for v in (rates.r5s, rates.r15s, rates.r60s))
