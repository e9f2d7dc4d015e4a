"""Energy by integrating power at 10 Hz, for GPUs without NVML's total-energy counter (pre-Volta).

One daemon thread samples ``nvmlDeviceGetPowerUsage`` of the registered devices every 0.1 s and
integrates it with the trapezoidal rule; ``energy_mj(index)`` reads the running total. It never
runs on the UI loop or the NVML poll: a call that hangs stalls only this thread, and a total
whose last sample is older than ``stale_s`` reads None (n/a) instead of a figure that stopped.
A failed sample breaks the trapezoid: the next good one starts again from there, so a gap adds
nothing rather than a guess. The result is flagged ``energy_source = "integrated"``: sampled
power covers only part of the runtime on A100/H100 (SC24), so it is less exact than the counter.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PowerIntegrator"]


@dataclass(slots=True)
class _Track:
    handle: Any
    total_mj: float = 0.0
    last_t: float | None = None
    last_mw: float | None = None
    samples: int = 0


class PowerIntegrator:
    """Integrates the power of registered devices in its own thread (started on first ``add``)."""

    def __init__(
        self,
        nvml: Any,
        *,
        period_s: float = 0.1,
        stale_s: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        threaded: bool = True,
    ) -> None:
        """``threaded=False``: no thread; the caller calls ``sample_once`` (tests)."""
        self._nvml = nvml
        self._threaded = threaded
        self.period_s = period_s
        self.stale_s = stale_s
        self._monotonic = monotonic
        self._tracks: dict[int, _Track] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, index: int, handle: Any) -> None:
        """Integrate device ``index`` from now on (again with a new handle, e.g. after re-init)."""
        with self._lock:
            track = self._tracks.get(index)
            if track is None:
                self._tracks[index] = _Track(handle)
            else:
                track.handle = handle
        if self._threaded and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="enginedeck-power", daemon=True)
            self._thread.start()

    def tracking(self, index: int) -> bool:
        with self._lock:
            return index in self._tracks

    def energy_mj(self, index: int) -> float | None:
        """Integrated energy since ``add`` (mJ), or None before two samples or when sampling stalled."""
        with self._lock:
            track = self._tracks.get(index)
            if track is None or track.samples < 2 or track.last_t is None:
                return None
            if self._monotonic() - track.last_t > self.stale_s:
                return None
            return track.total_mj

    def sample_once(self) -> None:
        """One sample of every device (the thread's step; tests call it directly)."""
        with self._lock:
            tracks = list(self._tracks.values())
        for track in tracks:
            try:
                mw = float(self._nvml.nvmlDeviceGetPowerUsage(track.handle))
            except Exception:  # a failed read breaks the trapezoid; the next good one restarts it
                with self._lock:
                    track.last_mw = None
                continue
            now = self._monotonic()
            with self._lock:
                if track.last_mw is not None and track.last_t is not None and now > track.last_t:
                    track.total_mj += (now - track.last_t) * (track.last_mw + mw) / 2.0
                track.last_t, track.last_mw = now, mw
                track.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.period_s - (self._monotonic() - started)))

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=1.0)  # a hung NVML call is left behind (daemon thread)
        self._thread = None
