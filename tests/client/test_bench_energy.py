"""The bench's energy per level: the GPUs' cumulative energy sampled on the request clock, reset-safe,
and the exact energy of the steady-state window."""

from __future__ import annotations

import time

import pytest

from console.client.gpu import GpuSampler, energy_between
from console.model import GpuFleet, GpuSnapshot


def fleet(mj: float | None, *, power: float = 300.0) -> GpuFleet:
    g = GpuSnapshot(index=0, name="H100", uuid="GPU-a", taken_at=0.0, util_percent=90.0, power_w=power,
                    energy_mj=mj, energy_source="counter" if mj is not None else "")  # fmt: skip
    return GpuFleet(gpus=(g,))


def test_steady_window_energy_is_interpolated_exactly() -> None:
    series = [[k * 1_000_000_000, 300.0 * k] for k in range(11)]  # 300 W for 10 s
    assert energy_between(series, 2_500_000_000, 7_500_000_000) == pytest.approx(1500.0)
    assert energy_between(series, 0, 10_000_000_000) == pytest.approx(3000.0)
    assert energy_between(series, 5e9, 30e9) is None  # the samples do not cover the window
    assert energy_between(series[:1], 0, 1) is None


def test_sampler_counts_a_counter_reset_as_power_times_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"ns": 0}
    monkeypatch.setattr(time, "perf_counter_ns", lambda: clock["ns"])
    s = GpuSampler(lambda: fleet(None))
    s.begin()
    readings = [5_000_000.0 + 300_000.0 * k for k in range(5)] + [1_000.0 + 300_000.0 * k for k in range(5)]
    for k, mj in enumerate(readings):
        clock["ns"] = k * 1_000_000_000
        s.take(fleet(mj))
    r = s.result()
    assert r["energy_source"] == "counter"
    assert r["energy_j"] == pytest.approx(300.0 * 9)  # the reset interval bridged by 300 W x 1 s
    steps = [b[1] - a[1] for a, b in zip(r["energy_series"], r["energy_series"][1:], strict=False)]
    assert min(steps) >= 0 and max(steps) == pytest.approx(300.0)


def test_without_an_energy_figure_the_sampler_says_power(monkeypatch: pytest.MonkeyPatch) -> None:
    s = GpuSampler(lambda: fleet(None))
    s.begin()
    for _ in range(3):
        s.take(fleet(None))
    r = s.result()
    assert r["energy_series"] == [] and r["energy_source"] in ("power", None)
