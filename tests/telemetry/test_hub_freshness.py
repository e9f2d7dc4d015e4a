"""Freshness is the age of an engine's last good sample against its own period, and a refresh
change wakes every collector at once (issue 10: rows stayed frozen under "metrics fresh")."""

from __future__ import annotations

import time

from console.config import parse_engine_ref
from console.model import EngineSnapshot, Freshness, SourceState
from console.telemetry.collector import late_after, mark_late
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
