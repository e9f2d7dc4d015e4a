"""Status documents of a small simulated-looking fleet, built from real snapshots with ``status_doc``."""

from __future__ import annotations

import math
from typing import Any

from console.model import (
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuProcess,
    GpuSnapshot,
    HostSnapshot,
    ModelMetrics,
    Phase,
    Quantiles,
    Rates,
    SourceState,
)
from console.status_doc import status_doc

T0 = 1_796_000_000.0


def snapshot(t: float, i: int, *, engines: int = 2, gpus: int = 2) -> FleetSnapshot:
    """Snapshot number ``i`` at ``t``: values move with ``i`` so no two are alike."""
    es = []
    for n in range(engines):
        w = 1 + n
        m = ModelMetrics(
            model=f"model-{n}", running=float((i * w) % 17), waiting=float(i % 5),
            kv_usage=round(0.5 + 0.4 * math.sin(i / 7 + n), 6), kv_usage_mean=0.3,
            prefix_hit_rate=0.25 + 0.001 * i, prompt_tps=Rates(100.0 + i, 90.0, 80.0),
            generation_tps=Rates(500.5 + i * w, 480.0, None, at_finish=n == 1), request_rate=Rates(2.0, 2.1, 2.2),
            error_rate=Rates(0.0, 0.0, 0.0), preemptions_total=float(i // 10), preemption_rate=Rates(0.1, 0.0, 0.0),
            ttft=Quantiles(0.05 + i / 1000, 0.1, 0.2 + n, 40.0, 0.07, False, ("p99",) if n else ()),
            itl=Quantiles(0.01, 0.02, 0.03, 400.0, 0.015, False), e2e=Quantiles(1.0, 2.0, 3.0, 40.0, 1.5, False),
        )  # fmt: skip
        fresh = Freshness(SourceState.OK, updated_at=t - 0.1)
        stale = Freshness(SourceState.STALE, updated_at=t - 30, stale_since=t - 20, reason="connection refused")
        up = not (n == 1 and 20 <= i % 40 < 25)  # engine 1 drops out now and then
        es.append(EngineSnapshot(
            name=f"eng-{n}", profile=("vllm", "sglang", "tgi", "trtllm")[n % 4], url=f"http://127.0.0.1:{8000 + n}",
            taken_at=t, phase=Phase.READY if up else Phase.UNREACHABLE, reachable=up,
            health_detail="" if up else "connection refused",
            identity=EngineIdentity("0.11.0", (f"model-{n}",), 8192), metrics_freshness=fresh if up else stale,
            health_freshness=fresh if up else stale, models=(m,), total=m, missing=("queue_time",),
            simulated=True, gpus=(n,), pids=(1000 + n,), cpu_percent=12.5, rss_bytes=2**30,
        ))  # fmt: skip
    gs = tuple(
        GpuSnapshot(index=g, name="Simulated H100", uuid=f"GPU-{g}", taken_at=t, util_percent=float((i * 3 + g) % 100),
                    mem_util_percent=40.0, mem_used_bytes=2**34 + i * 2**20, mem_total_bytes=80 * 2**30,
                    temperature_c=60.0 + g, power_w=300.0 + i % 50, power_limit_w=700.0, sm_clock_mhz=1980,
                    mem_clock_mhz=2619, ecc_errors=0,
                    processes=(GpuProcess(1000 + g, 2**34, "python", None, f"eng-{g}" if g < engines else None),),
                    simulated=True)
        for g in range(gpus)
    )  # fmt: skip
    host = HostSnapshot(taken_at=t, cpu_percent=20.0 + i % 10, cpu_count=16, mem_used_bytes=2**33,
                        mem_total_bytes=2**36, load_avg=(1.0, 0.5, 0.25), hostname="testhost",
                        freshness=Freshness(SourceState.OK, updated_at=t))  # fmt: skip
    return FleetSnapshot(taken_at=t, engines=tuple(es), gpus=GpuFleet(gpus=gs, source="simulated",
                         freshness=Freshness(SourceState.OK, updated_at=t)), host=host)  # fmt: skip


def doc(t: float, i: int, **kw: Any) -> dict[str, Any]:
    return status_doc(snapshot(t, i, **kw))


def docs(n: int, *, t0: float = T0, step: float = 1.0, **kw: Any) -> list[tuple[float, dict[str, Any]]]:
    return [(t0 + k * step, doc(t0 + k * step, k, **kw)) for k in range(n)]
