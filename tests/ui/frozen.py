"""A FleetSource frozen to deterministic values, with fixed history and a fixed clock.

Implements the FleetSource protocol for Pilot and snapshot tests: ``publish`` delivers a snapshot
to subscribers from another thread, as a real source does.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import replace

from console.model import (
    EnergyView,
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuProcess,
    GpuSnapshot,
    HostSnapshot,
    KvTransfer,
    LoraState,
    ModelMetrics,
    Phase,
    Quantiles,
    Rates,
    RawSeries,
    SourceState,
    SpecDecode,
)
from console.telemetry.metrics.history import History
from console.telemetry.source import ENGINE_SERIES, GPU_SERIES, HOST_SERIES, Listener

T0 = 1_700_000_000.0  # the fixed "now"
GIB = 1024**3


def clock() -> float:
    return T0


def _metrics(model: str, i: int, *, kv: float, waiting: float, low_sample: bool = False) -> ModelMetrics:
    return ModelMetrics(
        model=model,
        running=8 + 4 * i,
        waiting=waiting,
        kv_usage=kv,
        prefix_hit_rate=0.42 + 0.1 * i,
        prompt_tps=Rates(1500.0 + 250 * i, 1400.0, 1300.0),
        generation_tps=Rates(820.0 + 130 * i, 800.0, 790.0),
        request_rate=Rates(3.0 + i, 3.0, 3.0),
        error_rate=Rates(0.0 if i != 1 else 0.25, 0.0, 0.0),
        ttft=Quantiles(p50=0.085 + 0.01 * i, p90=0.2, p99=0.31 + 0.05 * i, count=120, low_sample=low_sample),
        itl=Quantiles(p50=0.021 + 0.002 * i, p90=0.03, p99=0.045, count=4000, low_sample=False),
    )


def _engine(i: int, name: str, profile: str, model: str, **kw: object) -> EngineSnapshot:
    fresh = Freshness(SourceState.OK, updated_at=T0 - 0.4)
    base = EngineSnapshot(
        name=name,
        profile=profile,
        url=f"http://127.0.0.1:{8000 + i}",
        taken_at=T0,
        phase=Phase.READY,
        reachable=True,
        identity=EngineIdentity(version=f"0.{i + 9}.1", models=(model,), max_model_len=32768),
        metrics_freshness=fresh,
        health_freshness=fresh,
        total=_metrics(model, i, kv=0.35 + 0.2 * i, waiting=0 if i != 1 else 6),
        raw=(
            RawSeries(f"{profile}:num_requests_running", (("model_name", model),), 8 + 4 * i, "gauge"),
            RawSeries(f"{profile}:num_requests_waiting", (("model_name", model),), 0, "gauge"),
            RawSeries(f"{profile}:generation_tokens_total", (("model_name", model),), 123456 + i, "counter"),
        ),
        simulated=True,
        gpus=(2 * i, 2 * i + 1),
        pids=(4000 + i,),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _with_energy_and_features(i: int, e: EngineSnapshot) -> EngineSnapshot:
    """Energy on every engine (the second one's an estimate: a shared GPU); speculative decoding,
    KV transfer and LoRA on the first two."""
    power = 810.0 + 20 * i
    gen = e.total.generation_tps.r60s if e.total is not None else None
    tpj = None if gen is None else gen / power
    energy = EnergyView(joules=power * 60, window_s=60.0, power_w=power, tokens_per_joule=tpj,
                        total_tokens_per_joule=None if tpj is None else 3 * tpj,
                        joules_per_1k_output=None if not tpj else 1000 / tpj, idle_w=140.0, busy_w=power,
                        total_joules=power * 600, source="simulated", gpus=e.gpus, simulated=True,
                        attribution="estimate" if i == 1 else "exact",
                        reason="GPU 2 is shared (sglang-b, x); split by memory share" if i == 1 else "")
    out = replace(e, energy=energy)
    if i < 2 and e.total is not None:
        total = replace(e.total, spec=SpecDecode(0.62, 2.86, 0.65), lora=LoraState(2, 1, None, 2),
                        kv_transfer=KvTransfer(3.1e8, 18.4, 0.0172, Rates(0.0, 0.0, 0.0)))
        out = replace(out, total=total)
    return out


def frozen_fleet() -> FleetSnapshot:
    listed = (
        _engine(0, "vllm-a", "vllm", "meta-llama/Llama-3.1-8B-Instruct"),
        _engine(1, "sglang-b", "sglang", "Qwen/Qwen2.5-7B-Instruct"),
        _engine(
            2,
            "trtllm-c",
            "trtllm",
            "mistralai/Mistral-7B-Instruct-v0.3",
            metrics_freshness=Freshness(SourceState.STALE, updated_at=T0 - 12, stale_since=T0 - 12,
                                        reason="scrape timed out after 2.0 s"),
        ),
        _engine(
            3,
            "tgi-d",
            "tgi",
            "google/gemma-2-9b-it",
            phase=Phase.UNREACHABLE,
            reachable=False,
            health_detail="connection refused",
            health_freshness=Freshness(SourceState.STALE, updated_at=T0 - 30, stale_since=T0 - 30,
                                       reason="connection refused"),
            metrics_freshness=Freshness(SourceState.STALE, updated_at=T0 - 30, stale_since=T0 - 30,
                                        reason="connection refused"),
            total=ModelMetrics(model="google/gemma-2-9b-it"),
        ),
    )
    engines = tuple(_with_energy_and_features(i, e) for i, e in enumerate(listed))
    gpus = tuple(
        GpuSnapshot(
            index=g,
            name="NVIDIA H100 80GB HBM3",
            uuid=f"GPU-SIM-{g:04d}",
            taken_at=T0,
            util_percent=float(90 - 7 * g),
            mem_used_bytes=int((70 + g) * GIB),
            mem_total_bytes=80 * GIB,
            temperature_c=55.0 + g,
            power_w=400.0 + 10 * g,
            power_limit_w=700.0,
            sm_clock_mhz=1980,
            processes=(GpuProcess(pid=4000 + g // 2, used_bytes=int((69 + g) * GIB), name="python3",
                                  engine=engines[g // 2].name),),
            simulated=True,
            energy_mj=1e9 + g,
            energy_source="simulated",
            energy=EnergyView(joules=(400.0 + 10 * g) * 60, window_s=60.0, power_w=400.0 + 10 * g,
                              source="simulated", gpus=(g,), simulated=True),
        )
        for g in range(8)
    )
    host = HostSnapshot(taken_at=T0, cpu_percent=23.0, cpu_count=16, mem_used_bytes=40 * GIB,
                        mem_total_bytes=128 * GIB, load_avg=(2.5, 2.1, 1.9), hostname="gpu-host-1",
                        freshness=Freshness(SourceState.OK, updated_at=T0))
    return FleetSnapshot(taken_at=T0, engines=engines,
                         gpus=GpuFleet(gpus=gpus, freshness=Freshness(SourceState.OK, updated_at=T0),
                                       driver_version="550.54.15", source="simulated"),
                         host=host)


def frozen_history(fleet: FleetSnapshot, points: int = 300) -> History:
    """Deterministic smooth series for every engine, GPU and host key."""
    h = History(capacity=points)
    for k in range(points):
        t = T0 - (points - 1 - k)
        for n, e in enumerate(fleet.engines):
            for m, metric in enumerate(ENGINE_SERIES):
                base = 1.0 if metric in ("kv_usage", "prefix_hit_rate") else 0.2 if "_p" in metric else 100.0
                v = base * (0.5 + 0.4 * math.sin((k + 7 * n + 3 * m) / 9.0))
                if e.phase is Phase.UNREACHABLE and k > points - 30:
                    h.append((e.name, metric), t, None)  # the gap since it went away
                else:
                    h.append((e.name, metric), t, v)
        for g in fleet.gpus.gpus:
            for m, metric in enumerate(GPU_SERIES):
                scale = 1e9 if metric == "mem_used" else 1.0  # bytes
                h.append((f"gpu:{g.index}", metric), t, scale * (50 + 40 * math.sin((k + g.index + m) / 11.0)))
        for metric in HOST_SERIES:
            h.append(("host", metric), t, 30.0)
    return h


class FrozenSource:
    """FleetSource with fixed data; ``publish`` simulates a collection from a background thread."""

    def __init__(self, fleet: FleetSnapshot | None = None, history: History | None = None) -> None:
        self._fleet = fleet if fleet is not None else frozen_fleet()
        self.history = history if history is not None else frozen_history(self._fleet)
        self._listeners: list[Listener] = []
        self._refresh = 1.0
        self._paused = False
        self.detail: str | None = None  # the engine whose raw series a screen asked for
        self.started = False
        self.lock = threading.Lock()

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False

    def latest(self) -> FleetSnapshot:
        return self._fleet

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    @property
    def refresh(self) -> float:
        return self._refresh

    def set_refresh(self, seconds: float) -> None:
        self._refresh = seconds

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        self._paused = paused

    def set_detail(self, name: str | None) -> None:
        self.detail = name

    def publish(self, fleet: FleetSnapshot) -> None:
        """Deliver ``fleet`` to subscribers from a separate thread, like a real collector."""
        self._fleet = fleet
        th = threading.Thread(target=lambda: [cb(fleet) for cb in list(self._listeners)])
        th.start()
        th.join()
