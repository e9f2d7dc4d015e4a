"""Energy per GPU and engine: NVML's counter read through NvmlSource (fake pynvml module), the
meter's windows, reset safety, attribution labels, the 10 Hz power-integration fallback."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from console.model import (
    EngineSnapshot,
    FleetSnapshot,
    GpuFleet,
    GpuProcess,
    GpuSnapshot,
    ModelMetrics,
    Phase,
    Rates,
)
from console.telemetry.gpu.energy import EnergyMeter, gpu_shares
from console.telemetry.gpu.nvml import NvmlSource
from console.telemetry.gpu.power_integrator import PowerIntegrator
from console.telemetry.gpu.simgpu import SimGpuSource, SimPlacement
from tests.telemetry.test_nvml import FakeDevice, FakeNvml

GiB = 1024**3


class Clock:
    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def engine(name: str, t: float, gen: float, prompt: float, gpus: tuple[int, ...] = (0,),
           running: float = 4.0) -> EngineSnapshot:  # fmt: skip
    total = ModelMetrics(model="", running=running, counters={"generation_tokens": gen, "prompt_tokens": prompt})
    return EngineSnapshot(name=name, profile="vllm", url="http://127.0.0.1:1", taken_at=t, phase=Phase.READY,
                          reachable=True, total=total, gpus=gpus, pids=(4242,))  # fmt: skip


def fake_source(device: FakeDevice, clock: Clock) -> tuple[FakeNvml, NvmlSource]:
    nv = FakeNvml([device])
    src = NvmlSource(nv, clock=clock, name_of=lambda pid: "python3", xid_events=False)
    return nv, src


def owned(fleet: GpuFleet, engine_name: str) -> GpuFleet:
    gpus = tuple(replace(g, processes=tuple(replace(p, engine=engine_name) for p in g.processes)) for g in fleet.gpus)
    return replace(fleet, gpus=gpus)


def test_tokens_per_joule_is_exact_from_a_known_counter() -> None:
    # 250 W exactly (250,000 mJ a second), 1,000 generated and 400 prompt tokens a second.
    clock = Clock()
    dev = FakeDevice(name="NVIDIA H100", uuid="GPU-aaaa", compute=[(4242, 60 * GiB)], energy_mj=7_000_000)
    nv, src = fake_source(dev, clock)
    meter = EnergyMeter(window_s=60.0)
    snap = None
    for k in range(91):
        clock.t = 1_000.0 + k
        dev.energy_mj = 7_000_000 + 250_000 * k
        dev.power_mw = 250_000
        fleet = owned(src.collect(), "vllm-a")
        assert fleet.gpus[0].energy_source == "counter" and fleet.gpus[0].energy_mj == dev.energy_mj
        snap = meter.update(FleetSnapshot(taken_at=clock.t, engines=(engine("vllm-a", clock.t, 1000.0 * k, 400.0 * k),),
                                          gpus=fleet))  # fmt: skip
    assert snap is not None
    e = snap.engines[0].energy
    assert e is not None
    assert e.window_s == 60.0 and e.joules == 15_000.0
    assert e.tokens_per_joule == 4.0  # 60,000 tokens / 15,000 J
    assert e.total_tokens_per_joule == 5.6  # (60,000 + 24,000) / 15,000 J
    assert e.joules_per_1k_output == 250.0
    assert e.power_w == 250.0 and e.busy_w == 250.0 and e.idle_w is None
    assert e.attribution == "exact" and not e.estimate and e.source == "counter" and e.gpus == (0,)
    assert e.total_joules == 90 * 250.0
    g = snap.gpus.gpus[0].energy
    assert g is not None and g.power_w == 250.0 and g.joules == 15_000.0 and g.tokens_per_joule is None
    assert nv.calls["energy"] == 91


@pytest.mark.parametrize("power_w", [250.0, None])
def test_a_counter_reset_makes_no_spike(power_w: float | None) -> None:
    meter = EnergyMeter(window_s=60.0)
    seen = []
    mj = 5_000_000.0
    for k in range(140):
        t = 2_000.0 + k
        if k == 70:
            mj = 1_234.0  # the driver reloaded: the counter starts again near 0
        elif k:
            mj += 250_000.0
        g = GpuSnapshot(index=0, name="H100", uuid="GPU-a", taken_at=t, util_percent=90.0, power_w=power_w,
                        energy_mj=mj, energy_source="counter",
                        processes=(GpuProcess(4242, 60 * GiB, engine="e"),))  # fmt: skip
        snap = meter.update(FleetSnapshot(taken_at=t, engines=(engine("e", t, 1000.0 * k, 0.0),),
                                          gpus=GpuFleet(gpus=(g,))))  # fmt: skip
        view = snap.engines[0].energy
        assert view is not None
        if view.joules is not None:
            seen.append((view.joules, view.power_w, view.tokens_per_joule))
    # Never negative, never above the true 250 W; with a power reading the interval is bridged exactly.
    for joules, power, tpj in seen:
        assert joules >= 0 and power is not None and 0 <= power <= 250.0 + 1e-9
        assert tpj is None or 3.9 <= tpj <= 4.0 / (1 - 1 / 60) + 1e-9
    if power_w is not None:
        assert all(p == pytest.approx(250.0) for _, p, _ in seen)
    else:  # one interval lost out of 60: at most 1/60 low, for one window only
        assert min(p or 0.0 for _, p, _ in seen) == pytest.approx(250.0 * 59 / 60)
        assert seen[-1][1] == pytest.approx(250.0)


def gpu(procs: tuple[GpuProcess, ...], *, mig: bool | None = None, index: int = 0) -> GpuSnapshot:
    return GpuSnapshot(index=index, name="H100", uuid=f"GPU-{index}", taken_at=0.0, processes=procs, mig=mig,
                       energy_mj=0.0, energy_source="counter")  # fmt: skip


def test_shares_exact_only_on_a_gpu_the_engine_has_alone() -> None:
    alone = gpu((GpuProcess(1, 40 * GiB, engine="a"), GpuProcess(2, 1 * GiB, engine="a")))
    assert {n: (s.fraction, s.exact) for n, s in gpu_shares(alone, ["a"]).items()} == {"a": (1.0, True)}
    cases = {
        "two engines": (gpu((GpuProcess(1, 30 * GiB, engine="a"), GpuProcess(2, 10 * GiB, engine="b"))), ["a", "b"]),
        "a foreign process": (gpu((GpuProcess(1, 30 * GiB, engine="a"), GpuProcess(9, 10 * GiB))), ["a"]),
        "MIG": (gpu((GpuProcess(1, None, engine="a"),), mig=True), ["a"]),
        "nothing visible": (gpu(()), ["a"]),
        "memory unknown": (gpu((GpuProcess(1, None, engine="a"), GpuProcess(2, None, engine="b"))), ["a", "b"]),
        "assigned, not seen": (gpu((GpuProcess(1, 30 * GiB, engine="a"),)), ["a", "b"]),
    }
    for label, (g, claim) in cases.items():
        shares = gpu_shares(g, claim)
        assert shares and all(not s.exact and s.reason for s in shares.values()), label
        foreign = [p for p in g.processes if p.engine is None]
        total = sum(s.fraction for s in shares.values())
        if foreign:  # the rest belongs to the processes of no engine
            assert 0 < total < 1, label
        else:
            assert total == pytest.approx(1.0, abs=1e-6), label
    two = gpu_shares(cases["two engines"][0], ["a", "b"])
    assert (two["a"].fraction, two["b"].fraction) == (0.75, 0.25)


def test_a_shared_gpu_is_always_labelled_an_estimate_in_the_snapshot() -> None:
    meter = EnergyMeter(window_s=10.0)
    snap = None
    for k in range(12):
        t = 100.0 + k
        g0 = replace(gpu((GpuProcess(1, 30 * GiB, engine="a"), GpuProcess(2, 10 * GiB, engine="b"))),
                     taken_at=t, energy_mj=400_000.0 * k)  # fmt: skip
        g1 = replace(gpu((GpuProcess(3, 30 * GiB, engine="a"),), index=1), taken_at=t, energy_mj=100_000.0 * k)
        engines = (engine("a", t, 100.0 * k, 0.0, gpus=(0, 1)), engine("b", t, 100.0 * k, 0.0, gpus=(0,)))
        snap = meter.update(FleetSnapshot(taken_at=t, engines=engines, gpus=GpuFleet(gpus=(g0, g1))))
    assert snap is not None
    a, b = (e.energy for e in snap.engines)
    assert a is not None and b is not None
    assert a.estimate and b.estimate and "shared" in a.reason and "shared" in b.reason
    assert a.power_w == pytest.approx(0.75 * 400 + 100) and b.power_w == pytest.approx(0.25 * 400)
    assert (a.power_w or 0) + (b.power_w or 0) == pytest.approx(500.0)  # nothing lost, nothing twice


def test_no_energy_without_a_counter_and_an_idle_engine_reads_zero_tokens_per_joule() -> None:
    meter = EnergyMeter(window_s=5.0)
    for k in range(8):
        t = float(k)
        g = replace(gpu((GpuProcess(1, GiB, engine="a"),)), taken_at=t, energy_mj=70_000.0 * k, util_percent=0.0)
        bare = replace(g, index=1, energy_mj=None, energy_source="")
        snap = meter.update(FleetSnapshot(taken_at=t, engines=(engine("a", t, 50.0, 0.0, running=0.0),
                                                                engine("b", t, 0.0, 0.0, gpus=(1,))),
                                          gpus=GpuFleet(gpus=(g, bare))))  # fmt: skip
    a, b = snap.engines
    assert b.energy is None and snap.gpus.gpus[1].energy is None
    assert a.energy is not None and a.energy.tokens_per_joule == 0.0 and a.energy.joules_per_1k_output is None
    assert a.energy.idle_w == pytest.approx(70.0) and a.energy.busy_w is None


def test_power_integration_fallback_is_trapezoidal_and_goes_stale() -> None:
    now = itertools.count()
    t = {"now": 0.0}
    dev = FakeDevice(name="Tesla P100", uuid="GPU-p", power_mw=100_000)
    nv = FakeNvml([dev])
    integ = PowerIntegrator(nv, monotonic=lambda: t["now"], threaded=False)
    integ.add(0, 0)
    for k in range(11):  # 1 s at 10 Hz, power ramping 100 -> 200 W
        t["now"] = next(now) / 10
        dev.power_mw = 100_000 + 10_000 * k
        integ.sample_once()
    assert integ.energy_mj(0) == pytest.approx(150_000.0)  # mean 150 W over 1 s
    t["now"] += 2.5  # no sample for longer than stale_s: n/a, not a figure that stopped
    assert integ.energy_mj(0) is None


def test_nvml_source_falls_back_to_integrated_power_where_the_counter_is_unsupported() -> None:
    import time

    dev = FakeDevice(name="Tesla P100", uuid="GPU-p", energy_mj=-1, power_mw=100_000)
    nv = FakeNvml([dev])
    src = NvmlSource(nv, name_of=lambda pid: "", xid_events=False)
    try:
        first = src.collect().gpus[0]
        assert first.energy_mj is None and first.energy_source == ""  # nothing integrated yet
        deadline = time.monotonic() + 5.0
        g = first
        while time.monotonic() < deadline:
            time.sleep(0.1)
            g = src.collect().gpus[0]
            if g.energy_mj is not None and g.energy_mj > 30_000:
                break
        assert g.energy_source == "integrated" and g.energy_mj is not None
        assert nv.calls["energy"] == 1  # NotSupported is remembered: the counter is not asked again
        assert nv.calls["power"] > 3  # the sampler thread reads power on its own
    finally:
        src.close()
    calls = nv.calls["power"]
    time.sleep(0.35)
    assert nv.calls["power"] == calls  # close() stopped the sampler thread


def test_nvml_reports_mig_mode() -> None:
    dev = FakeDevice(name="A100", uuid="GPU-m", mig=(1, 1))
    _, src = fake_source(dev, Clock())
    assert src.collect().gpus[0].mig is True
    dev2 = FakeDevice(name="A100", uuid="GPU-n")
    assert fake_source(dev2, Clock())[1].collect().gpus[0].mig is None  # NotSupported: unknown


def test_simulated_gpus_have_an_energy_counter_that_integrates_their_power() -> None:
    src = SimGpuSource({"e": SimPlacement(gpus=(0,))}, gpu_count=1)
    total = ModelMetrics(model="", running=64.0, generation_tps=Rates(r5s=3000.0))
    busy = replace(engine("e", 0.0, 0.0, 0.0), total=total)
    f0 = src.update([busy], now=10.0)
    f1 = src.update([busy], now=12.0)
    g0, g1 = f0.gpus[0], f1.gpus[0]
    assert g0.energy_source == "simulated" and g0.simulated
    assert g1.power_w is not None and g1.energy_mj is not None and g0.energy_mj is not None
    assert g1.energy_mj - g0.energy_mj == pytest.approx(2.0 * g1.power_w * 1000, rel=1e-3)
