"""Has a stopped engine released its GPUs? Asks NVML which processes hold GPU memory.

Uses the telemetry layer's ``NvmlPoller`` (console.telemetry.gpu.nvml): NVML runs in its own thread
with a deadline, so a hung driver cannot freeze a stop. When NVML cannot answer here (no
driver, no library, timed out) the caller gets the reason and says so in the instance state,
instead of pretending the memory was freed.
"""

from __future__ import annotations

import threading
from typing import Any

from console.model import SourceState


class NvmlUnavailable(Exception):
    """NVML cannot answer here (no driver, no library, timed out); ``str()`` says why."""


_poller: Any = None
_lock = threading.Lock()


def _get_poller() -> Any:
    global _poller
    with _lock:
        if _poller is None:
            from console.telemetry.gpu.nvml import NvmlPoller

            _poller = NvmlPoller()
        return _poller


def gpu_pids() -> set[int]:
    """Host PIDs that hold GPU memory now. Raises NvmlUnavailable with a one-line reason."""
    fleet = _get_poller().poll()
    state = fleet.freshness.state
    if state is SourceState.UNAVAILABLE:
        raise NvmlUnavailable(fleet.unavailable_reason or fleet.freshness.reason or "NVML unavailable")
    if state is SourceState.STALE:
        raise NvmlUnavailable(fleet.freshness.reason or "NVML did not answer")
    return {p.pid for g in fleet.gpus for p in g.processes}
