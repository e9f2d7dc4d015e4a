"""The readiness probe against real sockets on 127.0.0.1: it fetches through the transport's client
and reads bodies as the scraper does, and tells "refused" from the failure's kind."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from console.lifecycle.phases import ProbeResult
from console.lifecycle.probe import ReadyProbe, classify, probe_ready
from console.ports import free_port
from console.telemetry.engine.scrape import Failure, Fetched

Handler = Callable[[socket.socket], None]


@contextmanager
def _server(handle: Handler) -> Iterator[str]:
    """A listening socket whose every connection ``handle`` serves, on a thread."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.05)  # closing a socket does not wake a blocked accept(): poll for the stop
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            with conn:
                handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        listener.close()


def _answer(status: str, body: bytes, seen: list[bytes] | None = None) -> Handler:
    def handle(conn: socket.socket) -> None:
        while True:
            request = conn.recv(65536)
            if not request:
                return
            if seen is not None:
                seen.append(request)
            head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            conn.sendall(head.encode() + body)
    return handle


def _drop(conn: socket.socket) -> None:
    conn.recv(65536)  # docker-proxy: accepts, reads, closes without a byte of answer


def _silent(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.recv(65536)  # returns when the client gives up and closes


MODELS = json.dumps({"object": "list", "data": [{"id": "m-1"}, {"id": "m-2"}]}).encode()


def test_ready_counts_the_models_the_scraper_would_list() -> None:
    seen: list[bytes] = []
    with _server(_answer("200 OK", MODELS, seen)) as url:
        got = probe_ready(url, "/v1/models", "sk-secret", timeout=2.0)
    assert got == ProbeResult("http", 200, 2)
    assert got.ready
    assert b"GET /v1/models HTTP/1.1" in seen[0] and b"Authorization: Bearer sk-secret" in seen[0]


def test_an_error_body_gives_its_message() -> None:
    body = json.dumps({"error": {"message": "Model is loading", "type": "x"}}).encode()
    with _server(_answer("503 Service Unavailable", body)) as url:
        got = probe_ready(url, "/v1/models", timeout=2.0)
    assert got == ProbeResult("http", 503, detail="Model is loading")


def test_nothing_listening_is_refused() -> None:
    got = probe_ready(f"http://127.0.0.1:{free_port()}", "/v1/models", timeout=2.0)
    assert got == ProbeResult("refused")


def test_a_dropped_connection_counts_as_refused() -> None:
    with _server(_drop) as url:
        got = probe_ready(url, "/v1/models", timeout=2.0)
    assert got.kind == "refused" and "dropped" in got.detail


def test_no_answer_is_a_timeout() -> None:
    with _server(_silent) as url:
        got = probe_ready(url, "/v1/models", timeout=0.2)
    assert got.kind == "timeout"


def test_a_url_the_client_cannot_use_is_an_error_not_an_exception() -> None:
    assert probe_ready("ftp://127.0.0.1:1", "/v1/models", timeout=1.0).kind == "error"


def test_one_probe_keeps_its_connection_between_probes() -> None:
    seen: list[bytes] = []
    connections = 0

    def count(conn: socket.socket) -> None:
        nonlocal connections
        connections += 1
        _answer("200 OK", MODELS, seen)(conn)

    with _server(count) as url, ReadyProbe(url, "/v1/models", timeout=2.0) as probe:
        results = [probe.probe() for _ in range(3)]
    assert all(r.ready for r in results)
    assert len(seen) == 3 and connections == 1


def test_the_kind_decides_not_the_text() -> None:
    """An error text that merely mentions refusal is not a refusal; a refusal is one whatever its text."""
    assert classify(Fetched(None, error="connection refused", failure=Failure.CANNOT_CONNECT)).kind == "error"
    assert classify(Fetched(None, error="", failure=Failure.REFUSED)).kind == "refused"
