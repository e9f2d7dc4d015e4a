"""Freshness is the age of an engine's last good sample against its own period, and a refresh
change wakes every collector at once (issue 10: rows stayed frozen under "metrics fresh")."""

from __future__ import annotations

import time

from console.config import parse_engine_ref
from console.model import EngineSnapshot, Freshness, SourceState
from console.telemetry.engine.collector import late_after, mark_late
from console.telemetry.hub import Hub
from tests.client.simproc import SimProc

NOW = 1_700_000_000.0


def _snap(updated_at: float | None, state: SourceState = SourceState.OK) -> EngineSnapshot:
    return EngineSnapshot(name="e", profile="vllm", url="http://127.0.0.1:1", taken_at=NOW,
                          metrics_freshness=Freshness(state, updated_at=updated_at))


def test_a_sample_older_than_its_period_allows_is_stale() -> None:
    assert not mark_late(_snap(NOW - 2), NOW, period=1.0).metrics_freshness.stale
    late = mark_late(_snap(NOW - 25), NOW, period=1.0).metrics_freshness
    assert late.stale and late.updated_at == NOW - 25 and late.stale_since == NOW - 25
    assert "no new sample" in late.reason and "every 1 s" in late.reason
    # The same age is fresh for an engine collected every 30 s: its own period is the measure.
    assert not mark_late(_snap(NOW - 25), NOW, period=30.0).metrics_freshness.stale
    assert late_after(0.5) < late_after(1.0) < late_after(30.0) < 65
    # Already stale (with its own reason) or never collected: left as it is.
    stale = _snap(NOW - 25, SourceState.STALE)
    assert mark_late(stale, NOW, 1.0) is stale
    assert mark_late(_snap(None), NOW, 1.0).metrics_freshness.updated_at is None


def test_refresh_change_wakes_every_engine_loop() -> None:
    sims = [SimProc("vllm"), SimProc("sglang")]
    hub = Hub([parse_engine_ref(s.ref) for s in sims], refresh=0.5, gpu_source="none")
    try:
        for s in sims:
            s.wait_ready()
        hub.start()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(
            not e.metrics_freshness.stale for e in hub.latest().engines
        ):
            time.sleep(0.1)
        assert all(not e.metrics_freshness.stale for e in hub.latest().engines)
        hub.set_refresh(30.0)  # every loop collects once more, then sleeps 30 s
        time.sleep(1.5)
        back = time.time()
        hub.set_refresh(0.5)  # must not wait out the 30 s sleeps
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            engines = hub.latest().engines
            if all((e.metrics_freshness.updated_at or 0) > back for e in engines):
                break
            time.sleep(0.1)
        for e in hub.latest().engines:
            assert (e.metrics_freshness.updated_at or 0) > back, e.name
            assert not e.metrics_freshness.stale, e.metrics_freshness
    finally:
        hub.stop()
        for s in sims:
            s.stop()


def test_an_unanswered_collection_marks_the_numbers_stale_before_its_timeout() -> None:
    from console.telemetry.engine.collector import answer_allowance, mark_unanswered

    fresh = _snap(NOW - 0.5)
    assert mark_unanswered(fresh, NOW, None, 1.0) is fresh  # nothing asked
    assert mark_unanswered(fresh, NOW, NOW - 1.0, 1.0) is fresh  # asked a second ago: a scrape may take that
    waiting = mark_unanswered(fresh, NOW, NOW - 2.0, 1.0).metrics_freshness
    assert waiting.stale and waiting.stale_since == NOW - 2.0 and waiting.updated_at == NOW - 0.5
    assert "no answer within 1.5 s" in waiting.reason
    assert answer_allowance(30.0) == 30.0  # a slow period gives its collection as long


def test_a_hang_is_marked_while_the_collection_still_waits() -> None:
    """The engine answers, then hangs: its numbers go stale while the scrape is still waiting (before
    the probe's own timeout fails it), not seconds after."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hang = threading.Event()
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hang.is_set():
                release.wait(30)
                return
            body = (b'{"object":"list","data":[{"id":"m","object":"model"}]}' if self.path.startswith("/v1/models")
                    else b'vllm:num_requests_running{model_name="m"} 1\n')
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hub = Hub([parse_engine_ref(f"vllm@http://127.0.0.1:{server.server_address[1]}")], refresh=1.0,
              gpu_source="none")
    try:
        hub.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and hub.latest().engines[0].metrics_freshness.stale:
            time.sleep(0.1)
        assert not hub.latest().engines[0].metrics_freshness.stale
        hang.set()
        reasons: set[str] = set()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("still waiting" in r for r in reasons):
            f = hub.latest().engines[0].metrics_freshness
            if f.stale:
                reasons.add(f.reason)
            time.sleep(0.05)
        assert any("still waiting" in r for r in reasons), reasons
    finally:
        release.set()
        hub.stop()
        server.shutdown()
        server.server_close()
