"""The simulator serves its metrics through prometheus_client, mounted as each engine mounts it.

- The collector over the simulator's families yields what native prometheus_client metrics yield
  (single-process registry, and a real ``MultiProcessCollector`` registry built in a subprocess).
- On the wire: vLLM's ``/metrics`` is the instrumentator's plain route (never compressed, no
  negotiation) with prometheus_client's ASGI app under ``/metrics/``; SGLang and trtllm-serve answer
  from the ASGI app (gzip when accepted, chunked, OpenMetrics when asked).
"""

from __future__ import annotations

import gzip
import json
import sys
import textwrap

import aiohttp
import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics import exposition as om_exposition
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from console.sim.exposition import registry
from console.sim.promtext import Family, rust_float
from console.sim.promtext import Histogram as SimHistogram
from tests import procgroup
from tests.sim.conftest import chat, sim

BOUNDS = [0.001, 0.1, 1.0, 2560.0]
OBSERVED = (0.0005, 0.05, 0.05, 3.0, 9999.0)


def _pair() -> tuple[CollectorRegistry, list[Family]]:
    """The same three families built with prometheus_client and with the simulator's families."""
    reg = CollectorRegistry()
    labels = {"model_name": "org/m", "engine": "0"}
    g = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              labelnames=list(labels), registry=reg)
    c = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labelnames=list(labels), registry=reg)
    h = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  labelnames=list(labels), buckets=BOUNDS, registry=reg)
    g.labels(**labels).set(7)
    c.labels(**labels).inc(8128902)
    for v in OBSERVED:
        h.labels(**labels).observe(v)
    created = {s.name: s.value for m in reg.collect() for s in m.samples if s.name.endswith("_created")}
    return reg, _families(created["vllm:prompt_tokens_created"], created["vllm:time_to_first_token_seconds_created"])


def _families(counter_created: float = 0.0, hist_created: float = 0.0) -> list[Family]:
    L = (("model_name", "org/m"), ("engine", "0"))
    sh = SimHistogram(BOUNDS)
    for v in OBSERVED:
        sh.observe(v)
    return [
        Family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
               values=[(L, 7.0)]),
        Family("vllm:prompt_tokens", "counter", "Number of prefill tokens processed.", values=[(L, 8128902.0)],
               created=counter_created),
        Family("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.",
               hists=[(L, sh)], created=hist_created),
    ]


def test_collector_matches_native_metrics() -> None:
    reg, fams = _pair()
    ours = registry(lambda: [(fams, True)], multiprocess=False)
    assert generate_latest(ours).decode() == generate_latest(reg).decode()


@pytest.mark.parametrize("escaping", ["underscores", "allow-utf-8"])
def test_collector_matches_native_openmetrics(escaping: str) -> None:
    reg, fams = _pair()
    ours = registry(lambda: [(fams, True)], multiprocess=False)
    want = om_exposition.generate_latest(reg, escaping=escaping)  # type: ignore[no-untyped-call]
    assert om_exposition.generate_latest(ours, escaping=escaping) == want  # type: ignore[no-untyped-call]


_MULTIPROCESS = textwrap.dedent("""
    import os, sys, tempfile
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp()
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
    labels = {"model_name": "org/m", "engine": "0"}
    g = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
              labelnames=list(labels), multiprocess_mode="mostrecent")
    c = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labelnames=list(labels))
    h = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                  labelnames=list(labels), buckets=%r)
    g.labels(**labels).set(7)
    c.labels(**labels).inc(8128902)
    for v in %r:
        h.labels(**labels).observe(v)
    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg)
    sys.stdout.write(generate_latest(reg).decode())
""") % (BOUNDS, OBSERVED)


def _families_by_name(text: str) -> dict[str, list[str]]:
    """Each family's lines in order (MultiProcessCollector's family order follows its files)."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current = line.split()[2]
        out.setdefault(current, []).append(line)
    return out


def test_multiprocess_shape_matches_a_real_multiprocess_registry() -> None:
    real = procgroup.run([sys.executable, "-c", _MULTIPROCESS], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    ours = generate_latest(registry(lambda: [(_families(), True)], multiprocess=True)).decode()
    assert "_created" not in ours
    assert _families_by_name(ours) == _families_by_name(real)


async def test_vllm_metrics_route_is_plain_and_the_mount_negotiates() -> None:
    async with sim("vllm") as srv, aiohttp.ClientSession(auto_decompress=False) as s:
        await chat(s, srv.url, "hi", max_tokens=3, ignore_eos=True)
        # What Prometheus 3 sends: OpenMetrics first. vLLM's /metrics route ignores it (plain text).
        headers = {"Accept": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                             "text/plain;version=0.0.4;q=0.3", "Accept-Encoding": "gzip"}
        async with s.get(f"{srv.url}/metrics", headers=headers) as r:
            assert r.headers["Content-Type"] == CONTENT_TYPE_LATEST
            assert "Content-Encoding" not in r.headers
            assert r.headers["Content-Length"] == str(len(await r.read()))
        # Below it, prometheus_client's ASGI app: negotiated, gzip, chunked.
        async with s.get(f"{srv.url}/metrics/", headers=headers) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
            assert r.headers["Content-Encoding"] == "gzip"
            assert r.headers.get("Transfer-Encoding") == "chunked"
            text = gzip.decompress(await r.read()).decode()
        assert text.endswith("# EOF\n")
        fams = {f.name: f for f in parse_openmetrics(text)}  # type: ignore[no-untyped-call]  # strict parser
        gen = fams["vllm:generation_tokens"]
        assert gen.type == "counter"
        assert [x.value for x in gen.samples if x.name == "vllm:generation_tokens_total"] == [3.0]
        assert "process_resident_memory_bytes" in fams and "python_gc_objects_collected" in fams


@pytest.mark.parametrize("engine,path", [("sglang", "/metrics"), ("trtllm", "/prometheus/metrics")])
async def test_asgi_mount_gzips_like_the_engine(engine: str, path: str) -> None:
    async with sim(engine) as srv, aiohttp.ClientSession(auto_decompress=False) as s:
        await chat(s, srv.url, "hi", max_tokens=3, ignore_eos=True)
        async with s.get(srv.url + path, headers={"Accept-Encoding": "gzip, deflate"}) as r:
            assert r.status == 200
            assert r.headers["Content-Encoding"] == "gzip"
            assert r.headers.get("Transfer-Encoding") == "chunked"
            body = await r.read()
        assert body[:2] == b"\x1f\x8b"
        text = gzip.decompress(body).decode()
        assert "_created" not in text  # multiprocess registry
        async with s.get(srv.url + path, headers={"Accept-Encoding": "identity"}) as r:
            assert "Content-Encoding" not in r.headers
            assert (await r.read()).decode().split("\n")[0] == text.split("\n")[0]
    if engine == "trtllm":
        async with sim(engine) as srv, aiohttp.ClientSession() as s, s.get(srv.url + "/metrics") as r:
            assert json.loads(await r.read()) == []  # the JSON iteration stats stay on /metrics


def test_number_formats() -> None:
    assert rust_float(3.0) == "3" and rust_float(0.00015) == "0.00015" and rust_float(1e-05) == "0.00001"
