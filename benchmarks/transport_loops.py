"""Two closed-loop streaming clients that differ ONLY in their HTTP transport.

Used by ``client_capacity.py`` to decide whether ``console/transport/http.py`` (raw asyncio HTTP/1.1)
earns its place against aiohttp. Everything else is the same code in both loops:

* request bodies encoded with orjson before the clock starts (``loadgen.encode_bodies``);
* every byte of the body goes through the same ``OpenAIStreamSink`` (``console/client/sse.py``
  incremental SSE parser + ``orjson.loads`` per event + the full ``RequestRecord`` timestamping);
* the same C workers pulling the next body the moment they are free, the garbage collector frozen
  and disabled during the run (as ``run_level`` does);
* the same headers (Content-Type, Accept).

The transport is the only difference: ``own`` calls ``stream_request`` (``HTTPClient``, which hands
each read to the sink inside ``buffer_updated``); ``aiohttp`` posts with one ``ClientSession``
(``TCPConnector(limit=0)``, C HTTP parser, no cookie jar, 256 KiB read buffer) and feeds the sink
from ``response.content.iter_any()``, i.e. what ``stream_request`` would be if written on aiohttp.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from console.client.stream import OpenAIStreamSink, stream_request
from console.client.timing import RequestRecord

_perf_ns = time.perf_counter_ns
HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}
Send = Callable[[int, bytes, RequestRecord], Awaitable[RequestRecord]]


async def _closed_loop(
    send: Send, n_targets: int, bodies: Sequence[bytes], conc: int, seconds: float
) -> dict[str, Any]:
    records: list[RequestRecord] = []
    nxt = 0
    deadline = 0

    async def worker(w: int) -> None:
        nonlocal nxt
        target = w % n_targets
        while _perf_ns() < deadline:
            i = nxt % len(bodies)
            nxt += 1
            rec = RequestRecord(index=i, t_sched_ns=_perf_ns())
            records.append(await send(target, bodies[i], rec))

    gc.collect()
    gc.freeze()
    gc.disable()
    cpu0, t0 = time.process_time(), _perf_ns()
    deadline = t0 + int(seconds * 1e9)
    await asyncio.gather(*(worker(w) for w in range(conc)))
    cpu1, t1 = time.process_time(), _perf_ns()
    gc.enable()
    gc.unfreeze()
    return {
        "events": sum(len(r.event_t_ns) for r in records),
        "requests": len(records),
        "errors": sum(1 for r in records if not r.ok),
        "cpu_s": cpu1 - cpu0,
        "wall_s": (t1 - t0) / 1e9,
    }


async def own_loop(
    urls: Sequence[str], path: str, bodies: Sequence[bytes], conc: int, seconds: float
) -> dict[str, Any]:
    from console.transport.http import HTTPClient

    clients = [HTTPClient(u) for u in urls]

    async def send(t: int, body: bytes, rec: RequestRecord) -> RequestRecord:
        return await stream_request(clients[t], path, body, rec, timeout=600.0)

    try:
        return await _closed_loop(send, len(urls), bodies, conc, seconds)
    finally:
        for c in clients:
            c.close()


async def aiohttp_loop(
    urls: Sequence[str], path: str, bodies: Sequence[bytes], conc: int, seconds: float
) -> dict[str, Any]:
    import aiohttp

    full = [u + path for u in urls]
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
    timeout = aiohttp.ClientTimeout(total=600.0)
    # Its best settings here: no cookie jar work, and a read buffer as large as http.py's (256 KiB).
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, cookie_jar=aiohttp.DummyCookieJar(), read_bufsize=256 * 1024
    ) as session:

        async def send(t: int, body: bytes, rec: RequestRecord) -> RequestRecord:
            sink = OpenAIStreamSink(rec)
            rec.t_send_ns = _perf_ns()
            try:
                async with session.post(full[t], data=body, headers=HEADERS) as resp:
                    rec.status = resp.status
                    rec.t_headers_ns = _perf_ns()
                    if not 200 <= resp.status < 300:
                        rec.error = f"HTTP {resp.status}: {(await resp.read())[:300]!r}"
                        return rec
                    async for data in resp.content.iter_any():
                        sink.on_body(data, _perf_ns())
                    sink.on_end(_perf_ns())
            except (aiohttp.ClientError, TimeoutError) as exc:
                rec.error = str(exc) or type(exc).__name__
            return rec

        return await _closed_loop(send, len(urls), bodies, conc, seconds)
