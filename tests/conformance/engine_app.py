"""An engine-shaped metrics server built from the libraries the real engines use (not from enginedeck).

    python tests/conformance/engine_app.py --flavour vllm|sglang|trtllm [--no-gzip] [--rates P,G]

It prints ``PORT <n>`` once it listens on 127.0.0.1, then serves until killed:

- ``vllm``: FastAPI; prometheus_fastapi_instrumentator's ``expose`` route on ``/metrics`` (plain text,
  never compressed) plus prometheus_client's ``make_asgi_app`` mounted under ``/metrics`` with the same
  path regex, exactly as ``vllm/entrypoints/serve/instrumentator/metrics.py`` attaches them. Two
  data-parallel engines (``engine="0"``/``"1"``) in a single-process registry (``_created`` series).
- ``sglang``: ``make_asgi_app`` over a *multiprocess* registry (``PROMETHEUS_MULTIPROC_DIR``, gauges
  in ``mostrecent`` mode) mounted at ``/metrics``, as SGLang's ``add_prometheus_middleware`` does;
  gzip whenever the client accepts it, chunked transfer (uvicorn, no Content-Length).
- ``trtllm``: the same multiprocess ASGI mount at ``/prometheus/metrics``, with the instrumentator's
  ``http_*`` series, and the JSON iteration-stats route on ``/metrics``.

Values are fixed so a test can compare what enginedeck reports with what went into the registry:
gauges are constants (``GAUGES``), counters grow at ``--rates`` tokens/s from the moment the server
starts (computed from elapsed time, so ticker jitter does not change the rate), histograms get one
observation of fixed values per tick. ``GET /_truth`` returns the counters' current values.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
from typing import Any

MODEL = "conformance/model-7b"
# engine index -> (running, waiting, kv fraction); the vLLM flavour has two DP engines.
VLLM_ENGINES = {"0": (3, 1, 0.25), "1": (4, 2, 0.5)}
SGLANG_GAUGES = (5, 2, 0.375)
TRTLLM_GAUGES = (6, 3, 0.625)
TTFT_VALUE = 0.07  # seconds, observed once per tick (lands in a known bucket)
TICK = 0.1


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--flavour", choices=["vllm", "sglang", "trtllm"], required=True)
    p.add_argument("--no-gzip", action="store_true", help="make_asgi_app(disable_compression=True)")
    p.add_argument("--rates", default="300,120", help="prompt,generation tokens per second (per engine)")
    return p.parse_args()


def main() -> None:
    args = _parse()
    if args.flavour in ("sglang", "trtllm"):
        # Must be set before prometheus_client is imported: it picks the value class at import time.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="conformance-prom-")
        atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    import uvicorn

    prompt_rate, gen_rate = (float(x) for x in args.rates.split(","))
    app, tick = _build(args.flavour, not args.no_gzip, prompt_rate, gen_rate)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def run() -> None:
        ticker = asyncio.create_task(_tick_forever(tick))
        try:
            await server.serve(sockets=[sock])
        finally:
            ticker.cancel()

    asyncio.run(run())


async def _tick_forever(tick: Any) -> None:
    while True:
        tick()
        await asyncio.sleep(TICK)


def _build(flavour: str, gzip: bool, prompt_rate: float, gen_rate: float) -> tuple[Any, Any]:
    import prometheus_client
    from fastapi import FastAPI, Response
    from fastapi.responses import JSONResponse
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_asgi_app, multiprocess
    from starlette.routing import Mount

    app = FastAPI()
    multi = flavour != "vllm"
    if multi:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # unannotated in prometheus_client
        metric_registry: Any = None  # multiprocess metrics live in the files, not a registry
    else:
        registry = CollectorRegistry()
        metric_registry = registry
    kw: dict[str, Any] = {"registry": metric_registry} if metric_registry is not None else {}
    gauge_kw: dict[str, Any] = {**kw, "multiprocess_mode": "mostrecent"} if multi else kw

    if flavour == "vllm":
        labels = ["model_name", "engine"]
        series = [{"model_name": MODEL, "engine": e} for e in VLLM_ENGINES]
        running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, **kw)
        waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, **kw)
        kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, **kw)
        prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, **kw)
        gen = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, **kw)
        ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                         labels, buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0],
                         **kw)
        gauges = {e: VLLM_ENGINES[e] for e in VLLM_ENGINES}
    else:
        prefix = "sglang:" if flavour == "sglang" else "trtllm_"
        names = {
            "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                       "sglang:prompt_tokens", "sglang:generation_tokens", "sglang:time_to_first_token_seconds"),
            "trtllm": ("trtllm_num_requests_running", "trtllm_num_requests_waiting", "trtllm_kv_cache_utilization",
                       "trtllm_prompt_tokens", "trtllm_generation_tokens", "trtllm_time_to_first_token_seconds"),
        }[flavour]
        labels = ["model_name"]
        series = [{"model_name": MODEL}]
        running = Gauge(names[0], "The number of running requests", labels, **gauge_kw)
        waiting = Gauge(names[1], "The number of requests in the waiting queue", labels, **gauge_kw)
        kv = Gauge(names[2], "The token usage", labels, **gauge_kw)
        prompt = Counter(names[3], "Number of prefill tokens processed.", labels, **kw)
        gen = Counter(names[4], "Number of generation tokens processed.", labels, **kw)
        ttft = Histogram(names[5], "Histogram of time to first token in seconds.", labels,
                         buckets=[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1.0], **kw)
        gauges = {"-": SGLANG_GAUGES if flavour == "sglang" else TRTLLM_GAUGES}
        del prefix

    for s, g in zip(series, gauges.values(), strict=True):
        running.labels(**s).set(g[0])
        waiting.labels(**s).set(g[1])
        kv.labels(**s).set(g[2])

    t0 = time.monotonic()
    done = {"prompt": 0.0, "gen": 0.0}

    def tick() -> None:
        elapsed = time.monotonic() - t0
        for key, counter, rate in (("prompt", prompt, prompt_rate), ("gen", gen, gen_rate)):
            delta = rate * elapsed - done[key]
            if delta > 0:
                for s in series:
                    counter.labels(**s).inc(delta)
                done[key] += delta
        for s in series:
            ttft.labels(**s).observe(TTFT_VALUE)

    if flavour == "vllm":
        from prometheus_fastapi_instrumentator import Instrumentator

        class PrometheusResponse(Response):
            media_type = prometheus_client.CONTENT_TYPE_LATEST

        Instrumentator(excluded_handlers=["/metrics", "/health", "/load", "/ping", "/version", "/server_info"],
                       registry=registry).add().instrument(app).expose(app, response_class=PrometheusResponse)
        route = Mount("/metrics", make_asgi_app(registry=registry, disable_compression=not gzip))
        route.path_regex = re.compile("^/metrics(?P<path>.*)$")
        app.routes.append(route)
    elif flavour == "sglang":
        route = Mount("/metrics", make_asgi_app(registry=registry, disable_compression=not gzip))
        route.path_regex = re.compile("^/metrics(?P<path>.*)$")
        app.routes.append(route)
    else:
        from prometheus_fastapi_instrumentator import Instrumentator

        @app.get("/metrics")
        async def iteration_stats() -> JSONResponse:
            return JSONResponse([])

        Instrumentator(should_group_status_codes=False, excluded_handlers=[".*"], registry=registry
                       ).add().instrument(app).expose(app)
        route = Mount("/prometheus/metrics", make_asgi_app(registry=registry, disable_compression=not gzip))
        route.path_regex = re.compile("^/prometheus/metrics(?P<path>.*)$")
        app.routes.append(route)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": flavour,
                                                         "max_model_len": 4096}]})

    @app.get("/_truth")
    async def truth() -> JSONResponse:
        return JSONResponse({"elapsed": time.monotonic() - t0, "prompt": done["prompt"], "gen": done["gen"],
                             "prompt_rate": prompt_rate, "gen_rate": gen_rate, "replicas": len(series)})

    return app, tick


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
