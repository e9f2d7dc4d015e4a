"""Simulated GPUs for the demo fleet, driven by the simulated engines' own load.

Clearly labelled: ``GpuFleet.source == "simulated"``, every ``GpuSnapshot.simulated`` is True and the
devices are called "Simulated H100 80GB". Nothing random: each tick's figures are a function of
the engines' snapshots (running requests, generation tokens/s, KV usage, phase, PIDs), a static
engine -> GPU placement, and, for temperature only, the previous tick (it follows power with a lag).
Each GPU has an energy counter like NVML's (``energy_mj``, source "simulated"): the integral of its
simulated power, so the demo's tokens per joule follow its own power figures.

Memory follows how real engines behave: vLLM / SGLang / TensorRT-LLM / TGI / llama.cpp reserve
their KV pool at load (``gpu_memory_utilization`` 0.9, ``--mem-fraction-static``, ...), so once an
engine is ready NVML shows about 90% used however full the KV cache is. What still moves with load
is the activation working set, which PyTorch's caching allocator keeps at its high-water mark until
the engine stops. ``SimPlacement(preallocate=False)`` instead grows the KV part with ``kv_usage``.
A stopped, failed or unreachable engine's GPUs drop to idle and free its memory.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from console.model import EngineSnapshot, Freshness, GpuFleet, GpuProcess, GpuSnapshot, Phase, SourceState

MiB = 1024**2
GiB = 1024**3

# Phases in which the engine process holds GPU memory, and how much of it.
_SERVING = frozenset({Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY})
_CONTEXT_ONLY = frozenset({Phase.STARTING})  # CUDA context up, weights not yet loading
_LOADING = frozenset({Phase.LOADING})  # weights in memory, KV pool not yet reserved


@dataclass(frozen=True, slots=True)
class SimGpuSpec:
    """One simulated device model (figures of an H100 SXM 80GB)."""

    name: str = "Simulated H100 80GB"
    mem_total_bytes: int = 81559 * MiB  # what nvidia-smi reports for an H100 80GB
    tdp_w: float = 700.0
    idle_w: float = 70.0
    idle_temp_c: float = 31.0
    full_temp_c: float = 76.0  # steady state at TDP
    temp_tau_s: float = 30.0  # time constant of the temperature lag
    sm_clock_idle_mhz: int = 345
    sm_clock_max_mhz: int = 1980
    mem_clock_mhz: int = 2619
    context_bytes: int = 520 * MiB  # CUDA context + NCCL buffers per process


@dataclass(frozen=True, slots=True)
class SimPlacement:
    """Where one engine runs and how big it is. ``gpus`` has TP entries (one per rank)."""

    gpus: tuple[int, ...]
    weights_bytes: int = 16 * GiB  # whole model, split evenly over the TP ranks (8B bf16 ~ 16 GB)
    mem_fraction: float = 0.90  # share of each GPU the engine reserves (gpu_memory_utilization)
    activation_bytes: int = 3 * GiB  # per GPU working set at full batch
    max_running: int = 128  # running requests at which the SMs are saturated
    peak_generation_tps: float = 6000.0  # generation tokens/s of the whole group at saturation
    preallocate: bool = True  # KV pool reserved at load (all mainstream engines) vs grown on demand


def default_placements(
    engines: Sequence[str],
    *,
    gpu_count: int = 8,
    tp: int = 2,
    weights_bytes: int = 16 * GiB,
) -> dict[str, SimPlacement]:
    """Consecutive TP groups: 4 engines, TP=2 on 8 GPUs -> [0,1], [2,3], [4,5], [6,7] (wrapping)."""
    out: dict[str, SimPlacement] = {}
    for n, name in enumerate(engines):
        first = n * tp
        gpus = tuple((first + r) % gpu_count for r in range(tp))
        out[name] = SimPlacement(gpus=gpus, weights_bytes=weights_bytes)
    return out


def _clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    return lo if x < lo else hi if x > hi else x


@dataclass(frozen=True, slots=True)
class _Share:
    """One engine's use of one GPU during one tick."""

    engine: str
    pid: int | None
    process_name: str
    used_bytes: int
    util: float  # 0-100
    mem_util: float  # 0-100


@dataclass
class SimGpuFaults:
    """Faults a test or demo injects into simulated GPUs (a harness knob: real GPUs report these
    through NVML as XID events, temperatures and clock-throttle reasons)."""

    xids: dict[int, tuple[int, ...]] = field(default_factory=dict)  # GPU -> XID codes, oldest first
    extra_heat_c: dict[int, float] = field(default_factory=dict)  # GPU -> degrees over its load's
    throttle: dict[int, tuple[str, ...]] = field(default_factory=dict)  # GPU -> active NVML reasons

    def xid(self, index: int, code: int) -> None:
        self.xids[index] = (*self.xids.get(index, ())[-(XID_KEPT - 1):], code)


XID_KEPT = 16  # as the NVML poller keeps


class SimGpuSource:
    """Simulated GPU fleet; call ``update`` once per tick with the engines' current snapshots."""

    def __init__(
        self,
        placements: Mapping[str, SimPlacement],
        *,
        gpu_count: int = 8,
        spec: SimGpuSpec = SimGpuSpec(),
        clock: Callable[[], float] = time.time,
        faults: SimGpuFaults | None = None,
    ) -> None:
        self.faults = faults or SimGpuFaults()
        for name, p in placements.items():
            bad = [g for g in p.gpus if not 0 <= g < gpu_count]
            if bad or not p.gpus:
                raise ValueError(f"{name}: GPU indices {list(p.gpus)} outside 0..{gpu_count - 1}")
        self.placements = dict(placements)
        self.gpu_count = gpu_count
        self.spec = spec
        self._clock = clock
        self._temps: list[float] = [spec.idle_temp_c] * gpu_count
        # Each GPU's energy counter (mJ), like NVML's total-energy counter: the integral of its power.
        self._energy_mj: list[float] = [0.0] * gpu_count
        self._last_power: list[float | None] = [None] * gpu_count
        self._last_at: float | None = None
        self._activation_peak: dict[str, float] = {}  # engine -> high-water load since it became ready

    def adopt_state(self, other: SimGpuSource) -> None:
        """Carry temperatures and allocator high-water marks over from ``other`` (same GPU count)."""
        if other.gpu_count == self.gpu_count:
            self._temps = list(other._temps)
            self._energy_mj = list(other._energy_mj)
            self._last_power = list(other._last_power)
        self._last_at = other._last_at
        self._activation_peak = {k: v for k, v in other._activation_peak.items() if k in self.placements}

    def update(self, engines: Iterable[EngineSnapshot], now: float | None = None) -> GpuFleet:
        """The fleet for this tick. Engines without a placement are ignored; placed engines missing
        from ``engines`` count as stopped."""
        at = self._clock() if now is None else now
        dt = 0.0 if self._last_at is None else max(0.0, at - self._last_at)
        self._last_at = at
        by_name = {e.name: e for e in engines}
        shares: list[list[_Share]] = [[] for _ in range(self.gpu_count)]
        for name, placement in self.placements.items():
            snap = by_name.get(name)
            for rank, index in enumerate(placement.gpus):
                share = self._share(name, placement, snap, rank)
                if share is not None:
                    shares[index].append(share)
        gpus = tuple(self._gpu(i, shares[i], at, dt) for i in range(self.gpu_count))
        return GpuFleet(
            gpus=gpus,
            freshness=Freshness(state=SourceState.OK, updated_at=at),
            driver_version=None,
            source="simulated",
        )

    # -- model -------------------------------------------------------------------------------------

    def _share(self, name: str, p: SimPlacement, snap: EngineSnapshot | None, rank: int) -> _Share | None:
        spec = self.spec
        phase = snap.phase if snap is not None else Phase.EXITED
        if phase not in _SERVING and phase not in _LOADING and phase not in _CONTEXT_ONLY:
            self._activation_peak.pop(name, None)  # process gone: its allocator cache goes with it
            return None
        assert snap is not None
        tp = len(p.gpus)
        weights = p.weights_bytes // tp
        pid = snap.pids[rank] if len(snap.pids) == tp else (snap.pids[0] if snap.pids else None)
        pname = f"{snap.profile or 'engine'} (simulated)"
        if phase in _CONTEXT_ONLY:
            return _Share(name, pid, pname, spec.context_bytes, 0.0, 0.0)
        if phase in _LOADING:
            # Copying weights in: a little SM and a lot of bus traffic, no KV pool yet.
            return _Share(name, pid, pname, spec.context_bytes + weights, 3.0, 12.0)
        total = snap.total
        running = (total.running if total is not None else None) or 0.0
        tps = (total.generation_tps.r5s if total is not None else None) or 0.0
        kv = _clamp((total.kv_usage if total is not None else None) or 0.0)
        load = _clamp(0.5 * running / max(1, p.max_running) + 0.5 * tps / max(1.0, p.peak_generation_tps))
        busy = running > 0 or tps > 0
        util = 30.0 + 70.0 * load if busy else 0.0
        mem_util = util * (0.55 + 0.35 * kv)  # decode reads the KV cache: more of it, more bandwidth
        peak = max(self._activation_peak.get(name, 0.0), load)
        self._activation_peak[name] = peak
        budget = int(p.mem_fraction * spec.mem_total_bytes)
        kv_capacity = max(0, budget - spec.context_bytes - weights - p.activation_bytes)
        activations = int(p.activation_bytes * (0.2 + 0.8 * peak))
        kv_bytes = kv_capacity if p.preallocate else int(kv * kv_capacity)
        used = spec.context_bytes + weights + kv_bytes + activations
        return _Share(name, pid, pname, used, util, mem_util)

    def _gpu(self, index: int, shares: list[_Share], at: float, dt: float) -> GpuSnapshot:
        spec = self.spec
        util = min(100.0, sum(s.util for s in shares))
        mem_util = min(100.0, sum(s.mem_util for s in shares))
        used = min(spec.mem_total_bytes, sum(s.used_bytes for s in shares))
        power = spec.idle_w + (spec.tdp_w - spec.idle_w) * (0.92 * util + 0.08 * mem_util) / 100.0
        heat = (power - spec.idle_w) / (spec.tdp_w - spec.idle_w)
        target = spec.idle_temp_c + (spec.full_temp_c - spec.idle_temp_c) * heat
        target += self.faults.extra_heat_c.get(index, 0.0)
        if dt > 0:
            self._temps[index] = target + (self._temps[index] - target) * math.exp(-dt / spec.temp_tau_s)
            last = self._last_power[index]
            self._energy_mj[index] += 1000.0 * dt * (power if last is None else (last + power) / 2.0)
        self._last_power[index] = power
        procs = tuple(
            GpuProcess(pid=s.pid, used_bytes=s.used_bytes, name=s.process_name, engine=s.engine)
            for s in shares
            if s.pid is not None
        )
        return GpuSnapshot(
            index=index,
            name=spec.name,
            uuid=f"GPU-SIMULATED-{index:04d}",
            taken_at=at,
            util_percent=round(util, 1),
            mem_util_percent=round(mem_util, 1),
            mem_used_bytes=used,
            mem_total_bytes=spec.mem_total_bytes,
            temperature_c=round(self._temps[index], 1),
            power_w=round(power, 1),
            power_limit_w=spec.tdp_w,
            sm_clock_mhz=spec.sm_clock_max_mhz if util > 0 else spec.sm_clock_idle_mhz,
            mem_clock_mhz=spec.mem_clock_mhz,
            ecc_errors=0,
            xid_errors=self.faults.xids.get(index, ()),
            throttle_reasons=self.faults.throttle.get(index, ()),
            processes=procs,
            simulated=True,
            energy_mj=round(self._energy_mj[index], 3),
            energy_source="simulated",
        )


_PARAMS = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def weights_from_model(model: str, default: int = 16 * GiB) -> int:
    """bf16 weight bytes guessed from a model name ("Llama-3.1-8B-Instruct" -> 16 GB); else ``default``."""
    m = _PARAMS.search(model.rsplit("/", 1)[-1])
    if m is None:
        return default
    return int(float(m.group(1)) * 1e9 * 2)


class SimulatedGpus:
    """What the hub drives in ``gpu_source = "simulated"`` mode: ``step(now, engines)`` each tick.

    Engines with an explicit assignment (instance ``gpus = [..]``) use it; the others are placed on
    first sight on the next free GPUs (TP=2 while two are free, else TP=1, else shared round-robin),
    in the order the hub lists them, so the same fleet always lands the same way.
    """

    def __init__(
        self,
        gpu_count: int = 8,
        assignment: Mapping[str, tuple[int, ...]] | None = None,
        *,
        spec: SimGpuSpec = SimGpuSpec(),
        auto_tp: int = 2,
    ) -> None:
        self.gpu_count = gpu_count
        self._assignment = {k: tuple(v) for k, v in (assignment or {}).items() if v}
        self._auto_tp = max(1, auto_tp)
        self._spec = spec
        self._source: SimGpuSource | None = None
        self._placements: dict[str, SimPlacement] = {}
        self._next_shared = 0
        self.faults = SimGpuFaults()

    @property
    def placements(self) -> dict[str, SimPlacement]:
        return dict(self._placements)

    def step(self, now: float, engines: Sequence[EngineSnapshot]) -> GpuFleet:
        changed = False
        for e in engines:
            if e.name not in self._placements:
                self._placements[e.name] = self._place(e)
                changed = True
        if self._source is None or changed:
            previous = self._source
            self._source = SimGpuSource(self._placements, gpu_count=self.gpu_count, spec=self._spec,
                                        faults=self.faults)
            if previous is not None:  # keep temperatures and allocator state across re-placement
                self._source.adopt_state(previous)
        return self._source.update(engines, now=now)

    def _place(self, e: EngineSnapshot) -> SimPlacement:
        model = e.identity.models[0] if e.identity.models else (e.total.model if e.total is not None else "")
        weights = weights_from_model(model)
        if e.name in self._assignment:
            gpus = tuple(g % self.gpu_count for g in self._assignment[e.name])
            return SimPlacement(gpus=gpus, weights_bytes=weights)
        used = {g for p in self._placements.values() for g in p.gpus}
        free = [g for g in range(self.gpu_count) if g not in used]
        for tp in (self._auto_tp, 1):
            if len(free) >= tp:
                return SimPlacement(gpus=tuple(free[:tp]), weights_bytes=weights)
        gpu = self._next_shared % self.gpu_count
        self._next_shared += 1
        return SimPlacement(gpus=(gpu,), weights_bytes=weights)
