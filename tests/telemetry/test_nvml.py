"""NvmlSource / NvmlPoller against a fake *pynvml module* (the only thing replaced) and real pynvml.

The fake keeps pynvml's real constants and error classes; only the device functions are scripted.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from console.model import SourceState
from console.telemetry.gpu.nvml import NvmlPoller, NvmlSource
from console.telemetry.host.deadline import DeadlineExceeded, DeadlineWorker, WorkerBusy

GiB = 1024**3
NS = pynvml.NVML_ERROR_NOT_SUPPORTED


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml maps the code to its subclass (NVMLError_NotSupported, ...)


@dataclass
class FakeDevice:
    name: str
    uuid: str
    util: tuple[int, int] | int = (0, 0)  # (gpu, memory) or an NVML error code
    mem: tuple[int, int] | int = (0, 80 * GiB)  # (used, total)
    mem_v2: bool = True
    temp: int = 40
    power_mw: int = 100_000
    limit_mw: int = 700_000
    sm_clock: int = 1980
    mem_clock: int = 2619
    ecc: int = 0
    compute: list[tuple[int, int | None]] = field(default_factory=list)
    graphics: list[tuple[int, int | None]] = field(default_factory=list)
    handle_error: int | None = None
    energy_mj: int = 123_456_789  # total-energy counter; negative: NotSupported (pre-Volta)
    mig: tuple[int, int] | int = NS  # (current, pending) MIG mode, or an NVML error code


class FakeNvml:
    """Stands in for the pynvml module object."""

    def __init__(self, devices: list[FakeDevice], *, init_error: int | None = None) -> None:
        self.devices = devices
        self.init_error = init_error
        self.count_error: int | None = None
        self.calls: dict[str, int] = {}
        self.hang = threading.Event()  # set: nvmlDeviceGetCount blocks until `release` is set
        self.release = threading.Event()
        self.events: list[SimpleNamespace] = []
        self.registered: list[str] = []

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes come from the real module; its functions never do.
        value = getattr(pynvml, name)
        if callable(value) and not isinstance(value, type):
            raise AttributeError(name)
        return value

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def _dev(self, h: int) -> FakeDevice:
        return self.devices[h]

    def nvmlInit(self) -> None:
        self._count("init")
        if self.init_error is not None:
            raise nvml_error(self.init_error)

    def nvmlShutdown(self) -> None:
        self._count("shutdown")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlDeviceGetCount(self) -> int:
        self._count("count")
        if self.hang.is_set():
            self.release.wait()
        if self.count_error is not None:
            raise nvml_error(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if self.devices[i].handle_error is not None:
            raise nvml_error(self.devices[i].handle_error)  # type: ignore[arg-type]
        return i

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._dev(h).name

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._dev(h).uuid

    def nvmlDeviceGetUtilizationRates(self, h: int) -> SimpleNamespace:
        u = self._dev(h).util
        if isinstance(u, int):
            raise nvml_error(u)
        return SimpleNamespace(gpu=u[0], memory=u[1])

    def nvmlDeviceGetMemoryInfo(self, h: int, version: int | None = None) -> SimpleNamespace:
        d = self._dev(h)
        self._count(f"mem-v{2 if version else 1}")
        if isinstance(d.mem, int):
            raise nvml_error(d.mem)
        if version and not d.mem_v2:
            raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        used, total = d.mem
        # v1 "used" includes the driver-reserved part; v2 does not (as on real drivers).
        return SimpleNamespace(used=used if version else used + 300 * 1024**2, total=total)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._dev(h).temp

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        self._count("power")
        v = self._dev(h).power_mw
        if v < 0:
            raise nvml_error(NS)
        return v

    def nvmlDeviceGetTotalEnergyConsumption(self, h: int) -> int:
        self._count("energy")
        v = self._dev(h).energy_mj
        if v < 0:
            raise nvml_error(NS)
        return v

    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        m = self._dev(h).mig
        if isinstance(m, int):
            raise nvml_error(m)
        return list(m)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: int) -> int:
        return self._dev(h).limit_mw

    def nvmlDeviceGetClockInfo(self, h: int, kind: int) -> int:
        d = self._dev(h)
        v = d.sm_clock if kind == pynvml.NVML_CLOCK_SM else d.mem_clock
        if v < 0:
            raise nvml_error(NS)
        return v

    def nvmlDeviceGetTotalEccErrors(self, h: int, etype: int, counter: int) -> int:
        self._count("ecc")
        assert (etype, counter) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)
        v = self._dev(h).ecc
        if v < 0:
            raise nvml_error(NS)
        return v

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).compute]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self._dev(h).graphics]

    # XID events
    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceGetSupportedEventTypes(self, h: int) -> int:
        return int(pynvml.nvmlEventTypeXidCriticalError) | 0x1

    def nvmlDeviceRegisterEvents(self, h: int, mask: int, es: str) -> None:
        self.registered.append(self._dev(h).uuid)

    def nvmlEventSetWait(self, es: str, timeout_ms: int) -> SimpleNamespace:
        assert timeout_ms == 0  # never blocks a tick
        if not self.events:
            raise nvml_error(pynvml.NVML_ERROR_TIMEOUT)
        return self.events.pop(0)

    def nvmlEventSetFree(self, es: str) -> None:
        self._count("eventfree")


def two_gpus() -> FakeNvml:
    return FakeNvml(
        [
            FakeDevice(
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-aaaa",
                util=(87, 41),
                mem=(70 * GiB, 80 * GiB),
                temp=61,
                power_mw=512_345,
                limit_mw=700_000,
                sm_clock=1755,
                mem_clock=2619,
                ecc=0,
                compute=[(4242, 60 * GiB), (4343, None)],
                graphics=[(4242, 60 * GiB)],
            ),
            FakeDevice(
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-bbbb",
                util=NS,
                mem=(1 * GiB, 80 * GiB),
                mem_v2=False,
                power_mw=-1,
                sm_clock=-1,
                ecc=-1,
            ),
        ]
    )


def names(pid: int) -> str:
    return {4242: "python3", 4343: "VLLM::Worker"}.get(pid, "")


@pytest.fixture
def no_output(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fails the test if anything reached fd 1/2 (C level included), a log record or a warning."""
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out, err)
    records = caplog.get_records("setup") + caplog.get_records("call")
    # anything that could reach stderr (lastResort prints WARNING+), and anything of ours at all
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING or r.name.startswith("console")] == []
    assert [str(w.message) for w in caught] == []


def test_two_gpus_all_fields(no_output: None) -> None:
    fake = two_gpus()
    src = NvmlSource(fake, name_of=names, clock=lambda: 1000.0)
    fleet = src.collect()
    assert fleet.freshness.state is SourceState.OK and fleet.freshness.updated_at == 1000.0
    assert fleet.source == "nvml" and fleet.driver_version == "570.86.15" and fleet.unavailable_reason == ""
    g0, g1 = fleet.gpus
    assert (g1.index, g1.uuid) == (1, "GPU-bbbb")
    assert (g0.index, g0.name, g0.uuid, g0.taken_at) == (0, "NVIDIA H100 80GB HBM3", "GPU-aaaa", 1000.0)
    assert (g0.util_percent, g0.mem_util_percent) == (87.0, 41.0)
    assert (g0.mem_used_bytes, g0.mem_total_bytes) == (70 * GiB, 80 * GiB)  # v2: without reserved memory
    assert g0.mem_percent == pytest.approx(87.5)
    assert g0.temperature_c == 61.0
    assert g0.power_w == pytest.approx(512.345) and g0.power_limit_w == pytest.approx(700.0)
    assert (g0.sm_clock_mhz, g0.mem_clock_mhz, g0.ecc_errors) == (1755, 2619, 0)
    # compute + graphics merged by PID; usedGpuMemory None stays None (not 0)
    assert [(p.pid, p.used_bytes, p.name) for p in g0.processes] == [
        (4242, 60 * GiB, "python3"),
        (4343, None, "VLLM::Worker"),
    ]
    assert all(p.container is None and p.engine is None for p in g0.processes)


def test_not_supported_fields_are_none_only_for_that_field(no_output: None) -> None:
    fake = two_gpus()
    src = NvmlSource(fake, name_of=names)
    g1 = src.collect().gpus[1]
    assert g1.util_percent is None and g1.mem_util_percent is None
    assert g1.power_w is None and g1.sm_clock_mhz is None and g1.ecc_errors is None
    # the rest of the device is still read
    assert g1.name == "NVIDIA H100 80GB HBM3" and g1.temperature_c == 40.0
    assert g1.power_limit_w == pytest.approx(700.0) and g1.mem_clock_mhz == 2619
    # v2 memory not in this driver: falls back to v1 (which includes the reserved part)
    assert (g1.mem_used_bytes, g1.mem_total_bytes) == (1 * GiB + 300 * 1024**2, 80 * GiB)
    # unsupported getters are not called again on later sweeps
    before = dict(fake.calls)
    src.collect()
    assert fake.calls["power"] - before["power"] == 1  # GPU 0 only
    assert fake.calls["ecc"] - before["ecc"] == 1
    assert fake.calls["mem-v2"] - before["mem-v2"] == 1  # v2 not retried on GPU 1


class OldNvml(FakeNvml):
    """A pynvml that predates some getters (they are simply absent from the module)."""

    MISSING = frozenset({"nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetEnforcedPowerLimit", "nvmlEventSetCreate"})

    def __getattribute__(self, name: str) -> Any:
        if name in OldNvml.MISSING:
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_getters_missing_from_an_old_pynvml_are_na(no_output: None) -> None:
    fleet = NvmlSource(OldNvml(two_gpus().devices), name_of=names).collect()
    g0 = fleet.gpus[0]
    assert fleet.freshness.state is SourceState.OK
    assert g0.ecc_errors is None and g0.xid_errors == ()
    assert g0.power_limit_w is None  # no fallback getter in the fake either
    assert g0.util_percent == 87.0 and g0.power_w == pytest.approx(512.345) and len(g0.processes) == 2


def test_init_once_shutdown_on_close() -> None:
    fake = two_gpus()
    src = NvmlSource(fake, name_of=names)
    for _ in range(3):
        src.collect()
    assert fake.calls["init"] == 1
    src.close()
    assert fake.calls["shutdown"] == 1
    src.close()
    assert fake.calls["shutdown"] == 1


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML unavailable: NVML Shared Library Not Found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVML unavailable: Driver Not Loaded"),
    ],
)
def test_library_or_driver_missing(code: int, reason: str, no_output: None) -> None:
    fake = FakeNvml([], init_error=code)
    src = NvmlSource(fake)
    fleet = src.collect()
    assert fleet.gpus == ()
    assert fleet.unavailable_reason == reason
    assert fleet.freshness.state is SourceState.UNAVAILABLE and fleet.freshness.reason == reason
    src.close()
    assert "shutdown" not in fake.calls  # never initialised, never shut down


def test_unavailable_init_is_retried_only_after_the_interval() -> None:
    now = [0.0]
    fake = FakeNvml([FakeDevice(name="X", uuid="GPU-x")], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    src = NvmlSource(fake, monotonic=lambda: now[0], retry_unavailable_s=30.0)
    src.collect()
    src.collect()
    assert fake.calls["init"] == 1
    fake.init_error = None  # the driver got loaded
    now[0] = 31.0
    fleet = src.collect()
    assert fake.calls["init"] == 2 and fleet.freshness.state is SourceState.OK and len(fleet.gpus) == 1


def test_no_gpu_is_unavailable(no_output: None) -> None:
    fleet = NvmlSource(FakeNvml([])).collect()
    assert fleet.unavailable_reason == "NVML unavailable: no NVIDIA GPU found"


def test_lost_gpu_keeps_its_row() -> None:
    fake = two_gpus()
    fake.devices[1].handle_error = pynvml.NVML_ERROR_GPU_IS_LOST
    fleet = NvmlSource(fake, name_of=names).collect()
    assert fleet.gpus[0].util_percent == 87.0
    assert fleet.gpus[1].name == "GPU 1 (GPU is lost)" and fleet.gpus[1].util_percent is None


def test_sweep_error_keeps_last_values_as_stale(no_output: None) -> None:
    t = [100.0]
    fake = two_gpus()
    src = NvmlSource(fake, name_of=names, clock=lambda: t[0])
    good = src.collect()
    fake.count_error = pynvml.NVML_ERROR_UNKNOWN
    t[0] = 101.0
    bad = src.collect()
    t[0] = 102.0
    bad2 = src.collect()
    assert bad.gpus == good.gpus
    assert bad.freshness.state is SourceState.STALE and bad.freshness.reason == "NVML error: Unknown Error"
    assert bad.freshness.updated_at == 100.0 and bad.freshness.stale_since == 101.0
    assert bad2.freshness.stale_since == 101.0  # first failure of the run
    fake.count_error = None
    assert src.collect().freshness.state is SourceState.OK


def test_xid_events_land_on_their_gpu() -> None:
    fake = two_gpus()
    src = NvmlSource(fake, name_of=names)
    src.collect()
    assert fake.registered == ["GPU-aaaa", "GPU-bbbb"]
    xid = int(pynvml.nvmlEventTypeXidCriticalError)
    fake.events = [
        SimpleNamespace(device=1, eventType=xid, eventData=79),
        SimpleNamespace(device=0, eventType=0x1, eventData=5),  # not an XID event
        SimpleNamespace(device=1, eventType=xid, eventData=48),
    ]
    fleet = src.collect()
    assert fleet.gpus[0].xid_errors == () and fleet.gpus[1].xid_errors == (79, 48)
    assert src.collect().gpus[1].xid_errors == (79, 48)  # kept (bounded history), not only one tick
    src.close()
    assert fake.calls["eventfree"] == 1


def wait_until_idle(worker: DeadlineWorker, limit_s: float = 10.0) -> None:
    end = time.monotonic() + limit_s
    while worker.busy:
        assert time.monotonic() < end, "worker never finished"
        time.sleep(0.01)


def test_hung_call_gives_stale_then_recovers(no_output: None) -> None:
    fake = two_gpus()
    poller = NvmlPoller(NvmlSource(fake, name_of=names), timeout_s=0.5)
    try:
        good = poller.poll()
        assert good.freshness.state is SourceState.OK
        worker_thread = poller.worker.thread
        threads_before = threading.active_count()

        fake.hang.set()
        t0 = time.monotonic()
        stale = poller.poll()
        assert time.monotonic() - t0 >= 0.5
        assert stale.freshness.state is SourceState.STALE
        assert stale.freshness.reason == "NVML call timed out after 0.5 s"
        assert stale.freshness.stale_since is not None and stale.freshness.updated_at == good.freshness.updated_at
        assert stale.gpus == good.gpus  # last values kept
        assert poller.hung

        # While the call is stuck, further polls answer at once and start nothing new.
        t1 = time.monotonic()
        again = poller.poll()
        assert time.monotonic() - t1 < 0.4
        assert again.freshness.reason == "NVML call timed out after 0.5 s"
        assert again.freshness.stale_since == stale.freshness.stale_since
        assert fake.calls["count"] == 2  # one good sweep + the hung one; no second call queued
        assert poller.worker.thread is worker_thread and threading.active_count() == threads_before

        # The driver comes back: the stuck call ends and the next poll is fresh again.
        fake.hang.clear()
        fake.release.set()
        wait_until_idle(poller.worker)
        fresh = poller.poll()
        assert fresh.freshness.state is SourceState.OK and fresh.freshness.stale_since is None
        assert fresh.gpus[0].util_percent == 87.0
        assert poller.worker.thread is worker_thread
    finally:
        fake.release.set()
        poller.close()


def test_hang_on_the_first_call_gives_an_empty_stale_fleet() -> None:
    fake = two_gpus()
    fake.hang.set()
    poller = NvmlPoller(NvmlSource(fake), timeout_s=0.3, init_timeout_s=0.6)
    try:
        fleet = poller.poll()
        assert fleet.gpus == () and fleet.freshness.state is SourceState.STALE
        # the first call (nvmlInit + first sweep) gets the longer init deadline
        assert fleet.freshness.updated_at is None and fleet.freshness.reason == "NVML call timed out after 0.6 s"
    finally:
        fake.release.set()
        poller.close()


async def test_async_poll_hang_and_recovery(no_output: None) -> None:
    fake = two_gpus()
    poller = NvmlPoller(NvmlSource(fake, name_of=names), timeout_s=0.5)
    try:
        assert (await poller.apoll()).freshness.state is SourceState.OK
        fake.hang.set()
        stale = await poller.apoll()
        assert stale.freshness.state is SourceState.STALE and stale.gpus[0].util_percent == 87.0
        assert (await poller.apoll()).freshness.state is SourceState.STALE
        assert fake.calls["count"] == 2
        fake.hang.clear()
        fake.release.set()
        wait_until_idle(poller.worker)
        assert (await poller.apoll()).freshness.state is SourceState.OK
    finally:
        fake.release.set()
        poller.close()


def test_close_while_hung_does_not_block_or_call_nvml() -> None:
    fake = two_gpus()
    fake.hang.set()
    poller = NvmlPoller(NvmlSource(fake), timeout_s=0.2, init_timeout_s=0.2)
    poller.poll()
    t0 = time.monotonic()
    poller.close()
    assert time.monotonic() - t0 < 0.5
    assert "shutdown" not in fake.calls
    closed = poller.poll()
    assert closed.freshness.state is SourceState.STALE and closed.freshness.reason == "NVML source closed"
    fake.release.set()
    wait_until_idle(poller.worker)
    assert "shutdown" not in fake.calls


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is installed here (scripts/gpu_check.py covers it)")
def test_real_pynvml_without_driver_is_unavailable_and_silent(no_output: None) -> None:
    poller = NvmlPoller(timeout_s=5.0)  # the real pynvml module, the real library lookup
    try:
        fleet = poller.poll()
    finally:
        poller.close()
    assert fleet.gpus == ()
    assert fleet.freshness.state is SourceState.UNAVAILABLE
    assert fleet.unavailable_reason == "NVML unavailable: NVML Shared Library Not Found"
    assert fleet.freshness.reason == fleet.unavailable_reason


# -- the deadline worker itself ------------------------------------------------------------------


def test_worker_runs_calls_in_one_thread_and_propagates_errors() -> None:
    worker = DeadlineWorker("t")
    try:
        idents = {worker.call(threading.get_ident, 5.0) for _ in range(3)}
        assert len(idents) == 1 and threading.get_ident() not in idents

        def boom() -> None:
            raise ValueError("bad")

        with pytest.raises(ValueError, match="bad"):
            worker.call(boom, 5.0)
        assert worker.call(lambda: 7, 5.0) == 7
    finally:
        worker.close()
    assert worker.thread is not None
    worker.thread.join(5.0)
    assert not worker.thread.is_alive()


def test_worker_deadline_and_busy() -> None:
    gate = threading.Event()
    worker = DeadlineWorker("t")
    try:
        with pytest.raises(DeadlineExceeded):
            worker.call(gate.wait, 0.2)
        with pytest.raises(WorkerBusy):
            worker.submit(lambda: 1)
        busy_for = worker.busy_for
        assert busy_for is not None and busy_for >= 0.2
        gate.set()
        wait_until_idle(worker)
        assert worker.call(lambda: 2, 5.0) == 2
    finally:
        gate.set()
        worker.close()


def test_worker_async_late_result_after_the_loop_closed_is_silent(no_output: None) -> None:
    gate = threading.Event()
    worker = DeadlineWorker("t")

    async def main() -> None:
        with pytest.raises(DeadlineExceeded):
            await worker.acall(gate.wait, 0.2)

    try:
        asyncio.run(main())  # the loop is closed when the stuck call finally returns
        gate.set()
        wait_until_idle(worker)
        assert worker.call(lambda: 3, 5.0) == 3
    finally:
        gate.set()
        worker.close()
