"""Figures outside their physical range are invalid data: null with a reason, never a number, and
never a crash.

A finite extreme (1e308, -1e308, 1e-308, 2**63) in any gauge, counter or histogram used to reach the
screens: ``status --json`` printed ``kv_usage: 1e+308`` under "ready, fresh", and the console died on
``round(inf)`` in a chart while exiting 0. These tests serve such payloads through prometheus_client
(the library vLLM serves with) and read them through the real paths.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.parser import text_string_to_metric_families

from console import plausible
from console.config import parse_engine_ref
from console.model import ModelMetrics, Quantiles, Rates, SpecDecode
from console.profiles import get_profile
from console.status_doc import model_doc
from console.telemetry.hub import Hub
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from console.ui.app import DeckApp, UiOptions
from console.ui.widgets.chart import block_chart, spark
from tests import procgroup
from tests.extremes import FINITE_EXTREMES, vllm_payload


# ---------------------------------------------------------------------------------- the check itself
def test_out_of_range_figures_become_none_with_a_reason() -> None:
    m = plausible.check(ModelMetrics(model="m", running=1e308, waiting=-3.0, kv_usage=1e308, prefix_hit_rate=0.5,
                                     generation_tps=Rates(r5s=2.0**63, r60s=10.0), ttft=Quantiles(p99=1e308, count=4),
                                     counters={"prompt_tokens": 2.0**63, "generation_tokens": 7.0}))
    assert (m.running, m.waiting, m.kv_usage) == (None, None, None)
    assert m.prefix_hit_rate == 0.5
    assert m.generation_tps == Rates(r5s=None, r60s=10.0)
    assert m.ttft.p99 is None and m.ttft.count == 4
    assert m.counters == {"generation_tokens": 7.0}
    assert {f.field for f in m.invalid} == {"running", "waiting", "kv_usage", "generation_tps.r5s", "ttft.p99",
                                            "counters.prompt_tokens"}
    kv = next(f for f in m.invalid if f.field == "kv_usage")
    assert kv.describe() == "kv_usage 1e+308 outside 0-1"


def test_values_in_range_and_rounding_are_kept() -> None:
    m = ModelMetrics(model="m", running=0.0, waiting=12.0, kv_usage=1.0, prefix_hit_rate=0.0,
                     spec=SpecDecode(acceptance_rate=0.0, acceptance_length=0.0))  # SGLang's gauges with spec off
    assert plausible.check(m) is m
    nudged = plausible.check(ModelMetrics(model="m", kv_usage=1.0 + 1e-12))
    assert nudged.kv_usage == 1.0 and nudged.invalid == ()


# ---------------------------------------------------------------------- any payload: the property
_VALUES = st.one_of(st.sampled_from(FINITE_EXTREMES), st.floats(allow_nan=True, allow_infinity=True),
                    st.integers(min_value=-(2**64), max_value=2**64).map(float), st.just(0.0), st.just(1.0))

# Each numeric figure of the status document's model block and the range it must lie in.
_DOC_RATES = {"prompt_tokens_per_s": plausible.TOKENS_PER_S, "generation_tokens_per_s": plausible.TOKENS_PER_S,
              "requests_per_s": plausible.EVENTS_PER_S, "errors_per_s": plausible.EVENTS_PER_S,
              "preemptions_per_s": plausible.EVENTS_PER_S, "admission_rejections_per_s": plausible.EVENTS_PER_S}
_DOC_QUANTILES = ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_time_s", "prefill_time_s", "decode_time_s",
                  "inference_time_s")


def _within(path: str, v: Any, bounds: plausible.Bounds) -> None:
    if v is None:
        return
    assert isinstance(v, (int, float)) and math.isfinite(v), f"{path} = {v!r}"
    lo, hi = bounds
    assert lo <= v <= hi, f"{path} = {v!r} outside {lo:g}..{hi:g}"


def check_model_doc(doc: dict[str, Any]) -> None:
    """Every figure of one ``model_doc`` null or in range; a numeric field this does not know fails."""
    known = {"model", "prefix_hit_rate_window", "invalid", "replicas"}
    for key in ("running", "waiting"):
        _within(key, doc[key], plausible.REQUESTS)
    for key in ("kv_usage", "kv_usage_mean", "prefix_hit_rate", "kv_host_usage"):
        _within(key, doc[key], plausible.FRACTION)
    _within("sleep_level", doc["sleep_level"], plausible.SLEEP_LEVEL)
    if doc["waiting_by_reason"] is not None:
        for key, v in doc["waiting_by_reason"].items():
            _within(f"waiting_by_reason.{key}", v, plausible.REQUESTS)
    pd = doc["pd_queues"]
    if pd is not None:
        for key in ("bootstrap", "inflight", "prealloc", "transfer"):
            _within(f"pd_queues.{key}", pd[key], plausible.REQUESTS)
        for w in ("5s", "15s", "60s", "now"):
            _within(f"pd_queues.bootstrap_failures_per_s.{w}", pd["bootstrap_failures_per_s"][w],
                    plausible.EVENTS_PER_S)
    tiers = doc["prompt_cache_tiers"]
    if tiers is not None:
        for tier, v in tiers["tokens_per_s"].items():
            _within(f"prompt_cache_tiers.tokens_per_s.{tier}", v, plausible.TOKENS_PER_S)
        _within("prompt_cache_tiers.external_hit_rate", tiers["external_hit_rate"], plausible.FRACTION)
    _within("preemptions_total", doc["preemptions_total"], plausible.COUNTER)
    assert isinstance(doc["replicas"], int) and doc["replicas"] >= 1
    for key, bounds in _DOC_RATES.items():
        for w in ("5s", "15s", "60s", "now"):
            _within(f"{key}.{w}", doc[key][w], bounds)
    for key in _DOC_QUANTILES:
        for q in ("p50", "p90", "p99", "mean"):
            _within(f"{key}.{q}", doc[key][q], plausible.SECONDS)
        _within(f"{key}.count", doc[key]["count"], plausible.COUNTER)
    spec = doc["spec_decode"]
    if spec is not None:
        _within("spec.acceptance_rate", spec["acceptance_rate"], plausible.FRACTION)
        _within("spec.draft_share", spec["draft_share"], plausible.FRACTION)
        _within("spec.acceptance_length", spec["acceptance_length"], plausible.ACCEPT_LENGTH)
        for i, v in enumerate(spec["per_position"]):
            _within(f"spec.per_position[{i}]", v, plausible.FRACTION)
    kvt = doc["kv_transfer"]
    if kvt is not None:
        _within("kv_transfer.bytes_per_s", kvt["bytes_per_s"], plausible.BYTES_PER_S)
        _within("kv_transfer.link_gb_s", kvt["link_gb_s"], plausible.GB_PER_S)
        _within("kv_transfer.latency_s", kvt["latency_s"], plausible.SECONDS)
        for w in ("5s", "15s", "60s", "now"):
            _within(f"kv_transfer.failures_per_s.{w}", kvt["failures_per_s"][w], plausible.EVENTS_PER_S)
    lora = doc["lora"]
    if lora is not None:
        for key, v in lora.items():
            _within(f"lora.{key}", v, plausible.LORA)
    checked = known | {"running", "waiting", "kv_usage", "kv_usage_mean", "prefix_hit_rate", "preemptions_total",
                       "spec_decode", "kv_transfer", "lora", "kv_host_usage", "sleep_level", "waiting_by_reason",
                       "pd_queues", "prompt_cache_tiers", *_DOC_RATES, *_DOC_QUANTILES}
    assert set(doc) <= checked, f"figures this test does not check: {sorted(set(doc) - checked)}"


def _drawn(values: list[float]) -> Callable[[str], float]:
    cycle = itertools.cycle(values)
    return lambda _series: next(cycle)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_VALUES, min_size=1, max_size=40), min_size=2, max_size=4))
def test_any_payload_gives_figures_in_range_or_null(rounds: list[list[float]]) -> None:
    profile = get_profile("vllm")
    state = EngineMetricsState(profile)
    for i, values in enumerate(rounds):
        reading = normalize(profile, vllm_payload(_drawn(values)))
        state.ingest(float(i * 5), reading, wall=1_700_000_000.0 + i * 5)
        per_model, total = state.metrics()
        for m in (*per_model, total):
            check_model_doc(json.loads(json.dumps(model_doc(m), allow_nan=False)))


def test_charts_draw_finite_extremes() -> None:
    values = [*FINITE_EXTREMES, math.nan, 0.0, 1.0]
    for hi in (None, 1.0, 1e-308):
        assert len(spark(values, 12, hi=hi)) == 12
        assert [len(r) for r in block_chart(values, 12, 3, hi=hi)] == [12, 12, 12]


# --------------------------------------------------- a real exposition server, read by the product
class _Payload:
    """prometheus_client's collector interface over our text: each scrape renders the next payload,
    every value drawn in turn from the finite extremes (and a few ordinary values)."""

    def __init__(self) -> None:
        self._values = itertools.cycle([*FINITE_EXTREMES, 0.0, 3.0, 0.5])
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Any]:
        with self._lock:
            text = vllm_payload(lambda _series: next(self._values))
        yield from text_string_to_metric_families(text)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def extreme_engine() -> Iterator[str]:
    """A vLLM-shaped endpoint on 127.0.0.1: /metrics through prometheus_client's WSGI app (every
    scrape new extremes), /v1/models and /health as vLLM answers them."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Payload())  # type: ignore[arg-type]
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("PATH_INFO", "")
        if path.startswith("/metrics"):
            return metrics(environ, start_response)
        if path.startswith("/v1/models"):
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096}]}']
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b""]

    class _Threaded(WSGIServer):
        daemon_threads = True

    server = make_server("127.0.0.1", 0, app, server_class=_Threaded, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_status_json_nulls_and_names_invalid_figures() -> None:
    with extreme_engine() as url:
        r = procgroup.run([sys.executable, "-m", "console", "status", "--json", "--engine", f"vllm@{url}",
                           "--sample", "3", "--gpus", "none"],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
        assert r.returncode in (0, 1), r.stderr
        doc = json.loads(r.stdout)
        engine = doc["engines"][0]
        assert engine["phase"] == "ready", engine
        check_model_doc(engine["summary"])
        assert engine["summary"]["invalid"], engine["summary"]
        assert all(set(f) == {"field", "reported", "allowed", "reason"} for f in engine["summary"]["invalid"])
        text = procgroup.run([sys.executable, "-m", "console", "status", "--engine", f"vllm@{url}", "--sample", "2",
                              "--gpus", "none"], capture_output=True, text=True, timeout=120, env=os.environ.copy())
        assert "invalid data, shown as n/a:" in text.stdout, text.stdout
        assert "inf%" not in text.stdout and "e+308" not in text.stdout.splitlines()[1], text.stdout


@pytest.mark.slow
async def test_console_stays_alive_on_finite_extremes() -> None:
    """30 s of payloads with finite extremes in every field, on the overview and the engine detail
    (charts): the app keeps running (Pilot re-raises any error the app met), and says bad data."""
    with extreme_engine() as url:
        inst = parse_engine_ref(f"vllm@{url}")
        hub = Hub([inst], refresh=0.25, gpu_source="simulated")
        hub.start()
        try:
            app = DeckApp(hub, options=UiOptions(), profiles={inst.profile.name: inst.profile})
            async with app.run_test(size=(120, 40)) as pilot:
                end = time.monotonic() + 30
                flipped = 0
                while time.monotonic() < end:
                    await pilot.pause(0.5)
                    flipped += 1
                    if flipped % 10 == 0:  # every 5 s: the detail screen (charts) and back
                        await pilot.press("enter" if app.screen.id != "engine" else "escape")
                assert app.is_running and app.fleet is not None
                assert [e for e in app.fleet.engines if e.invalid], [e.phase for e in app.fleet.engines]
        finally:
            hub.stop()


def test_the_attention_line_names_two_figures_and_counts_the_rest() -> None:
    from console.model import EngineSnapshot, Phase
    from console.ui import format as fmt

    m = plausible.check(ModelMetrics(model="m", running=1e308, waiting=-1.0, kv_usage=2.0, prefix_hit_rate=3.0))
    e = EngineSnapshot(name="e", profile="vllm", url="http://127.0.0.1:1", taken_at=0.0, phase=Phase.READY,
                       reachable=True, total=m)
    assert fmt.is_sick(e) and fmt.phase(e).plain == "▲ bad data"
    line = fmt.problem(e, 0.0)
    assert line == ("invalid data, shown as n/a: running 1e+308 outside 0-1e+07, waiting -1 outside 0-1e+07 "
                    "(+2 more; e on health lists them)"), line
