"""The hub's host side: host CPU and memory, and the CPU and memory of each engine's processes.

One loop (``run``) reads the host (``usage.HostSource``) in a worker thread every refresh period,
with a deadline: a host read that hangs leaves the last reading stale, never the hub waiting. The
hub (``console/telemetry/hub.py``) schedules it and reads ``latest`` and ``proc_stats``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from console.model import HostSnapshot, went_stale

if TYPE_CHECKING:  # psutil loads with the loop that uses it
    from console.telemetry.host.usage import HostCollector

Pids = Callable[[], Mapping[str, tuple[int, ...]]]  # engine -> its current process ids (known ones only)
Pace = Callable[[], Awaitable[None]]  # wait one refresh period, or less when the hub is poked
ProcStats = dict[str, tuple[float | None, int | None]]  # engine -> (CPU %, RSS bytes)

HOST_TIMEOUT_S = 2.0  # one host read may take this long before the last one goes stale


class HostSide:
    """The host's latest reading and the engines' process stats."""

    def __init__(self, pids: Pids) -> None:
        """``pids()``: each engine whose process ids are known, with them (called in a worker thread)."""
        self._pids = pids
        self._lock = threading.Lock()
        self._host: HostSnapshot | None = None
        self._proc_stats: ProcStats = {}

    def latest(self) -> HostSnapshot | None:
        with self._lock:
            return self._host

    def proc_stats(self) -> ProcStats:
        with self._lock:
            return self._proc_stats

    async def run(self, pace: Pace) -> None:
        """Read the host every period, forever."""
        from console.telemetry.host.usage import HostSource

        source = HostSource()
        while True:
            try:
                host = await asyncio.wait_for(asyncio.to_thread(self.collect, source), timeout=HOST_TIMEOUT_S)
            except TimeoutError:
                prev = self.latest()
                if prev is None:
                    await pace()
                    continue
                host = replace(prev, freshness=went_stale(prev.freshness, time.time(), "host stats timed out"))
            with self._lock:
                self._host = host
            await pace()

    def collect(self, source: HostCollector) -> HostSnapshot:
        """Host stats, plus CPU and memory of every engine whose process ids are known."""
        host = source.collect()
        stats = source.process_stats_many(self._pids())
        with self._lock:
            self._proc_stats = {n: (st.cpu_percent, st.rss_bytes) for n, st in stats.items()}
        return host
