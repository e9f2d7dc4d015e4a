"""scripts/gpu_check.py's energy check, run against a fake NVML with a scripted counter and power
(the real check needs an NVIDIA GPU: it runs there under load for 60 s)."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pynvml
import pytest

ROOT = Path(__file__).resolve().parents[2]


def gpu_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ScriptedGpu:
    """Power follows ``watts(t)`` on a fake clock; the counter is its exact integral times ``gain``
    (gain != 1: a counter that disagrees with the power sensor)."""

    def __init__(self, watts: Callable[[float], float], *, gain: float = 1.0, instant: bool = True,
                 counter: bool = True) -> None:
        self.t = 0.0
        self.watts = watts
        self.gain = gain
        self.counter = counter
        self.NVML_FI_DEV_POWER_INSTANT = pynvml.NVML_FI_DEV_POWER_INSTANT if instant else None
        self.reads = 0

    def monotonic(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(s, 0.0) + 0.004  # each sample a little late, as on a real machine

    def _energy_j(self) -> float:
        n = 2000  # fine midpoint sum of the power curve up to now
        return self.gain * sum(self.watts((i + 0.5) * self.t / n) for i in range(n)) * self.t / n

    def nvmlDeviceGetTotalEnergyConsumption(self, h: object) -> int:
        if not self.counter:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(1000 * self._energy_j())

    def nvmlDeviceGetPowerUsage(self, h: object) -> int:
        self.reads += 1
        return round(1000 * self.watts(self.t))

    def nvmlDeviceGetFieldValues(self, h: object, fields: list[int]) -> list[SimpleNamespace]:
        self.reads += 1
        return [SimpleNamespace(nvmlReturn=0, value=SimpleNamespace(uiVal=round(1000 * self.watts(self.t))))]


def steady(t: float) -> float:
    return 600.0 + 40.0 * math.sin(t / 3.0)  # a loaded GPU, wobbling


def run(gpu: ScriptedGpu, seconds: float = 60.0) -> tuple[str, str]:
    mod = gpu_check()
    status, detail = mod.energy_check(gpu, 0, seconds, monotonic=gpu.monotonic, sleep=gpu.sleep)
    return str(status), str(detail)


def test_counter_and_10hz_integration_agree_over_60s() -> None:
    gpu = ScriptedGpu(steady)
    status, detail = run(gpu)
    assert status == "PASS", detail
    assert "NVML_FI_DEV_POWER_INSTANT at 10 Hz" in detail and "over 60." in detail
    assert 590 <= gpu.reads <= 602  # 10 Hz for 60 s (each sample 4 ms late)
    assert "counter " in detail and "integrated " in detail and "% apart (limit 5%)" in detail


@pytest.mark.parametrize("gain", [1.08, 0.9])
def test_a_counter_more_than_5_percent_off_fails(gain: float) -> None:
    status, detail = run(ScriptedGpu(steady, gain=gain), seconds=10.0)
    assert status == "FAIL", detail


def test_falls_back_to_power_usage_and_warns_without_a_counter() -> None:
    status, detail = run(ScriptedGpu(steady, instant=False), seconds=5.0)
    assert status == "PASS" and "nvmlDeviceGetPowerUsage at 10 Hz" in detail
    status, detail = run(ScriptedGpu(steady, counter=False), seconds=5.0)
    assert status == "WARN" and "not supported" in detail
