"""The hand renderer writes byte-for-byte what prometheus_client's generate_latest writes."""

from __future__ import annotations

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.openmetrics import exposition as om_exposition
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from console.sim.promtext import Family, go_float, negotiate, render_client, render_openmetrics, rust_float
from console.sim.promtext import Histogram as SimHistogram
from tests.sim.conftest import chat, sim


def _pair() -> tuple[CollectorRegistry, list[Family]]:
    """The same three families built with prometheus_client and with the simulator's renderer."""
    reg = CollectorRegistry()
    labels = {"model_name": "org/m", "engine": "0"}
    g = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              labelnames=list(labels), registry=reg)
    c = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labelnames=list(labels), registry=reg)
    h = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  labelnames=list(labels), buckets=[0.001, 0.1, 1.0, 2560.0], registry=reg)
    g.labels(**labels).set(7)
    c.labels(**labels).inc(8128902)
    for v in (0.0005, 0.05, 0.05, 3.0, 9999.0):
        h.labels(**labels).observe(v)
    created = {s.name: s.value for m in reg.collect() for s in m.samples if s.name.endswith("_created")}

    L = (("model_name", "org/m"), ("engine", "0"))
    sh = SimHistogram([0.001, 0.1, 1.0, 2560.0])
    for v in (0.0005, 0.05, 0.05, 3.0, 9999.0):
        sh.observe(v)
    fams = [
        Family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               values=[(L, 7.0)]),
        Family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", values=[(L, 8128902.0)],
               created=created["vllm:prompt_tokens_created"]),
        Family("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.",
               hists=[(L, sh)], created=created["vllm:time_to_first_token_seconds_created"]),
    ]
    return reg, fams


def test_render_client_matches_prometheus_client() -> None:
    reg, fams = _pair()
    assert render_client(fams, created=True, multiprocess=False) == generate_latest(reg).decode()


@pytest.mark.parametrize("escaping", ["underscores", "allow-utf-8"])
def test_render_openmetrics_matches_prometheus_client(escaping: str) -> None:
    reg, fams = _pair()
    want = om_exposition.generate_latest(reg, escaping=escaping).decode()  # type: ignore[no-untyped-call]
    assert render_openmetrics(fams, created=True, multiprocess=False, escaping=escaping) == want


@pytest.mark.parametrize("accept", [
    "",
    "*/*",
    "application/openmetrics-text",
    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,text/plain;version=0.0.4;q=0.3",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=0.0.4",
])
def test_content_negotiation_like_prometheus_client(accept: str) -> None:
    encoder, ctype = choose_encoder(accept)
    om, sim_ctype, _ = negotiate(accept)
    assert sim_ctype == ctype
    assert om == (encoder is not generate_latest and "openmetrics" in ctype)


async def test_vllm_answers_openmetrics_when_asked() -> None:
    async with sim("vllm") as srv, aiohttp.ClientSession() as s:
        await chat(s, srv.url, "hi", max_tokens=3, ignore_eos=True)
        # What Prometheus 3 sends: OpenMetrics first, names with ':' allowed (UTF-8 escaping).
        headers = {"Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                             "text/plain;version=0.0.4;q=0.3"}
        async with s.get(f"{srv.url}/metrics", headers=headers) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
            text = await r.text()
        assert text.endswith("# EOF\n")
        fams = {f.name: f for f in parse_openmetrics(text)}  # type: ignore[no-untyped-call]  # strict parser
        gen = fams["vllm:generation_tokens"]
        assert gen.type == "counter"
        assert [x.value for x in gen.samples if x.name == "vllm:generation_tokens_total"] == [3.0]


def test_number_formats() -> None:
    assert go_float(8128902.0) == "8.128902e+06"  # as in the SGLang docs sample
    assert go_float(0.28) == "0.28" and go_float(162.0) == "162.0" and go_float(float("inf")) == "+Inf"
    assert rust_float(3.0) == "3" and rust_float(0.00015) == "0.00015" and rust_float(1e-05) == "0.00001"
