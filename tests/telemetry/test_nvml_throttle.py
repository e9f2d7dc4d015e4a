"""Clock-throttle reasons from NVML (the GPU-health alert reads them): the bitmask decoded to names,
the older getter name as a fallback, and n/a (None) where NVML has neither."""

from __future__ import annotations

from console.telemetry.gpu.nvml import NvmlSource, throttle_names
from tests.telemetry.test_nvml import FakeDevice, FakeNvml


class ThrottlingNvml(FakeNvml):
    def __init__(self, mask: int, *, old_name: bool = False) -> None:
        super().__init__([FakeDevice("NVIDIA H100 80GB HBM3", "GPU-aaaa")])
        self.mask = mask
        self.old_name = old_name

    def __getattr__(self, name: str) -> object:
        if name == "nvmlDeviceGetCurrentClocksThrottleReasons" and self.old_name:
            return lambda h: self.mask
        if name == "nvmlDeviceGetCurrentClocksEventReasons" and not self.old_name:
            return lambda h: self.mask
        return super().__getattr__(name)


def test_the_reason_bits_become_names() -> None:
    assert throttle_names(0x4 | 0x20) == ("sw_power_cap", "sw_thermal")
    assert throttle_names(0) == () and throttle_names(None) is None


def test_throttle_reasons_are_read_with_the_new_and_the_old_getter() -> None:
    for old in (False, True):
        (g,) = NvmlSource(ThrottlingNvml(0x40 | 0x1, old_name=old), name_of=lambda _pid: "").collect().gpus
        assert g.throttle_reasons == ("gpu_idle", "hw_thermal")
    (plain,) = NvmlSource(FakeNvml([FakeDevice("x", "GPU-b")]), name_of=lambda _pid: "").collect().gpus
    assert plain.throttle_reasons is None  # neither getter: n/a, not "none active"
