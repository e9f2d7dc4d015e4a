"""A connection the server drops as soon as it accepts (docker-proxy while nothing listens in the
container) fails the request at once as ClosedEarly; it never waits out the request's timeout."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from console.transport.http import ClosedEarly, HTTPClient


async def _resetting_server() -> tuple[asyncio.Server, int]:
    """Accepts each connection and resets it at once (SO_LINGER 0), reading nothing."""

    async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.asyncio
async def test_a_request_on_a_connection_already_dropped_fails_at_once() -> None:
    server, port = await _resetting_server()
    client = HTTPClient(f"http://127.0.0.1:{port}")
    try:
        # The order that hung: the reset is seen before the request is written.
        conn = await client._connect()
        while not conn.closed:
            await asyncio.sleep(0.01)
        headers, done = conn.start(client.build("GET", "/v1/models", None, None), None)
        assert headers.done() and done.done()
        assert isinstance(headers.exception(), ClosedEarly)
        # And through the client, whichever order the loop sees: ClosedEarly, never NoAnswer.
        for _ in range(20):
            with pytest.raises(ClosedEarly):
                await client.get("/v1/models", timeout=60)
    finally:
        client.close()
        server.close()
