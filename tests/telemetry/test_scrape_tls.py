"""An https engine, scraped over the console's own HTTP client: a certificate the machine does not
trust is the engine's one-line reason, and a trusted one gives the payload (gzip decoded)."""

from __future__ import annotations

import gzip
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from console.config import parse_engine_ref
from console.telemetry.engine.scrape import EngineProbe

TEXT = b'vllm:num_requests_running{model_name="m"} 3.0\n'


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made by the openssl command."""
    key, crt = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
        check=True, capture_output=True,
    )
    return crt, key


@pytest.fixture
async def https_server(cert: tuple[Path, Path]) -> AsyncIterator[str]:
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(TEXT), headers={"Content-Encoding": "gzip"},
                            content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(*cert)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_an_untrusted_certificate_is_the_reason(https_server: str) -> None:
    probe = EngineProbe(parse_engine_ref(f"vllm@{https_server}"))
    try:
        got = await probe.metrics()
    finally:
        probe.close()
    assert got.status is None
    assert got.reason().startswith("TLS: ") and "self-signed" in got.reason(), got.reason()


async def test_a_trusted_certificate_gives_the_payload(https_server: str, cert: tuple[Path, Path]) -> None:
    trusted = ssl.create_default_context(cafile=str(cert[0]))
    probe = EngineProbe(parse_engine_ref(f"vllm@{https_server}"), tls=trusted)
    try:
        first, again = await probe.metrics(), await probe.metrics()
        connections = len(probe.client._all)
    finally:
        probe.close()
    assert first.ok and first.body == TEXT and again.body == TEXT
    assert connections == 1  # the second scrape reused the TLS connection
