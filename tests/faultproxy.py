"""A fault-injecting HTTP proxy for tests: one engine's endpoint, broken on demand.

Run as its own process (so the bodies it builds and sends never compete with the process under
test for the GIL)::

    python -m tests.faultproxy --upstream http://127.0.0.1:8000 [--metrics-path /metrics]

It prints one JSON line ``{"port": P, "control": C}``: engines are reached at ``127.0.0.1:P``; a
``POST /fault/NAME`` to ``127.0.0.1:C`` switches the fault (``/fault/none`` ends it) and answers
once the switch is in effect. Faults:

- ``refused``: nothing listens on P (the listening socket is closed; reopened when it ends);
- ``503``: every path answers 503 with a JSON error body;
- ``hang``: requests are accepted and never answered (until the fault ends);
- ``slow``: every answer is delayed by ``--slow`` seconds (10 s);
- ``garbage``: the metrics path answers 200 with random bytes;
- ``overcap``: the metrics path answers 200 with a body over the console's 16 MiB cap;
- ``nonfinite``: every gauge sample becomes ``+Inf``, with a twin series at ``-Inf``;
- ``huge-labels``: the metrics payload gains one sample of a gauge the console maps
  (``--huge-labels-metric``, vLLM's running-requests gauge) with 15 MiB of labels.

Requests go upstream without ``Accept-Encoding`` (bodies come back plain, so they can be rewritten).
Upstream errors (the engine behind it is down) close the client's connection without an answer,
as docker-proxy does for a container that is not listening. Every answer says
``Connection: close`` so that no pooled connection outlives a ``refused`` switch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys

import aiohttp
from aiohttp import web

FAULTS = ("refused", "503", "hang", "slow", "garbage", "overcap", "nonfinite", "huge-labels")
OVERCAP_BYTES = 17 * 1024 * 1024
HUGE_LABEL_BYTES = 15 * 1024 * 1024  # with the rest of the payload, just under the 16 MiB cap
_HOP = {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "upgrade"}
_TYPE_RE = re.compile(rb"^# TYPE (\S+) gauge\s*$", re.MULTILINE)


class FaultProxy:
    def __init__(self, upstream: str, *, metrics_path: str, slow: float, huge_labels_metric: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.huge_labels_metric = huge_labels_metric.encode()
        self.metrics_path = metrics_path
        self.slow = slow
        self.fault: str | None = None
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.port = 0
        self._session: aiohttp.ClientSession | None = None
        self._garbage = random.Random(7).randbytes(256 * 1024)
        self._huge_label_text = self._labels(HUGE_LABEL_BYTES)

    @staticmethod
    def _labels(size: int) -> bytes:
        n = size // 20
        return b",".join(b'l%06d="v%08d"' % (i, i) for i in range(n))

    # -- serving -------------------------------------------------------------------------------

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30), auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        await self._listen()

    async def _listen(self) -> None:
        assert self._runner is not None
        self._site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await self._site.start()
        server = self._site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])

    async def set_fault(self, fault: str | None) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(fault)
        old, self.fault = self.fault, fault
        if old == "refused" and fault != "refused":
            await self._listen()
        if fault == "refused" and old != "refused" and self._site is not None:
            await self._site.stop()
            self._site = None
        self._changed.set()
        self._changed = asyncio.Event()

    async def _wait_change(self, timeout: float | None) -> None:
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            pass

    async def handle(self, request: web.Request) -> web.StreamResponse:
        fault = self.fault
        close = {"Connection": "close"}
        if fault == "hang":
            while self.fault == "hang":
                await self._wait_change(None)
            fault = self.fault
        if fault == "slow":
            await self._wait_change(self.slow)  # a switch away from "slow" ends the delay early
            fault = self.fault
        if fault == "503":
            error = {"error": {"message": "Service Unavailable (fault proxy)", "code": 503}}
            return web.json_response(error, status=503, headers=close)
        is_metrics = request.path == self.metrics_path
        if is_metrics and fault == "garbage":
            return web.Response(body=self._garbage, content_type="text/plain", headers=close)
        if is_metrics and fault == "overcap":
            resp = web.StreamResponse(headers={**close, "Content-Type": "text/plain; version=0.0.4"})
            await resp.prepare(request)
            chunk = b"# " + b"x" * (1024 * 1024 - 3) + b"\n"
            for _ in range(OVERCAP_BYTES // len(chunk) + 1):
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP and k.lower() != "accept-encoding"}
        data = await request.read()
        try:
            async with self._session.request(request.method, self.upstream + request.rel_url.raw_path_qs,
                                             headers=headers, data=data or None) as up:
                body = await up.read()
                out_headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP}
                status = up.status
        except (aiohttp.ClientError, OSError, TimeoutError):
            if request.transport is not None:
                request.transport.close()  # like docker-proxy: accepted, then closed
            raise web.HTTPBadGateway() from None
        if is_metrics and status == 200 and fault == "nonfinite":
            body = _non_finite(body)
        elif is_metrics and status == 200 and fault == "huge-labels":
            body = body + self.huge_labels_metric + b"{" + self._huge_label_text + b"} 0\n"
        return web.Response(body=body, status=status, headers={**out_headers, **close})

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()


def _non_finite(body: bytes) -> bytes:
    """Every gauge sample becomes +Inf, and gets a twin series (one more label) at -Inf."""
    gauges = set(_TYPE_RE.findall(body))
    out: list[bytes] = []
    for line in body.split(b"\n"):
        if line and not line.startswith(b"#"):
            name_end = min((i for i in (line.find(b"{"), line.find(b" ")) if i != -1), default=-1)
            if name_end != -1 and line[:name_end] in gauges:
                head = line.rsplit(b" ", 1)[0]
                out.append(head + b" +Inf")
                if head.endswith(b"}"):
                    twin = head[:-1] + (b',fault="twin"}' if not head.endswith(b"{}") else b'fault="twin"}')
                else:
                    twin = head + b'{fault="twin"}'
                out.append(twin + b" -Inf")
                continue
        out.append(line)
    return b"\n".join(out)


async def _main(args: argparse.Namespace) -> None:
    proxy = FaultProxy(args.upstream, metrics_path=args.metrics_path, slow=args.slow,
                       huge_labels_metric=args.huge_labels_metric)
    await proxy.start()

    async def control(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            await proxy.set_fault(None if name == "none" else name)
        except ValueError:
            return web.Response(status=400, text=f"unknown fault {name!r} (known: {', '.join(FAULTS)}, none)")
        return web.Response(text=name)

    app = web.Application()
    app.router.add_post("/fault/{name}", control)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    print(json.dumps({"port": proxy.port, "control": int(sockets[0].getsockname()[1])}), flush=True)
    # Runs until stdin closes (the test ends it by closing the pipe or by signal).
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await proxy.stop()
    await runner.cleanup()


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tests.faultproxy")
    p.add_argument("--upstream", required=True)
    p.add_argument("--metrics-path", default="/metrics")
    p.add_argument("--slow", type=float, default=10.0)
    p.add_argument("--huge-labels-metric", default="vllm:num_requests_running")
    asyncio.run(_main(p.parse_args()))


if __name__ == "__main__":
    main()
