"""The hub's per-engine loop cannot be killed: whatever goes wrong in one engine's round becomes
that engine's stale reason (and a log record), the loop goes on, and other engines are untouched."""

from __future__ import annotations

import logging
import time

import pytest

from console.config import EngineInstance, InstanceConfig, parse_engine_ref
from console.ports import free_port
from console.profiles import get_profile
from console.telemetry.hub import Hub


def _unvalidated(url: str) -> EngineInstance:
    """An instance whose URL never went through config validation (as code that builds one could)."""
    ic = InstanceConfig(profile="vllm", url=url)  # no field checks: only those across fields
    return EngineInstance(name="broken", profile=get_profile("vllm"), url=url, config=ic)


def test_an_exception_in_one_round_is_the_engines_reason_and_the_loop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = _unvalidated("http://127.0.0.1:80000")  # the HTTP client raises on this URL
    other = parse_engine_ref(f"vllm@http://127.0.0.1:{free_port()}")  # nothing listens: refused
    hub = Hub([broken, other], refresh=0.1, gpu_source="none")
    caplog.set_level(logging.WARNING, logger="console.telemetry.hub")
    try:
        hub.start()
        deadline = time.monotonic() + 10
        stamps: set[float] = set()
        while time.monotonic() < deadline and len(stamps) < 4:
            e = hub.latest().engines[0]
            if "collection failed" in e.metrics_freshness.reason:
                stamps.add(e.taken_at)
            time.sleep(0.05)
        e, o = hub.latest().engines
        assert len(stamps) >= 4, f"the broken engine's loop stopped: {e.metrics_freshness}"
        assert e.metrics_freshness.stale and "collection failed" in e.metrics_freshness.reason
        assert "port" in e.metrics_freshness.reason.lower()
        assert o.metrics_freshness.stale and "connection refused" in o.health_detail  # its own reason
    finally:
        hub.stop()
    records = [r for r in caplog.records if "collection failed" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is not None  # logged once with its traceback
