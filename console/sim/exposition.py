"""The simulator's metrics served through prometheus_client, mounted the way each engine mounts it.

The simulated engine keeps its state in ``promtext.Family`` objects; a custom collector turns them into
prometheus_client metric families at scrape time, and prometheus_client itself does the rest: text or
OpenMetrics (negotiated from ``Accept``), name escaping, number formatting and gzip.

Mounts, as in the engines' source:
- ``asgi``: ``make_asgi_app(registry)`` mounted at the metrics path with the ``^/path(?P<path>.*)$``
  regex (SGLang ``add_prometheus_middleware``; trtllm-serve ``/prometheus/metrics``). Gzip whenever the
  client accepts it; served by uvicorn, so the body goes out chunked (no Content-Length).
- ``plain``: vLLM attaches prometheus-fastapi-instrumentator's ``expose`` route on ``/metrics`` first
  (``generate_latest`` with ``CONTENT_TYPE_LATEST``, never compressed, no negotiation) and then the ASGI
  mount, which only answers the paths below it (``/metrics/``).

The simulator's server is aiohttp; ``serve_asgi`` runs prometheus_client's real ASGI app inside an
aiohttp handler, so headers and bytes come from the library, not from a copy of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest, make_asgi_app
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from console.sim.promtext import Family

# (families, with ``_created`` series) in the order the engine's registry yields them.
Groups = list[tuple[list[Family], bool]]
Asgi = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                Awaitable[None]]


class FamilyCollector:
    """A prometheus_client collector over the simulator's families, read at every scrape.

    ``multiprocess``: shape the samples as ``MultiProcessCollector`` yields them (SGLang, trtllm): no
    ``_created`` series, and a histogram's ``_sum`` before its buckets and ``_count`` last.
    """

    def __init__(self, groups: Callable[[], Groups], *, multiprocess: bool) -> None:
        self._groups = groups
        self.multiprocess = multiprocess

    def collect(self) -> Iterator[Metric]:
        for families, created in self._groups():
            yield from _metrics(families, created=created and not self.multiprocess, multiprocess=self.multiprocess)


def _metrics(families: Iterable[Family], *, created: bool, multiprocess: bool) -> Iterator[Metric]:
    for f in families:
        m = Metric(f.name, f.help, f.kind)
        if f.kind == "histogram":
            for labels, h in f.hists:
                base = dict(labels)
                buckets = [(f"{f.name}_bucket", {**base, "le": _go(b)}, float(c))
                           for b, c in zip((*h.bounds, float("inf")), h.cumulative(), strict=True)]
                total = (f"{f.name}_sum", base, h.sum)
                count = (f"{f.name}_count", base, float(h.count))
                for name, ls, value in ([total, *buckets, count] if multiprocess else [*buckets, count, total]):
                    m.add_sample(name, ls, value)
                if created:
                    m.add_sample(f"{f.name}_created", base, f.created)
        else:
            suffix = "_total" if f.kind == "counter" else ""
            for labels, v in f.values:
                m.add_sample(f.name + suffix, dict(labels), v)
                if created and f.kind == "counter":
                    m.add_sample(f"{f.name}_created", dict(labels), f.created)
        yield m


def registry(groups: Callable[[], Groups], *, multiprocess: bool) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(FamilyCollector(groups, multiprocess=multiprocess))  # type: ignore[arg-type]
    return reg


def plain_response(reg: CollectorRegistry, body: bytes | None = None) -> web.Response:
    """prometheus-fastapi-instrumentator's ``expose`` handler (vLLM's ``/metrics`` route); ``body``:
    an exposition rendered earlier."""
    return web.Response(body=generate_latest(reg) if body is None else body,
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


def asgi_app(reg: CollectorRegistry) -> Asgi:
    app: Asgi = make_asgi_app(reg)
    return app


async def serve_asgi(app: Asgi, request: web.Request) -> web.StreamResponse:
    """Run an ASGI application for one aiohttp request, streaming what it sends.

    Like uvicorn, a response without Content-Length goes out with chunked transfer encoding."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    sock = request.transport.get_extra_info("sockname") if request.transport else None
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode(),
        "query_string": request.query_string.encode(),
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()],
        "client": tuple(peer[:2]) if peer else None,
        "server": tuple(sock[:2]) if sock else None,
    }
    body = await request.read()
    sent_request = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_request
        if not sent_request:
            sent_request = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # no disconnect is reported while the app runs
        return {"type": "http.disconnect"}

    response: web.StreamResponse | None = None

    async def send(message: Any) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=int(message["status"]))
            for k, v in message.get("headers", []):
                response.headers.add(k.decode("latin-1"), v.decode("latin-1"))
            if "Content-Length" not in response.headers:
                response.enable_chunked_encoding()
            await response.prepare(request)
        elif message["type"] == "http.response.body":
            assert response is not None, "ASGI app sent a body before the response start"
            data = message.get("body", b"")
            if data:
                await response.write(data)
            if not message.get("more_body", False):
                await response.write_eof()

    await app(scope, receive, send)
    if response is None:
        raise web.HTTPInternalServerError(text="ASGI app sent no response")
    return response


def _go(bound: float) -> str:
    """A bucket bound as prometheus_client writes ``le`` (``floatToGoString``)."""
    text: str = floatToGoString(bound)  # type: ignore[no-untyped-call]
    return text
