"""GPU utilisation, power and energy over a benchmark level, from any ``collect() -> GpuFleet`` source.

The default source is NVML (``console.telemetry.gpu.nvml.NvmlSource``); a simulated fleet can be
passed instead. Sampling runs in a thread (NVML calls may block) once a second. Energy comes from
the GPUs' cumulative energy (``GpuSnapshot.energy_mj``: NVML's total-energy counter, else power
integrated at 10 Hz, or the simulated counter), summed over the selected GPUs and made reset-safe
(a drop counts that interval as sampled power times its length). ``energy_series`` gives it per
sample on the request clock (``perf_counter_ns``), so the aggregator takes exactly the steady-state
window (ramp-up and drain excluded, as ML.ENERGY does) and divides the tokens of that window by it.
Without an energy figure, ``energy_j`` is the trapezoidal integral of sampled power (flagged
``energy_source = "power"``). No samples -> "n/a" with a reason.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import Any

from console.model import GpuFleet

Collect = Callable[[], GpuFleet]


def default_collect() -> Collect | None:
    try:
        from console.telemetry.gpu.nvml import NvmlSource
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
        # (perf_counter_ns, cumulative joules since begin) where every selected GPU has an energy figure.
        self.energy: list[tuple[int, float]] = []
        self._last_mj: dict[int, float] = {}
        self._last_at: int | None = None
        self._joules = 0.0
        self.energy_sources: set[str] = set()
        self.reason = ""
        self.source = ""
        self._busy = False

    def begin(self) -> None:
        self.samples = []
        self.energy = []
        self._last_mj = {}
        self._last_at = None
        self._joules = 0.0
        self.energy_sources = set()

    async def sample(self) -> None:
        if self._busy:  # a hung driver must not pile up threads
            return
        self._busy = True
        try:
            fleet = await asyncio.to_thread(self._collect)
        finally:
            self._busy = False
        self.take(fleet)

    def take(self, fleet: GpuFleet) -> None:
        """One sample from a fleet (what ``sample`` does with the collected one)."""
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
        self._take_energy(gpus)

    def _take_energy(self, gpus: Sequence[Any]) -> None:
        now = time.perf_counter_ns()
        if not gpus or any(g.energy_mj is None for g in gpus):
            return
        dt = 0.0 if self._last_at is None else (now - self._last_at) / 1e9
        for g in gpus:
            last = self._last_mj.get(g.index)
            if last is not None:
                d = (g.energy_mj - last) / 1000.0
                self._joules += d if d >= 0 else (g.power_w or 0.0) * dt  # a reset: no negative, no spike
            self._last_mj[g.index] = g.energy_mj
            self.energy_sources.add(g.energy_source or "counter")
        self._last_at = now
        self.energy.append((now, self._joules))

    def energy_between(self, t0_ns: int, t1_ns: int) -> float | None:
        """Joules between two request-clock instants, interpolated between samples; None when the
        samples do not cover the span."""
        return energy_between(self.energy, t0_ns, t1_ns)

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
            "energy_j": self.energy[-1][1] - self.energy[0][1] if len(self.energy) >= 2 else energy,
            "energy_span_s": (pts[-1][0] - pts[0][0]) if len(pts) >= 2 else None,
            "energy_source": ("+".join(sorted(self.energy_sources)) if len(self.energy) >= 2
                              else "power" if energy is not None else None),
            "energy_series": [[t, j] for t, j in self.energy],  # for the steady window; dropped from reports
        }


def energy_between(series: Sequence[Sequence[float]], t0_ns: float, t1_ns: float) -> float | None:
    """Cumulative-energy ``series`` ([t_ns, J] ascending) interpolated at both ends; None unless the
    samples reach from ``t0_ns`` to ``t1_ns`` (or within one sample period of them)."""
    if len(series) < 2 or t1_ns <= t0_ns:
        return None
    ts = [float(p[0]) for p in series]
    period = (ts[-1] - ts[0]) / (len(ts) - 1)
    if ts[0] > t0_ns + period or ts[-1] < t1_ns - period:
        return None

    def at(t: float) -> float:
        i = min(max(1, bisect_left(ts, t)), len(ts) - 1)
        (ta, ja), (tb, jb) = series[i - 1], series[i]
        frac = 0.0 if tb == ta else (t - ta) / (tb - ta)
        return float(ja) + (float(jb) - float(ja)) * min(1.0, max(0.0, frac))

    return max(0.0, at(t1_ns) - at(t0_ns))


class SimulatedGpuCollect:
    """A ``collect`` for simulated engines: the telemetry layer's simulated GPU, driven by the
    engine's own scraped load (running, KV usage, generation rate) during the level."""

    def __init__(self, engine_name: str, profile: str, url: str) -> None:
        from console.telemetry.gpu.simgpu import SimulatedGpus

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
