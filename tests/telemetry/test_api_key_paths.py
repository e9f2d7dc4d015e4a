"""Where the API key goes: only to paths the profile says are guarded, never across a redirect to
another host; `inspect-metrics` names the URL that answered. Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from console.cli import main
from console.config import parse_engine_ref
from console.telemetry.engine.scrape import EngineProbe
from tests.telemetry import synth

KEY = "sk-route-test-key-0123456789abcdef"
METRICS = synth.simple("vllm:num_requests_running", "gauge", [({"model_name": "m", "engine": "0"}, 2.0)])


class _Recorder(ThreadingHTTPServer):
    """Answers like a vLLM engine and records every request's path and Authorization header."""

    def __init__(self, redirect_to: str = "") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, str | None]] = []
        self.redirect_to = redirect_to

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


class _Handler(BaseHTTPRequestHandler):
    server: _Recorder

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))
        if self.server.redirect_to:
            self.send_response(302)
            self.send_header("Location", self.server.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/metrics":
            self._send(METRICS, "text/plain; version=0.0.4")
        elif self.path == "/v1/models":
            self._send(json.dumps({"object": "list", "data": [{"id": "m", "max_model_len": 4096}]}))
        elif self.path == "/version":
            self._send(json.dumps({"version": "0.11.0"}))
        else:
            self._send("")

    def _send(self, body: str, ctype: str = "application/json") -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[list[_Recorder]]:
    made: list[_Recorder] = []
    yield made
    for s in made:
        s.shutdown()
        s.server_close()


def _start(made: list[_Recorder], redirect_to: str = "") -> _Recorder:
    srv = _Recorder(redirect_to)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    made.append(srv)
    return srv


async def test_key_only_on_paths_the_profile_guards(serve: list[_Recorder], monkeypatch: pytest.MonkeyPatch) -> None:
    srv = _start(serve)
    monkeypatch.setenv("ROUTE_KEY", KEY)
    inst = parse_engine_ref(f"vllm@{srv.url}", api_key_env="ROUTE_KEY")
    probe = EngineProbe(inst)
    try:
        assert (await probe.metrics()).ok
        await probe.health()
        await probe.identity()
    finally:
        probe.close()
    sent = {path: auth for path, auth in srv.seen}
    # vLLM's key guards /v1 only: /metrics, /health and /version never see it.
    assert sent["/v1/models"] == f"Bearer {KEY}"
    assert sent["/metrics"] is None and sent["/health"] is None and sent["/version"] is None


def test_inspect_metrics_keeps_the_key_home_and_another_hosts_numbers_out(
    serve: list[_Recorder], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    other = _start(serve)  # another origin (another port)
    front = _start(serve, redirect_to=other.url)
    monkeypatch.setenv("ROUTE_KEY", KEY)
    rc = main(["inspect-metrics", "--engine", "vllm", front.url, "--api-key-env", "ROUTE_KEY", "--json"])
    out, err = capsys.readouterr()
    # A redirect to another host is not followed (its numbers are not this engine's): one line, exit 1.
    assert rc == 1 and out == "", out
    assert "redirects to another host" in err and other.url in err and KEY not in err, err
    assert front.seen == [("/metrics", f"Bearer {KEY}")]
    assert other.seen == []  # neither the key nor a request went there
