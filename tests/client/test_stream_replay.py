"""The streaming client on real sockets against a local server replaying the real llama.cpp capture."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest

from console.client.stream import GenParams, build_body, list_models, stream_request
from console.client.timing import RequestRecord, compute
from console.profiles import get_profile
from console.transport.http import Cancellable, HTTPClient

from .replay_server import ReplayServer


@pytest.fixture
async def server() -> AsyncIterator[tuple[ReplayServer, str]]:
    srv = ReplayServer()
    url = await srv.start()
    try:
        yield srv, url
    finally:
        await srv.stop()


def body() -> bytes:
    b, _ = build_body(get_profile("llamacpp").api, "chat", "tiny-llama", "hi", GenParams(max_tokens=8))
    return orjson.dumps(b)


@pytest.mark.parametrize("variant", ["lf", "crlf", "bytes", "ping"])
async def test_framing_variants_give_the_same_record(server: tuple[ReplayServer, str], variant: str) -> None:
    _, url = server
    client = HTTPClient(url)
    try:
        rec = await stream_request(client, f"/v1/chat/completions?variant={variant}", body(), RequestRecord(0))
    finally:
        client.close()
    assert rec.ok, rec.error
    assert len(rec.event_t_ns) == 8 and rec.completion_tokens == 8 and rec.prompt_tokens == 30
    assert rec.t_done_ns is not None and rec.t_done_ns >= rec.event_t_ns[-1]
    m = compute(rec)
    assert m.ttft_ms is not None and m.ttft_ms > 0 and m.e2e_ms is not None and m.e2e_ms >= m.ttft_ms


async def test_keep_alive_reuses_one_connection(server: tuple[ReplayServer, str]) -> None:
    _, url = server
    client = HTTPClient(url)
    try:
        for _ in range(5):
            rec = await stream_request(client, "/v1/chat/completions", body(), RequestRecord(0))
            assert rec.ok
        assert len(client._all) == 1
    finally:
        client.close()


async def test_request_body_has_usage_options_but_no_continuous_for_llamacpp(server: tuple[ReplayServer, str]) -> None:
    srv, url = server
    client = HTTPClient(url)
    try:
        await stream_request(client, "/v1/chat/completions", body(), RequestRecord(0))
    finally:
        client.close()
    sent = orjson.loads(srv.bodies[-1])
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["stream"] is True and sent["max_tokens"] == 8


async def test_stream_error_event_and_http_error(server: tuple[ReplayServer, str]) -> None:
    _, url = server
    client = HTTPClient(url)
    try:
        rec = await stream_request(client, "/v1/chat/completions?variant=error", body(), RequestRecord(0))
        assert not rec.ok and rec.error is not None and "engine died" in rec.error
        rec2 = await stream_request(client, "/v1/chat/completions?variant=http_error", body(), RequestRecord(1))
        assert rec2.status == 400 and rec2.error == "HTTP 400: bad thing (invalid_request_error)"
    finally:
        client.close()


async def test_cancel_closes_the_connection_and_server_sees_it(server: tuple[ReplayServer, str]) -> None:
    srv, url = server
    client = HTTPClient(url)
    cancel = Cancellable()
    rec = RequestRecord(0)
    task = asyncio.create_task(
        stream_request(client, "/v1/chat/completions?variant=slow&gap_ms=20", body(), rec, cancel=cancel)
    )
    for _ in range(200):
        await asyncio.sleep(0.01)
        if len(rec.event_t_ns) >= 2:
            break
    assert srv.active == 1
    cancel.cancel()
    await asyncio.wait_for(task, 5)
    assert rec.cancelled
    for _ in range(200):
        if srv.active == 0:
            break
        await asyncio.sleep(0.01)
    assert srv.active == 0 and srv.disconnects == 1
    client.close()


async def test_list_models_and_unreachable(server: tuple[ReplayServer, str]) -> None:
    from console.transport.http import HTTPError

    _, url = server
    client = HTTPClient(url)
    try:
        assert await list_models(client, get_profile("llamacpp").api, None) == ["tiny-llama"]
    finally:
        client.close()
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    dead = HTTPClient(f"http://127.0.0.1:{port}")
    with pytest.raises(HTTPError, match="cannot connect"):
        await list_models(dead, get_profile("vllm").api, None)
