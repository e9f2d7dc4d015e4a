"""Helpers: in-process simulated engines on free 127.0.0.1 ports, SSE reading, metrics parsing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from console.sim.engines import DEFAULT_MODELS, SimOptions
from console.sim.faults import Faults
from console.sim.server import SimServer

ENGINES = ("vllm", "sglang", "trtllm", "tgi", "llamacpp")
METRICS_PATH = {"vllm": "/metrics", "sglang": "/metrics", "trtllm": "/prometheus/metrics", "tgi": "/metrics",
                "llamacpp": "/metrics"}


@contextlib.asynccontextmanager
async def sim(engine: str, *, load_time: float = 0.0, faults: Faults | None = None, wait_ready: bool = True,
              **kw: Any) -> AsyncIterator[SimServer]:
    opts = SimOptions(engine=engine, model=kw.pop("model", DEFAULT_MODELS[engine]), **kw)
    server = SimServer(opts, host="127.0.0.1", port=0, load_time=load_time, faults=faults, access_log=False,
                       log=lambda _line: None)
    await server.start()
    try:
        if wait_ready:
            while server.state != "ready":
                import asyncio

                await asyncio.sleep(0.01)
        yield server
    finally:
        await server.stop()


async def read_sse(resp: aiohttp.ClientResponse) -> list[bytes]:
    """Raw SSE events (each ``data: ...`` without the trailing blank line); asserts the framing."""
    raw = await resp.read()
    assert raw.endswith(b"\n\n"), raw[-50:]
    events = raw[:-2].split(b"\n\n")
    for e in events:
        assert e.startswith(b"data: "), e[:80]
        assert b"\n" not in e, e[:80]
    return events


def sse_json(events: list[bytes]) -> list[dict[str, Any]]:
    assert events[-1] == b"data: [DONE]"
    return [orjson.loads(e[6:]) for e in events[:-1]]


def parse_metrics(text: str) -> dict[str, Any]:
    """name -> prometheus_client Metric (independent of the console's own parser)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample_value(fams: dict[str, Any], family: str, sample: str | None = None, **labels: str) -> float:
    """Sum of the samples named ``sample`` (default: the family) whose labels include ``labels``."""
    name = sample or family
    total = 0.0
    found = False
    for s in fams[family].samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
            found = True
    assert found, f"no sample {name} {labels} in {family}"
    return total


async def chat(session: aiohttp.ClientSession, url: str, content: str, *, stream: bool = True,
               headers: dict[str, str] | None = None, **body: Any) -> tuple[int, Any]:
    payload = {"messages": [{"role": "user", "content": content}], "stream": stream, **body}
    async with session.post(f"{url}/v1/chat/completions", json=payload, headers=headers) as resp:
        if resp.status != 200:
            return resp.status, await resp.read()
        if stream:
            return 200, sse_json(await read_sse(resp))
        return 200, await resp.json()
