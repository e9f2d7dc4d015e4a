"""The hub against a real simulator process: per-engine process stats, pause, refresh changes."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
import urllib.request

from console.config import parse_engine_ref
from console.model import FleetSnapshot
from console.sim.fleet import free_port
from console.telemetry.hub import Hub


def _wait(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("simulator did not start")


def test_hub_process_stats_pause_and_refresh() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "console", "sim", "--engine", "sglang", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    inst = dataclasses.replace(parse_engine_ref(f"sglang@{url}"), pids=(proc.pid,))
    hub = Hub([inst], refresh=0.3, gpu_source="none")
    got: list[FleetSnapshot] = []
    try:
        _wait(url)
        unsubscribe = hub.subscribe(got.append)
        hub.start()
        time.sleep(2.5)
        e = hub.latest().engines[0]
        assert e.reachable and e.identity.models
        assert e.rss_bytes is not None and e.rss_bytes > 10 * 2**20
        assert e.cpu_percent is not None and e.cpu_percent >= 0
        assert e.total is not None and e.total.running is not None
        assert len(got) >= 4
        assert hub.history.values((e.name, "running"))
        hub.set_paused(True)
        time.sleep(0.4)
        n = len(got)
        time.sleep(1.0)
        assert len(got) == n  # nothing published while paused
        hub.set_paused(False)
        hub.set_refresh(1.0)
        time.sleep(0.3)
        assert len(got) > n and hub.refresh == 1.0
        unsubscribe()
    finally:
        hub.stop()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_lifecycle_phase_wins_while_starting_and_after_exit() -> None:
    from console.model import Phase

    port = free_port()  # nothing listens: HTTP alone can only say "refused"
    known: dict[str, tuple[Phase, str]] = {}
    inst = parse_engine_ref(f"vllm@http://127.0.0.1:{port}")
    hub = Hub([inst], refresh=0.2, gpu_source="none", lifecycle_phase=lambda name: known.get(name))
    try:
        hub.start()
        time.sleep(0.6)
        assert hub.latest().engines[0].phase is Phase.UNREACHABLE
        known[inst.name] = (Phase.LOADING, "Loading safetensors checkpoint shards: 40%")
        time.sleep(0.6)
        e = hub.latest().engines[0]
        assert e.phase is Phase.LOADING and "40%" in e.health_detail
        known[inst.name] = (Phase.EXITED, "exit code 137 (OOMKilled)")
        time.sleep(0.6)
        e = hub.latest().engines[0]
        assert e.phase is Phase.EXITED and "OOMKilled" in e.health_detail
    finally:
        hub.stop()
