"""Right after an engine comes back (stopped and started again), its row shows no rate or quantile
of the run before: the windows start afresh once the engine answered nothing (issue 31 item 11)."""

from __future__ import annotations

import asyncio

import aiohttp

from console.config import parse_engine_ref
from console.model import Phase
from console.sim.engines import DEFAULT_MODELS, SimOptions
from console.sim.server import SimServer
from console.telemetry.engine.collector import EngineCollector
from tests.sim.conftest import chat


def _server(port: int) -> SimServer:
    return SimServer(SimOptions(engine="vllm", model=DEFAULT_MODELS["vllm"]), host="127.0.0.1", port=port,
                     access_log=False, log=lambda _line: None)


async def _ready(server: SimServer) -> None:
    await server.start()
    while server.state != "ready":
        await asyncio.sleep(0.01)


def test_a_restarted_engine_shows_no_numbers_of_its_previous_run() -> None:
    async def main() -> None:
        first = _server(0)
        await _ready(first)
        port = first.port
        url = f"http://127.0.0.1:{port}"
        c = EngineCollector(parse_engine_ref(f"vllm@{url}"), period=1.0)
        await c.collect()
        async with aiohttp.ClientSession() as s:
            for _ in range(4):
                status, _ = await chat(s, url, "hello there", max_tokens=8)
                assert status == 200
        before = await c.collect()
        assert before.total is not None and before.total.ttft.p99 is not None
        assert before.total.generation_tps.r60s
        await first.stop()
        gone = await c.collect()
        assert not gone.reachable
        second = _server(port)
        await _ready(second)
        try:
            back = await c.collect()
        finally:
            await second.stop()
        assert back.reachable and back.phase is Phase.READY and back.total is not None
        # One payload of the new run: nothing to take a rate or a quantile over yet (n/a), and
        # nothing of the run before shown as if it were current.
        assert back.total.ttft.p99 is None and back.total.ttft.count is None
        assert back.total.generation_tps.r60s is None

    asyncio.run(main())
