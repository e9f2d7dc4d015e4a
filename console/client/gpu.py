"""GPU utilisation and power over a benchmark level, from any ``collect() -> GpuFleet`` source.

The default source is NVML (``console.telemetry.nvml.NvmlSource``); a simulated fleet can be
passed instead. Sampling runs in a thread (NVML calls may block) once a second. Energy is the
trapezoidal integral of power over the samples; tokens per joule is computed by the aggregator
from this energy and the tokens that arrived in the same span. No samples -> "n/a" with a reason.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from console.model import GpuFleet

Collect = Callable[[], GpuFleet]


def default_collect() -> Collect | None:
    try:
        from console.telemetry.nvml import NvmlSource
    except ImportError:  # pragma: no cover - the telemetry layer is part of the package
        return None
    return NvmlSource(xid_events=False).collect


class GpuSampler:
    """Samples (t, util %, power W) of the selected GPUs (all when ``indices`` is empty)."""

    def __init__(self, collect: Collect, indices: Sequence[int] = ()) -> None:
        self._collect = collect
        self.collector: Collect = collect
        self.indices = tuple(indices)
        self.samples: list[tuple[float, float | None, float | None]] = []
        self.reason = ""
        self.source = ""
        self._busy = False

    def begin(self) -> None:
        self.samples = []

    async def sample(self) -> None:
        if self._busy:  # a hung driver must not pile up threads
            return
        self._busy = True
        try:
            fleet = await asyncio.to_thread(self._collect)
        finally:
            self._busy = False
        self._take(fleet)

    def _take(self, fleet: GpuFleet) -> None:
        self.source = fleet.source
        if not fleet.gpus:
            self.reason = fleet.unavailable_reason or fleet.freshness.reason or "no GPU"
            return
        gpus = [g for g in fleet.gpus if not self.indices or g.index in self.indices]
        utils = [g.util_percent for g in gpus if g.util_percent is not None]
        powers = [g.power_w for g in gpus if g.power_w is not None]
        self.samples.append(
            (time.monotonic(), sum(utils) / len(utils) if utils else None, math.fsum(powers) if powers else None)
        )

    def result(self) -> dict[str, Any]:
        utils = [u for _, u, _ in self.samples if u is not None]
        pts = [(t, p) for t, _, p in self.samples if p is not None]
        energy = None
        if len(pts) >= 2:
            energy = math.fsum((t2 - t1) * (p1 + p2) / 2 for (t1, p1), (t2, p2) in itertools.pairwise(pts))
        return {
            "available": bool(self.samples),
            "source": self.source or None,
            "reason": "" if self.samples else (self.reason or "no samples"),
            "gpus": list(self.indices) or "all",
            "samples": len(self.samples),
            "util_mean_percent": sum(utils) / len(utils) if utils else None,
            "util_max_percent": max(utils) if utils else None,
            "power_mean_w": math.fsum(p for _, p in pts) / len(pts) if pts else None,
            "power_max_w": max(p for _, p in pts) if pts else None,
            "energy_j": energy,
            "energy_span_s": (pts[-1][0] - pts[0][0]) if len(pts) >= 2 else None,
        }


class SimulatedGpuCollect:
    """A ``collect`` for simulated engines: the telemetry layer's simulated GPU, driven by the
    engine's own scraped load (running, KV usage, generation rate) during the level."""

    def __init__(self, engine_name: str, profile: str, url: str) -> None:
        from console.telemetry.simgpu import SimulatedGpus

        self._gpus = SimulatedGpus(gpu_count=1)
        self._name, self._profile, self._url = engine_name, profile, url
        self._running: float | None = None
        self._kv: float | None = None
        self._gen_tps: float | None = None
        self._last_gen: tuple[float, float] | None = None

    def feed(self, running: float | None, kv_usage: float | None, generation_tokens: float | None) -> None:
        now = time.monotonic()
        self._running, self._kv = running, kv_usage
        if generation_tokens is not None:
            if self._last_gen is not None and now > self._last_gen[0]:
                self._gen_tps = max(0.0, (generation_tokens - self._last_gen[1]) / (now - self._last_gen[0]))
            self._last_gen = (now, generation_tokens)

    def __call__(self) -> GpuFleet:
        from console.model import EngineSnapshot, ModelMetrics, Phase, Rates

        total = ModelMetrics(
            model="", running=self._running, kv_usage=self._kv, generation_tps=Rates(r5s=self._gen_tps)
        )
        snap = EngineSnapshot(
            name=self._name, profile=self._profile, url=self._url, taken_at=time.time(), phase=Phase.READY,
            reachable=True, total=total, simulated=True, pids=(0,),
        )  # fmt: skip
        return self._gpus.step(time.time(), [snap])
