"""The simulated GPU fleet follows the simulated engines' load."""

from __future__ import annotations

import itertools

import pytest

from console.model import EngineSnapshot, GpuFleet, ModelMetrics, Phase, Rates
from console.telemetry.gpu.simgpu import (
    GiB,
    SimGpuSource,
    SimGpuSpec,
    SimPlacement,
    SimulatedGpus,
    default_placements,
    weights_from_model,
)

NAMES = ["vllm-a", "sglang-b", "trtllm-c", "tgi-d"]


def engine(
    name: str,
    *,
    running: float | None = 0.0,
    tps: float | None = 0.0,
    kv: float | None = 0.0,
    phase: Phase = Phase.READY,
    pids: tuple[int, ...] = (),
) -> EngineSnapshot:
    total = ModelMetrics(model="m", running=running, generation_tps=Rates(r5s=tps), kv_usage=kv)
    return EngineSnapshot(
        name=name,
        profile="vllm",
        url="http://127.0.0.1:1",
        taken_at=0.0,
        phase=phase,
        reachable=phase is not Phase.UNREACHABLE,
        total=total,
        pids=pids or ((1000 + NAMES.index(name),) if name in NAMES else (999,)),
        simulated=True,
    )


def idle_fleet() -> list[EngineSnapshot]:
    return [engine(n) for n in NAMES]


def source() -> SimGpuSource:
    return SimGpuSource(default_placements(NAMES, gpu_count=8, tp=2), gpu_count=8)


def test_labelled_simulated_and_placed() -> None:
    fleet = source().update(idle_fleet(), now=100.0)
    assert fleet.source == "simulated" and fleet.driver_version is None
    assert len(fleet.gpus) == 8 and all(g.simulated for g in fleet.gpus)
    assert {g.name for g in fleet.gpus} == {"Simulated H100 80GB"}
    assert all("SIMULATED" in g.uuid for g in fleet.gpus)
    assert fleet.freshness.updated_at == 100.0 and not fleet.freshness.stale
    # TP=2: engine n on GPUs 2n and 2n+1, its PID listed there with its name attached
    for n, name in enumerate(NAMES):
        for i in (2 * n, 2 * n + 1):
            g = fleet.gpus[i]
            assert g.engines == (name,) and [p.pid for p in g.processes] == [1000 + n]


def test_ready_engines_preallocate_about_ninety_percent() -> None:
    g = source().update(idle_fleet(), now=0.0).gpus[0]
    assert g.mem_percent is not None and 84.0 <= g.mem_percent <= 90.0
    assert g.util_percent == 0.0 and g.power_w == SimGpuSpec().idle_w
    assert g.sm_clock_mhz == SimGpuSpec().sm_clock_idle_mhz
    assert g.processes[0].used_bytes == g.mem_used_bytes


def test_util_memory_power_rise_with_load() -> None:
    src = source()
    levels = [(0, 0.0, 0.0), (4, 300.0, 0.1), (32, 2000.0, 0.4), (128, 6000.0, 0.9)]
    seen: list[tuple[float, int, float]] = []
    for t, (running, tps, kv) in enumerate(levels):
        fleet = src.update([engine("vllm-a", running=running, tps=tps, kv=kv), *idle_fleet()[1:]], now=float(t))
        g = fleet.gpus[0]
        assert g.util_percent is not None and g.mem_used_bytes is not None and g.power_w is not None
        seen.append((g.util_percent, g.mem_used_bytes, g.power_w))
        assert fleet.gpus[1].util_percent == g.util_percent  # both TP ranks work
        assert fleet.gpus[2].util_percent == 0.0  # the other engines stay idle
    utils, mems, powers = zip(*seen, strict=True)
    assert list(utils) == sorted(utils) and utils[0] == 0.0 and utils[-1] == 100.0
    assert list(mems) == sorted(mems) and mems[-1] > mems[0]
    assert list(powers) == sorted(powers) and powers[0] == 70.0 and 600.0 < powers[-1] <= 700.0
    assert all(g.power_limit_w == 700.0 for g in src.update(idle_fleet(), now=9.0).gpus)


def test_temperature_follows_power_with_a_lag() -> None:
    src = source()
    busy = [engine("vllm-a", running=128, tps=6000.0, kv=0.9), *idle_fleet()[1:]]
    temps = [src.update(busy, now=float(t)).gpus[0].temperature_c for t in (0, 5, 30, 120, 600)]
    assert temps[0] == SimGpuSpec().idle_temp_c  # no time has passed yet
    assert all(b is not None and a is not None and b > a for a, b in itertools.pairwise(temps))
    assert temps[-1] is not None and temps[-1] == pytest.approx(75.0, abs=2.0)


def test_stopped_or_unreachable_engine_frees_its_gpus() -> None:
    src = source()
    busy = engine("vllm-a", running=64, tps=3000.0, kv=0.5)
    before = src.update([busy, *idle_fleet()[1:]], now=0.0)
    assert before.gpus[0].util_percent and before.gpus[0].mem_used_bytes
    for later in (
        [engine("vllm-a", phase=Phase.EXITED), *idle_fleet()[1:]],
        [engine("vllm-a", phase=Phase.UNREACHABLE), *idle_fleet()[1:]],
        idle_fleet()[1:],  # not reported at all
    ):
        g = src.update(later, now=60.0).gpus[0]
        assert g.util_percent == 0.0 and g.mem_used_bytes == 0 and g.processes == ()
        assert g.power_w == SimGpuSpec().idle_w and g.sm_clock_mhz == SimGpuSpec().sm_clock_idle_mhz
    # other engines untouched
    assert src.update(idle_fleet()[1:], now=61.0).gpus[2].engines == ("sglang-b",)


def test_loading_holds_weights_only() -> None:
    spec = SimGpuSpec()
    fleet = source().update([engine("vllm-a", phase=Phase.LOADING), *idle_fleet()[1:]], now=0.0)
    g = fleet.gpus[0]
    assert g.mem_used_bytes == spec.context_bytes + 8 * GiB  # 16 GiB of weights over TP=2
    starting = source().update([engine("vllm-a", phase=Phase.STARTING)], now=0.0).gpus[0]
    assert starting.mem_used_bytes == spec.context_bytes and starting.util_percent == 0.0


def test_activation_high_water_mark_stays_until_stop() -> None:
    src = source()
    idle = src.update(idle_fleet(), now=0.0).gpus[0].mem_used_bytes
    peak = src.update([engine("vllm-a", running=128, tps=6000.0), *idle_fleet()[1:]], now=1.0).gpus[0]
    calm = src.update(idle_fleet(), now=2.0).gpus[0]
    assert idle is not None and peak.mem_used_bytes is not None and peak.mem_used_bytes > idle
    assert calm.mem_used_bytes == peak.mem_used_bytes and calm.util_percent == 0.0  # allocator cache kept
    src.update([engine("vllm-a", phase=Phase.EXITED)], now=3.0)
    assert src.update(idle_fleet(), now=4.0).gpus[0].mem_used_bytes == idle  # restarted: fresh


def test_grow_on_demand_mode_follows_kv_usage() -> None:
    src = SimGpuSource({"e": SimPlacement(gpus=(0,), preallocate=False)}, gpu_count=1)

    def used(kv: float) -> int:
        g = src.update([engine("e", running=1, tps=10.0, kv=kv)], now=0.0).gpus[0]
        assert g.mem_used_bytes is not None
        return g.mem_used_bytes

    low, mid, high = used(0.0), used(0.5), used(1.0)
    assert low < mid < high and high - low > 40 * GiB


def test_rank_pids_and_shared_gpus() -> None:
    placements = {"a": SimPlacement(gpus=(0, 1)), "b": SimPlacement(gpus=(1,), weights_bytes=2 * GiB)}
    src = SimGpuSource(placements, gpu_count=2)
    a = engine("a", running=128, tps=6000.0, pids=(11, 12))
    b = engine("b", running=8, tps=100.0, pids=(21,))
    fleet = src.update([a, b], now=0.0)
    assert [p.pid for p in fleet.gpus[0].processes] == [11]
    assert [(p.pid, p.engine) for p in fleet.gpus[1].processes] == [(12, "a"), (21, "b")]
    g1 = fleet.gpus[1]
    assert g1.util_percent == 100.0  # capped
    assert g1.mem_used_bytes == g1.mem_total_bytes  # two engines each reserving 90%: capped at the device


def test_deterministic_for_the_same_inputs() -> None:
    def run() -> list[GpuFleet]:
        src = source()
        out = []
        for t in range(5):
            engines = [engine(n, running=10 * t * (i + 1), tps=100.0 * t, kv=0.1 * t) for i, n in enumerate(NAMES)]
            out.append(src.update(engines, now=float(t)))
        return out

    assert run() == run()


def test_bad_placement_is_rejected() -> None:
    with pytest.raises(ValueError, match="outside"):
        SimGpuSource({"x": SimPlacement(gpus=(8,))}, gpu_count=8)
    with pytest.raises(ValueError, match="outside"):
        SimGpuSource({"x": SimPlacement(gpus=())}, gpu_count=8)


def test_weights_from_model_name() -> None:
    assert weights_from_model("meta-llama/Llama-3.1-8B-Instruct") == 16_000_000_000
    assert weights_from_model("Qwen/Qwen2.5-0.5B-Instruct") == 1_000_000_000
    assert weights_from_model("Meta-Llama-3-70B") == 140_000_000_000
    assert weights_from_model("sim-model", default=5) == 5


def test_hub_adapter_places_engines_and_follows_them() -> None:
    sim = SimulatedGpus(8, {"tgi-d": (7,)})
    engines = [engine(n) for n in NAMES]
    fleet = sim.step(0.0, engines)
    assert {n: p.gpus for n, p in sim.placements.items()} == {
        "vllm-a": (0, 1),
        "sglang-b": (2, 3),
        "trtllm-c": (4, 5),
        "tgi-d": (7,),  # explicit assignment wins
    }
    assert fleet.gpus[6].processes == () and fleet.gpus[6].mem_used_bytes == 0
    busy = [engine("vllm-a", running=100, tps=5000.0, kv=0.7), *engines[1:]]
    hot = sim.step(10.0, busy)
    assert hot.gpus[0].util_percent is not None and hot.gpus[0].util_percent > 80.0
    # a late engine is placed on what is left, and earlier state (temperature) carries over
    late = engine("extra-e", pids=(77,))
    after = sim.step(20.0, [*busy, late])
    assert sim.placements["extra-e"].gpus == (6,)
    assert after.gpus[6].engines == ("extra-e",)
    assert after.gpus[0].temperature_c is not None and hot.gpus[0].temperature_c is not None
    assert after.gpus[0].temperature_c > hot.gpus[0].temperature_c
