"""A request its caller left (cancelled, timed out) fails quietly: the connection's later failure is
not logged by asyncio as "Future exception was never retrieved" (on screen it would garble the TUI)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from console.transport.http import HTTPClient, NoAnswer


async def _silent_server() -> tuple[asyncio.Server, int]:
    """Accepts, reads, never answers; closes every connection when stopped."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.read(65536)
        await asyncio.sleep(3600)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    server.writers = writers  # type: ignore[attr-defined]
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.asyncio
async def test_a_left_request_leaves_no_unretrieved_exception() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    server, port = await _silent_server()
    client = HTTPClient(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(NoAnswer):
            await client.get("/metrics", timeout=0.2)
        task = asyncio.create_task(client.get("/metrics", timeout=30))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for w in server.writers:  # type: ignore[attr-defined]
            w.close()
        await asyncio.sleep(0.2)
    finally:
        client.close()
        server.close()
    gc.collect()
    await asyncio.sleep(0)
    assert not [c for c in seen if "never retrieved" in str(c.get("message", ""))], seen
