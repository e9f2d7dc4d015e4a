"""The hand renderer writes byte-for-byte what prometheus_client's generate_latest writes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from console.sim.promtext import Family, go_float, render_client, rust_float
from console.sim.promtext import Histogram as SimHistogram


def test_render_client_matches_prometheus_client() -> None:
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
    assert render_client(fams, created=True, multiprocess=False) == generate_latest(reg).decode()


def test_number_formats() -> None:
    assert go_float(8128902.0) == "8.128902e+06"  # as in the SGLang docs sample
    assert go_float(0.28) == "0.28" and go_float(162.0) == "162.0" and go_float(float("inf")) == "+Inf"
    assert rust_float(3.0) == "3" and rust_float(0.00015) == "0.00015" and rust_float(1e-05) == "0.00001"
