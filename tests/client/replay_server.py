"""A tiny local aiohttp server that replays the real llama.cpp stream capture (and framing variants).

Used to test the client's HTTP + SSE path on real sockets before/besides the simulator.
Routes:
  POST /v1/chat/completions  ?variant=lf|crlf|bytes|ping|error|slow&gap_ms=N
  GET  /v1/models
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

SAMPLE = (Path(__file__).parent / "data" / "llamacpp-real-server-stream.txt").read_bytes()
EVENTS = [b + b"\n\n" for b in SAMPLE.split(b"\n\n") if b.strip()]


class ReplayServer:
    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.port = 0
        self.disconnects = 0
        self.active = 0
        self.bodies: list[bytes] = []

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.bodies.append(await request.read())
        variant = request.query.get("variant", "lf")
        gap = float(request.query.get("gap_ms", "0")) / 1000.0
        if variant == "http_error":
            return web.json_response({"error": {"code": 400, "message": "bad thing", "type": "invalid_request_error"}},
                                     status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        self.active += 1
        try:
            events = list(EVENTS)
            if variant == "error":
                events = [*events[:3], b'data: {"error":{"message":"engine died","type":"InternalServerError"}}\n\n']
            if variant == "ping":
                events = [b": ping\n\n", *[e for ev in events for e in (ev, b":\n\n")]]
            if variant == "crlf":
                events = [e.replace(b"\n", b"\r\n") for e in events]
            if variant == "slow":
                events = events * 50
            for ev in events:
                if variant == "bytes":
                    for i in range(len(ev)):
                        await resp.write(ev[i : i + 1])
                else:
                    await resp.write(ev)
                if gap:
                    await asyncio.sleep(gap)
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            self.disconnects += 1
            raise
        finally:
            self.active -= 1
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny-llama", "object": "model"}]})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        self.runner = web.AppRunner(app, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        # The runner lists the sockets its sites listen on: (host, port) for TCP.
        self.port = int(self.runner.addresses[0][1])
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
