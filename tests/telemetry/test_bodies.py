"""Bodies decoded from any Content-Encoding under a cap on raw and decoded size (gzip bombs refused)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from types import FrameType

import pytest
from aiohttp import web

from console.config import parse_engine_ref
from console.telemetry.engine.scrape import MAX_METRICS_BYTES, EngineProbe
from console.transport.bodies import BodyError, BodyTooLarge, BoundedBody, decode_body

TEXT = b"".join(b'vllm:num_requests_running{model_name="m",engine="%d"} %d.0\n' % (i, i) for i in range(2000))


def _deflate(data: bytes, wbits: int) -> bytes:
    z = zlib.compressobj(wbits=wbits)
    return z.compress(data) + z.flush()


@pytest.mark.parametrize("encoding,raw", [
    ("gzip", gzip.compress(TEXT)),
    ("x-gzip", gzip.compress(TEXT)),
    ("GZIP", gzip.compress(TEXT)),
    ("deflate", _deflate(TEXT, zlib.MAX_WBITS)),       # RFC 9110 deflate: zlib-wrapped
    ("deflate", _deflate(TEXT, -zlib.MAX_WBITS)),      # what some servers send: raw deflate
    ("identity", TEXT),
    ("", TEXT),
    ("gzip, deflate", _deflate(gzip.compress(TEXT), zlib.MAX_WBITS)),  # stacked, applied in order
], ids=lambda v: v if isinstance(v, str) else "body")  # gzip stamps the time: bytes make unstable test ids
def test_decodes(encoding: str, raw: bytes) -> None:
    assert decode_body(raw, encoding, 1 << 24) == TEXT
    # Fed in small pieces, as a network delivers it.
    body = BoundedBody(encoding, 1 << 24)
    for i in range(0, len(raw), 7):
        body.feed(raw[i : i + 7])
    assert body.result() == TEXT


def test_gzip_bomb_is_refused_without_filling_memory() -> None:
    z = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    bomb = b"".join(z.compress(zeros) for _ in range(256)) + z.flush()  # 256 MiB of zeros
    assert len(bomb) < 1 << 20
    tracemalloc.start()
    try:
        body = BoundedBody("gzip", 16 << 20)
        with pytest.raises(BodyTooLarge, match="decoded response larger than 16 MiB"):
            for i in range(0, len(bomb), 65536):
                body.feed(bomb[i : i + 65536])
            body.result()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"peak {peak / 2**20:.0f} MiB while refusing the bomb"


def test_raw_cap_and_broken_streams() -> None:
    with pytest.raises(BodyTooLarge, match="response larger than 1 KiB"):
        BoundedBody("", 1024).feed(bytes(2000))
    with pytest.raises(BodyError, match="truncated gzip"):
        decode_body(gzip.compress(TEXT)[:-20], "gzip", 1 << 24)
    with pytest.raises(BodyError, match="invalid gzip"):
        decode_body(b"not gzip at all", "gzip", 1 << 24)
    with pytest.raises(BodyError, match="unsupported Content-Encoding 'br'"):
        BoundedBody("br", 1 << 24)
    assert decode_body(b"", "gzip", 1024) == b""


# -- through the probe the hub uses: a gzip answer is read, a bomb is a stale reason --------------------

@pytest.fixture
async def gzip_server() -> AsyncIterator[str]:
    bomb = gzip.compress(bytes(MAX_METRICS_BYTES + (1 << 20)))

    async def metrics(request: web.Request) -> web.Response:
        assert "gzip" in request.headers.get("Accept-Encoding", "")
        return web.Response(body=gzip.compress(TEXT), headers={"Content-Encoding": "gzip",
                                                                "Content-Type": "text/plain; version=0.0.4"})

    async def bombed(request: web.Request) -> web.Response:
        return web.Response(body=bomb, headers={"Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/bomb", bombed)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_probe_reads_gzip_and_refuses_a_bomb(gzip_server: str) -> None:
    inst = parse_engine_ref(f"vllm@{gzip_server}")
    probe = EngineProbe(inst)
    try:
        got = await probe.metrics()
        assert got.ok and got.body == TEXT
        bomb = await probe.fetch("/bomb", max_bytes=MAX_METRICS_BYTES)
        assert not bomb.ok and bomb.status == 200
        assert bomb.reason() == "decoded response larger than 16 MiB"
        assert (await probe.metrics()).body == TEXT  # the refused body's connection is not reused
    finally:
        probe.close()


def test_error_bodies_shown_are_scrubbed() -> None:
    from console.telemetry.engine.scrape import Fetched

    body = b'{"error": {"message": "bad token hf_abcdefghijklmnopqrstuvwxyz12345678 (Bearer sk-abcdefghijklmnop)"}}'
    shown = Fetched(401, body).reason()
    assert shown.startswith("HTTP 401 bad token")
    assert "hf_abc" not in shown and "sk-abc" not in shown


# -- a body over the cap costs no memory once refused -------------------------------------------------

def test_a_refused_body_lets_go_of_what_it_held() -> None:
    """What arrived before the cap was crossed is dropped at the refusal, not when the exception (kept
    by a future, a connection in a reference cycle) is finally collected."""
    body = BoundedBody("", 1 << 20)
    body.feed(bytes(1 << 19))
    with pytest.raises(BodyTooLarge) as raised:
        body.feed(bytes(1 << 20))
    del body
    held = [o for f in _frames(raised.value) for o in f.f_locals.values() if isinstance(o, BoundedBody)]
    assert held and all(sum(map(len, b._out.parts)) == 0 for b in held)


def _frames(exc: BaseException) -> list[FrameType]:
    out: list[FrameType] = []
    tb = exc.__traceback__
    while tb is not None:
        out.append(tb.tb_frame)
        tb = tb.tb_next
    return out


@pytest.fixture
async def huge_server() -> AsyncIterator[str]:
    big = bytes(MAX_METRICS_BYTES + 1)

    async def declared(request: web.Request) -> web.Response:
        return web.Response(body=big)

    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            for i in range(0, len(big), 1 << 20):
                await resp.write(big[i:i + (1 << 20)])
        except (ConnectionError, RuntimeError):
            pass
        return resp

    app = web.Application()
    app.router.add_get("/declared", declared)
    app.router.add_get("/chunked", chunked)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_declared_length_over_the_cap_is_refused_before_its_body(huge_server: str) -> None:
    probe = EngineProbe(parse_engine_ref(f"vllm@{huge_server}"))
    try:
        got = await probe.fetch("/declared", max_bytes=MAX_METRICS_BYTES)
        assert not got.ok and got.status == 200
        assert got.reason() == f"response larger than 16 MiB (Content-Length {MAX_METRICS_BYTES + 1})"
        chunked = await probe.fetch("/chunked", max_bytes=MAX_METRICS_BYTES)  # no length: the running count
        assert not chunked.ok and chunked.reason() == "response larger than 16 MiB"
    finally:
        probe.close()
