"""The hub against a real simulator process: per-engine process stats, pause, refresh changes.

No fixed sleeps with timing thresholds: each step waits (with a generous deadline) for the
snapshot that shows what it expects. The only time bounds asserted are lower bounds (a period
between publications), which a slow, loaded host can only lengthen.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable

from console.config import parse_engine_ref
from console.model import FleetSnapshot, Phase
from console.ports import free_port
from console.telemetry.hub import Hub
from tests import procgroup

DEADLINE = 20.0  # seconds a step may take on a slow, shared host before the test gives up


class Published:
    """A hub listener that keeps every snapshot and lets a test wait for one that matters."""

    def __init__(self) -> None:
        self.snaps: list[FleetSnapshot] = []
        self._cond = threading.Condition()

    def __call__(self, snap: FleetSnapshot) -> None:
        with self._cond:
            self.snaps.append(snap)
            self._cond.notify_all()

    def __len__(self) -> int:
        with self._cond:
            return len(self.snaps)

    def until(self, ok: Callable[[FleetSnapshot], bool], what: str, timeout: float = DEADLINE) -> FleetSnapshot:
        """The first snapshot from now on (or the newest one) for which ``ok`` holds."""
        with self._cond:
            seen = max(0, len(self.snaps) - 1)

            def found() -> bool:
                nonlocal seen
                while seen < len(self.snaps):
                    if ok(self.snaps[seen]):
                        return True
                    seen += 1
                return False

            assert self._cond.wait_for(found, timeout), f"{what}: not seen within {timeout:g} s"
            return self.snaps[seen]

    def count_reaches(self, n: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.snaps) >= n, timeout)


def _wait(url: str) -> None:
    deadline = time.monotonic() + DEADLINE
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
    proc = procgroup.popen([sys.executable, "-m", "console", "sim", "--engine", "sglang", "--port", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    inst = dataclasses.replace(parse_engine_ref(f"sglang@{url}"), pids=(proc.pid,))
    period = 0.3
    hub = Hub([inst], refresh=period, gpu_source="none")
    pub = Published()
    try:
        _wait(url)
        unsubscribe = hub.subscribe(pub)
        hub.start()
        # Process CPU needs two readings: wait for the snapshot that has everything.
        snap = pub.until(
            lambda s: s.engines[0].reachable and s.engines[0].cpu_percent is not None
            and s.engines[0].total is not None and s.engines[0].total.running is not None,
            "a reachable engine with process stats and metrics",
        )  # fmt: skip
        e = snap.engines[0]
        assert e.identity.models == ("Qwen/Qwen3-0.6B",)
        assert e.rss_bytes is not None and e.rss_bytes > 10 * 2**20  # a Python process serving HTTP
        assert e.cpu_percent is not None and e.cpu_percent >= 0
        assert pub.count_reaches(4, DEADLINE), len(pub)
        assert hub.history.values((e.name, "running"))
        # Paused: at most the one publication already under way when the flag was set, then none,
        # however long we look (5 periods here; a slower host can only publish less).
        hub.set_paused(True)
        assert hub.paused
        n = len(pub)
        assert not pub.count_reaches(n + 2, 5 * period), f"{len(pub) - n} snapshots published while paused"
        # Resumed at a 1 s period: publications come back, spaced by the new period.
        n = len(pub)
        hub.set_paused(False)
        hub.set_refresh(1.0)
        assert hub.refresh == 1.0 and not hub.paused
        assert pub.count_reaches(n + 5, DEADLINE), f"only {len(pub) - n} snapshots after resuming"
        # The first three may come early (the wake-up of the resume, a 0.3 s nap, the wake-up of the
        # refresh change); every nap after them is the new period.
        gaps = [b.taken_at - a.taken_at for a, b in itertools.pairwise(pub.snaps[n + 2 : n + 5])]
        assert len(gaps) == 2 and min(gaps) >= 0.9, gaps
        # Unsubscribed: told nothing while another listener sees two more snapshots.
        unsubscribe()
        other = Published()
        hub.subscribe(other)
        assert other.count_reaches(1, DEADLINE)  # publications run one after another: none is under way
        n = len(pub)
        assert other.count_reaches(3, DEADLINE)
        assert len(pub) == n
    finally:
        hub.stop()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_lifecycle_phase_wins_while_starting_and_after_exit() -> None:
    port = free_port()  # nothing listens: HTTP alone can only say "refused"
    known: dict[str, tuple[Phase, str]] = {}
    inst = parse_engine_ref(f"vllm@http://127.0.0.1:{port}")
    hub = Hub([inst], refresh=0.2, gpu_source="none", lifecycle_phase=lambda name: known.get(name))
    pub = Published()
    hub.subscribe(pub)
    try:
        hub.start()
        pub.until(lambda s: s.engines[0].phase is Phase.UNREACHABLE, "unreachable without a lifecycle phase")
        known[inst.name] = (Phase.LOADING, "Loading safetensors checkpoint shards: 40%")
        e = pub.until(lambda s: s.engines[0].phase is Phase.LOADING, "the lifecycle's LOADING").engines[0]
        assert "40%" in e.health_detail
        known[inst.name] = (Phase.EXITED, "exit code 137 (OOMKilled)")
        e = pub.until(lambda s: s.engines[0].phase is Phase.EXITED, "the lifecycle's EXITED").engines[0]
        assert "OOMKilled" in e.health_detail
    finally:
        hub.stop()
