"""Fake engines on 127.0.0.1 for the invalid-metrics and not-an-engine groups (8 and 9).

``FakeEngine`` answers each path with what a route gives: a status, a content type, a body and
extra headers. ``/metrics`` (any path ending in ``metrics``) serves its payloads in turn, the last
one again and again, so that a test can give a valid first scrape and a hostile second one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODELS_JSON = b'{"object":"list","data":[{"id":"m","object":"model","max_model_len":4096}]}'


@dataclass
class Answer:
    status: int = 200
    content_type: str = "application/json"
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[], Answer]


def fixed(status: int = 200, content_type: str = "application/json", body: bytes = b"",
          headers: dict[str, str] | None = None) -> Route:
    answer = Answer(status, content_type, body, headers or {})
    return lambda: answer


HEALTHY = fixed(200, "text/plain", b"")
MODELS = fixed(200, "application/json", MODELS_JSON)


class FakeEngine:
    """The routes by exact path, a default for every other path, and the metrics payloads."""

    def __init__(self, routes: dict[str, Route] | None = None, default: Route | None = None,
                 payloads: list[str] | None = None) -> None:
        self.routes = {"/health": HEALTHY, "/v1/models": MODELS, **(routes or {})}
        self.default = default or fixed(404, "text/plain", b"not found")
        self.payloads = payloads or []
        self.scrapes = 0
        self._lock = threading.Lock()

    def answer(self, path: str) -> Answer:
        path = path.split("?", 1)[0]
        if path in self.routes:
            return self.routes[path]()
        if path.endswith("metrics") and self.payloads:
            with self._lock:
                text = self.payloads[min(self.scrapes, len(self.payloads) - 1)]
                self.scrapes += 1
            return Answer(200, "text/plain; version=0.0.4", text.encode())
        return self.default()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        a = self.server.engine.answer(self.path)
        self.send_response(a.status)
        if a.content_type:
            self.send_header("Content-Type", a.content_type)
        for k, v in a.headers.items():
            self.send_header(k, v)
        if a.status not in (204, 304):
            self.send_header("Content-Length", str(len(a.body)))
        self.end_headers()
        if a.status not in (204, 304):
            self.wfile.write(a.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    engine: FakeEngine


@contextlib.contextmanager
def serve(engine: FakeEngine) -> Iterator[str]:
    """``engine`` on a free port of 127.0.0.1; yields its base URL."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.engine = engine
    # A short poll: shutdown() waits for it, and every test starts and stops a server or two.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
