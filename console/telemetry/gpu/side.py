"""The hub's GPU side: one source of GPU readings (NVML, simulated, or none) and what engines hold.

It owns the source kind, the configured GPU assignment, the NVML poller (polled in its own loop,
``run``) or the simulated GPUs (stepped as each snapshot is assembled, ``fleet_for``), attribution
of GPU processes to engines, and the latest ``GpuFleet``. The hub (``console/telemetry/hub.py``)
schedules it and reads it; the GPU modules load only with their source.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from console.model import NOT_COLLECTED, EngineSnapshot, Freshness, GpuFleet, SourceState

if TYPE_CHECKING:  # imported where used: the GPU side loads only with its source
    from console.telemetry.gpu.nvml import NvmlPoller
    from console.telemetry.gpu.simgpu import SimulatedGpus

GpuSourceKind = Literal["nvml", "simulated", "none"]
Engines = Callable[[], Mapping[str, EngineSnapshot]]  # the engines now, with their current process ids
Pace = Callable[[], Awaitable[None]]  # wait one refresh period, or less when the hub is poked

FIRST_SAMPLE_WAIT_S = 0.5  # how long the first snapshot waits for NVML's first reading
NO_DRIVER_RETRY_S = 30.0  # no driver: nothing will change soon


def _initial(kind: GpuSourceKind) -> GpuFleet:
    if kind == "none":
        return GpuFleet(source="none", unavailable_reason="GPU monitoring disabled",
                        freshness=Freshness(SourceState.UNAVAILABLE, reason="GPU monitoring disabled"))
    return GpuFleet(source="simulated" if kind == "simulated" else "nvml", freshness=NOT_COLLECTED)


class GpuSide:
    """The GPUs of a hub: their latest readings and which engine holds which."""

    def __init__(self, kind: GpuSourceKind, assignment: Mapping[str, tuple[int, ...]], *, engines: Engines,
                 simulated_count: int = 8) -> None:
        """``assignment``: engine -> GPU indices pinned by configuration (they win over attribution).
        ``engines()``: the hub's engines with their current process ids (for attribution and the
        simulated load); called from the hub's loop thread."""
        self.kind: GpuSourceKind = kind
        self.assignment: dict[str, tuple[int, ...]] = dict(assignment)
        self._engines = engines
        self._simulated_count = simulated_count
        self._lock = threading.Lock()
        self._fleet = _initial(kind)
        # Set by the first NVML reading; made afresh by each run of the hub's loop (``reset``).
        self._first = asyncio.Event()
        self._poller: NvmlPoller | None = None
        self._simulated: SimulatedGpus | None = None

    @property
    def polled(self) -> bool:
        """Whether this side has a loop of its own (NVML); the simulated GPUs step as snapshots go out."""
        return self.kind == "nvml"

    def latest(self) -> GpuFleet:
        with self._lock:
            return self._fleet

    def reset(self) -> None:
        """Before each run of the hub's loop: the first-sample event belongs to that loop."""
        self._first = asyncio.Event()

    async def wait_first(self) -> None:
        """Let the first snapshot wait briefly for NVML's first reading (no wait for other sources)."""
        if self.polled:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._first.wait(), timeout=FIRST_SAMPLE_WAIT_S)

    async def run(self, pace: Pace) -> None:
        """Poll NVML forever (only for the NVML source)."""
        from console.telemetry.gpu.nvml import NvmlPoller

        poller = NvmlPoller()
        self._poller = poller
        while True:
            # apoll() waits at most its own deadline; a hung NVML call leaves the last data stale.
            fleet = self.attribute(await poller.apoll())
            with self._lock:
                self._fleet = fleet
            self._first.set()
            if fleet.unavailable_reason:
                await asyncio.sleep(NO_DRIVER_RETRY_S)
            else:
                await pace()

    def attribute(self, fleet: GpuFleet) -> GpuFleet:
        """``fleet`` with each GPU process's engine (``attribution``)."""
        from console.telemetry.gpu.attribution import attribute_fleet

        return attribute_fleet(fleet, self._engines())

    def fleet_for(self, engines: Sequence[EngineSnapshot]) -> GpuFleet:
        """The fleet for a snapshot of ``engines`` about to go out: the simulated GPUs step under
        their load; a polled or absent source gives its latest reading."""
        if self.kind != "simulated":
            return self.latest()
        from console.telemetry.gpu.simgpu import SimulatedGpus

        sim = self._simulated
        if sim is None:
            sim = self._simulated = SimulatedGpus(self._simulated_count, self.assignment)
        fleet = sim.step(time.time(), engines)
        with self._lock:
            self._fleet = fleet
        return fleet

    def holdings(self, fleet: GpuFleet) -> dict[str, tuple[int, ...]]:
        """Engine -> the GPUs it holds: the configured assignment, else what attribution found (or
        the simulated placement)."""
        from console.telemetry.gpu.attribution import engine_gpus

        held = engine_gpus(fleet)
        sim = self._simulated
        if sim is not None:
            for name, placement in sim.placements.items():
                held.setdefault(name, tuple(placement.gpus))
        held.update((name, gpus) for name, gpus in self.assignment.items() if gpus)
        return held

    def close(self) -> None:
        poller = self._poller
        if poller is not None:
            with contextlib.suppress(Exception):
                poller.close()
