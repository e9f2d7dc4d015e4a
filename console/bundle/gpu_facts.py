"""GPU state for a bug report, read once from NVML: driver and CUDA versions, and per device its
name, UUID, PCI bus, performance state, clocks (now and maximum), the reasons its clocks are held
down, power, temperature, memory, ECC mode and error counts, and its processes.

Every getter is read on its own (one a device lacks is null) and the whole read runs on a worker
thread with a deadline, so a hung driver costs the bundle seconds, not the console. XID events are
seen only by a reader registered when they happen (``console.telemetry.gpu.nvml``): the caller passes
the ones the console's own reader saw.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from console.telemetry.gpu.nvml import process_name
from console.telemetry.host.deadline import DeadlineWorker

NVML_TIMEOUT_S = 5.0
# Throttle ("clocks event") reason bits, by their pynvml constant names; newest names first.
_REASONS = (
    ("gpu_idle", "GpuIdle"),
    ("applications_clocks_setting", "ApplicationsClocksSetting"),
    ("sw_power_cap", "SwPowerCap"),
    ("hw_slowdown", "HwSlowdown"),
    ("sync_boost", "SyncBoost"),
    ("sw_thermal_slowdown", "SwThermalSlowdown"),
    ("hw_thermal_slowdown", "HwThermalSlowdown"),
    ("hw_power_brake_slowdown", "HwPowerBrakeSlowdown"),
    ("display_clock_setting", "DisplayClockSetting"),
)


def _text(v: object) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class _Reader:
    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.errors: dict[str, str] = {}  # getter -> first error, reported once

    def get(self, fn_name: str, *args: Any) -> Any:
        fn = getattr(self.nv, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception as exc:
            self.errors.setdefault(fn_name, str(exc) or type(exc).__name__)
            return None

    def const(self, name: str, default: int) -> int:
        value = getattr(self.nv, name, default)
        return value if isinstance(value, int) else default


def throttle_reasons(mask: int | None, nv: Any) -> list[str] | None:
    """The names of the reason bits set in ``mask`` (``[]``: clocks are not held down)."""
    if mask is None:
        return None
    out = []
    for label, suffix in _REASONS:
        bit = getattr(nv, f"nvmlClocksEventReason{suffix}", getattr(nv, f"nvmlClocksThrottleReason{suffix}", None))
        if isinstance(bit, int) and mask & bit:
            out.append(label)
    return out


def _cuda(v: object) -> str | None:
    return f"{v // 1000}.{v % 1000 // 10}" if isinstance(v, int) and v > 0 else None


def _device(r: _Reader, index: int, name_of: Callable[[int], str]) -> dict[str, Any]:
    nv = r.nv
    h = r.get("nvmlDeviceGetHandleByIndex", index)
    if h is None:
        return {"index": index, "error": r.errors.get("nvmlDeviceGetHandleByIndex", "no handle")}
    clocks = {"sm": r.const("NVML_CLOCK_SM", 1), "mem": r.const("NVML_CLOCK_MEM", 2),
              "graphics": r.const("NVML_CLOCK_GRAPHICS", 0)}  # fmt: skip
    reasons = r.get("nvmlDeviceGetCurrentClocksEventReasons", h)
    if reasons is None:
        reasons = r.get("nvmlDeviceGetCurrentClocksThrottleReasons", h)
    mem = r.get("nvmlDeviceGetMemoryInfo", h)
    util = r.get("nvmlDeviceGetUtilizationRates", h)
    pci = r.get("nvmlDeviceGetPciInfo", h)
    ecc_mode = r.get("nvmlDeviceGetEccMode", h)
    unc, cor = r.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), r.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    vol, agg = r.const("NVML_VOLATILE_ECC", 0), r.const("NVML_AGGREGATE_ECC", 1)
    power = r.get("nvmlDeviceGetPowerUsage", h)
    limit = r.get("nvmlDeviceGetEnforcedPowerLimit", h)
    procs: dict[int, int | None] = {}
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for p in r.get(fn, h) or ():
            pid = getattr(p, "pid", None)
            if isinstance(pid, int):
                used = getattr(p, "usedGpuMemory", None)
                procs[pid] = used if isinstance(used, int) else procs.get(pid)
    pstate = r.get("nvmlDeviceGetPerformanceState", h)
    return {
        "index": index,
        "name": _text(r.get("nvmlDeviceGetName", h)),
        "uuid": _text(r.get("nvmlDeviceGetUUID", h)),
        "pci_bus_id": _text(getattr(pci, "busId", None)),
        "pstate": f"P{pstate}" if isinstance(pstate, int) else None,
        "persistence_mode": r.get("nvmlDeviceGetPersistenceMode", h),
        "clocks_mhz": {k: r.get("nvmlDeviceGetClockInfo", h, v) for k, v in clocks.items()},
        "max_clocks_mhz": {k: r.get("nvmlDeviceGetMaxClockInfo", h, v) for k, v in clocks.items()},
        "throttle_reasons": throttle_reasons(reasons if isinstance(reasons, int) else None, nv),
        "throttle_mask": reasons if isinstance(reasons, int) else None,
        "temperature_c": r.get("nvmlDeviceGetTemperature", h, r.const("NVML_TEMPERATURE_GPU", 0)),
        "power_w": power / 1000 if isinstance(power, int | float) else None,
        "power_limit_w": limit / 1000 if isinstance(limit, int | float) else None,
        "util_percent": getattr(util, "gpu", None),
        "mem_used_bytes": getattr(mem, "used", None),
        "mem_total_bytes": getattr(mem, "total", None),
        "ecc_mode": {"current": ecc_mode[0], "pending": ecc_mode[1]} if isinstance(ecc_mode, list | tuple) else None,
        "ecc_errors": {
            "volatile_uncorrected": r.get("nvmlDeviceGetTotalEccErrors", h, unc, vol),
            "volatile_corrected": r.get("nvmlDeviceGetTotalEccErrors", h, cor, vol),
            "aggregate_uncorrected": r.get("nvmlDeviceGetTotalEccErrors", h, unc, agg),
            "aggregate_corrected": r.get("nvmlDeviceGetTotalEccErrors", h, cor, agg),
        },
        "processes": [
            {"pid": pid, "used_bytes": used, "name": name_of(pid) or None} for pid, used in sorted(procs.items())
        ],
    }


def read_nvml(nv: Any, name_of: Callable[[int], str] = process_name) -> dict[str, Any]:
    """One blocking sweep (call it on a worker thread). ``nv``: the pynvml module, or a fake."""
    try:
        nv.nvmlInit()
    except Exception as exc:
        return {"available": False, "reason": f"NVML unavailable: {exc or type(exc).__name__}"}
    try:
        r = _Reader(nv)
        count = r.get("nvmlDeviceGetCount")
        devices = [_device(r, i, name_of) for i in range(count if isinstance(count, int) else 0)]
        return {
            "available": True,
            "driver_version": _text(r.get("nvmlSystemGetDriverVersion")),
            "cuda_driver_version": _cuda(
                r.get("nvmlSystemGetCudaDriverVersion_v2") or r.get("nvmlSystemGetCudaDriverVersion")
            ),
            "nvml_version": _text(r.get("nvmlSystemGetNVMLVersion")),
            "device_count": count,
            "devices": devices,
            "unsupported": dict(sorted(r.errors.items())),
        }
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:
            pass


def _pynvml() -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pynvml

    return pynvml


def gpu_facts(xid_errors: Mapping[int, Sequence[int]] | None = None, *, nv: Any = None,
              timeout: float = NVML_TIMEOUT_S) -> dict[str, Any]:
    """NVML's facts within ``timeout`` seconds, with the XID events the console saw per GPU index
    (None: no reader was registered, so none can be known)."""
    try:
        module = nv if nv is not None else _pynvml()
    except ImportError as exc:
        return {"available": False, "reason": f"nvidia-ml-py is not installed ({exc})"}
    worker = DeadlineWorker("enginedeck-bundle-nvml")
    try:
        facts: dict[str, Any] = worker.call(lambda: read_nvml(module), timeout)
    except TimeoutError:
        return {"available": False, "reason": f"NVML did not answer within {timeout:g} s"}
    finally:
        worker.close()
    for d in facts.get("devices", ()):
        if xid_errors is None:
            d["xid_errors"] = None
        else:
            d["xid_errors"] = list(xid_errors.get(d["index"], ()))
    facts["xid_note"] = ("XID events the console's NVML reader saw while it ran" if xid_errors is not None else
                         "XID events are seen only by a reader registered when they happen; this bundle had none")
    return facts
