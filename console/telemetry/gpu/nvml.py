"""GPU telemetry from NVML (nvidia-ml-py, ``import pynvml``).

``NvmlSource.collect()`` is blocking and meant for a worker thread; ``NvmlPoller`` runs it on one
dedicated thread with a deadline, so a hung driver marks the GPU panel stale instead of freezing
the app (btop #1084). Rules that keep a full-screen app intact:

* Nothing is ever printed or logged: failures become ``GpuFleet.unavailable_reason`` /
  ``Freshness.reason`` (nvitop's library logs NVML errors to stderr, which corrupts the screen).
* Every field is read on its own: ``NotSupported`` (or any other NVML error) on one getter gives
  ``None`` for that field only. Getters a device does not support are not called again.
* ``nvmlInit`` once (retried now and then while unavailable), ``nvmlShutdown`` on ``close``.
"""

from __future__ import annotations

import time
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psutil

from console.model import Freshness, GpuFleet, GpuProcess, GpuSnapshot, SourceState
from console.telemetry.gpu.power_integrator import PowerIntegrator
from console.telemetry.host.deadline import DeadlineExceeded, DeadlineWorker, WorkerBusy, WorkerClosed

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_INIT_TIMEOUT_S = 10.0
# NVML's clock-event ("throttle") reason bits, by the names GpuSnapshot.throttle_reasons uses.
THROTTLE_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                    0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
                    0x100: "display_clocks"}
XID_HISTORY = 16  # XID codes kept per GPU (most recent last)
_XID_DRAIN_MAX = 64  # events read per collect at most, so a storm cannot stall a tick


def unavailable_fleet(reason: str) -> GpuFleet:
    """The fleet shown when NVML cannot work here; ``reason`` without the "NVML unavailable" prefix."""
    text = f"NVML unavailable: {reason}"
    return GpuFleet(
        source="nvml",
        unavailable_reason=text,
        freshness=Freshness(state=SourceState.UNAVAILABLE, reason=text),
    )


def mark_stale(fleet: GpuFleet, reason: str, stale_since: float) -> GpuFleet:
    """``fleet`` with its last values kept but flagged stale (``updated_at`` stays the last success)."""
    return replace(
        fleet,
        freshness=Freshness(
            state=SourceState.STALE,
            updated_at=fleet.freshness.updated_at,
            stale_since=stale_since,
            reason=reason,
        ),
    )


def process_name(pid: int) -> str:
    """Short process name, or "" when the PID is not visible here (another PID namespace, gone)."""
    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError, ValueError):
        return ""


def _load_pynvml() -> Any:
    # The deprecated `pynvml` wrapper package emits a FutureWarning on import; keep it off the screen.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pynvml

    return pynvml


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def throttle_names(mask: Any) -> tuple[str, ...] | None:
    """The active reasons of an NVML clock-event bitmask (None: unknown)."""
    bits = _int(mask)
    if bits is None:
        return None
    return tuple(name for bit, name in THROTTLE_REASONS.items() if bits & bit)


class NvmlSource:
    """Reads every GPU through NVML. ``collect`` never raises and never prints."""

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        name_of: Callable[[int], str] = process_name,
        xid_events: bool = True,
        retry_unavailable_s: float = 30.0,
    ) -> None:
        """``nvml`` replaces the pynvml module (tests); by default pynvml is imported on first use."""
        self._nvml: Any = nvml
        self._clock = clock
        self._monotonic = monotonic
        self._name_of = name_of
        self._want_xid = xid_events
        self._retry_s = retry_unavailable_s
        self._initialised = False
        self._unavailable: GpuFleet | None = None
        self._unavailable_at = 0.0
        self._unsupported: set[tuple[int, str]] = set()  # (device index, field) not to call again
        self._mem_v2_ok: dict[int, bool] = {}
        self._event_set: Any = None
        self._events_registered = False
        self._xids: dict[int, deque[int]] = {}
        self._last: GpuFleet | None = None
        self._stale_since: float | None = None
        self._integrator: PowerIntegrator | None = None  # devices without the energy counter

    @property
    def initialised(self) -> bool:
        return self._initialised

    def nvml_module(self) -> Any:
        """The pynvml module this source uses (imported and initialised on demand); for checks that
        call NVML directly (scripts/gpu_check.py). NVML calls may come from any thread."""
        self._ensure_init()
        return self._nvml

    # -- lifecycle -------------------------------------------------------------------------------

    def _ensure_init(self) -> GpuFleet | None:
        """None when NVML is usable, else the unavailable fleet."""
        if self._initialised:
            return None
        if self._unavailable is not None and self._monotonic() - self._unavailable_at < self._retry_s:
            return self._unavailable
        try:
            if self._nvml is None:
                self._nvml = _load_pynvml()
        except ImportError as exc:
            return self._set_unavailable(f"nvidia-ml-py is not installed ({_reason(exc)})")
        except Exception as exc:  # a broken install must not take the app down
            return self._set_unavailable(f"pynvml failed to import ({type(exc).__name__}: {_reason(exc)})")
        try:
            self._nvml.nvmlInit()
        except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, OSError, ...
            return self._set_unavailable(_reason(exc))
        self._initialised = True
        self._unavailable = None
        return None

    def _set_unavailable(self, reason: str) -> GpuFleet:
        self._unavailable = unavailable_fleet(reason)
        self._unavailable_at = self._monotonic()
        return self._unavailable

    def close(self) -> None:
        """Free the event set and shut NVML down (only if this source initialised it)."""
        if self._integrator is not None:
            self._integrator.close()
            self._integrator = None
        if not self._initialised:
            return
        nv = self._nvml
        if self._event_set is not None:
            try:
                nv.nvmlEventSetFree(self._event_set)
            except Exception:
                pass
            self._event_set = None
        try:
            nv.nvmlShutdown()
        except Exception:
            pass
        self._initialised = False
        self._events_registered = False

    # -- collection ------------------------------------------------------------------------------

    def collect(self) -> GpuFleet:
        """One sweep over all GPUs. Blocking (NVML may block); call it from a worker thread."""
        unavailable = self._ensure_init()
        if unavailable is not None:
            return unavailable
        nv = self._nvml
        now = self._clock()
        try:
            count = int(nv.nvmlDeviceGetCount())
        except Exception as exc:
            return self._failed(f"NVML error: {_reason(exc)}", now)
        if count == 0:
            return unavailable_fleet("no NVIDIA GPU found")
        handles: dict[int, Any] = {}
        errors: dict[int, str] = {}
        for index in range(count):
            try:
                handles[index] = nv.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:  # e.g. GPU is lost: show the slot, not a missing row
                errors[index] = _reason(exc)
        uuids = {i: _text(self._get(i, "uuid", "nvmlDeviceGetUUID", h)) for i, h in handles.items()}
        if self._want_xid:
            self._read_xid_events(handles, uuids)
        gpus: list[GpuSnapshot] = []
        for index in range(count):
            if index in errors:
                gpus.append(GpuSnapshot(index=index, name=f"GPU {index} ({errors[index]})", uuid="", taken_at=now))
            else:
                gpus.append(self._device(index, handles[index], uuids[index], now))
        driver = self._get(-1, "driver", "nvmlSystemGetDriverVersion")
        fleet = GpuFleet(
            gpus=tuple(gpus),
            freshness=Freshness(state=SourceState.OK, updated_at=now),
            driver_version=_text(driver) or None,
            source="nvml",
        )
        self._last = fleet
        self._stale_since = None
        return fleet

    def _failed(self, reason: str, now: float) -> GpuFleet:
        if self._stale_since is None:
            self._stale_since = now
        base = self._last if self._last is not None else GpuFleet(source="nvml")
        return mark_stale(base, reason, self._stale_since)

    def _get(self, index: int, field: str, fn_name: str, *args: Any) -> Any:
        """One guarded getter: any error -> None; NotSupported/FunctionNotFound remembered.

        Looked up by name, so a getter an older pynvml lacks is simply n/a."""
        key = (index, field)
        fn = getattr(self._nvml, fn_name, None)
        if fn is None or key in self._unsupported:
            return None
        try:
            return fn(*args)
        except Exception as exc:
            if self._permanent(exc):
                self._unsupported.add(key)
            return None

    def _permanent(self, exc: Exception) -> bool:
        nv = self._nvml
        kinds = tuple(
            k
            for k in (getattr(nv, "NVMLError_NotSupported", None), getattr(nv, "NVMLError_FunctionNotFound", None))
            if isinstance(k, type)
        )
        return bool(kinds) and isinstance(exc, kinds)

    def _device(self, index: int, h: Any, uuid: str, now: float) -> GpuSnapshot:
        nv = self._nvml
        name = _text(self._get(index, "name", "nvmlDeviceGetName", h)) or f"GPU {index}"
        util = self._get(index, "util", "nvmlDeviceGetUtilizationRates", h)
        used, total = self._memory(index, h)
        temp = self._get(index, "temp", "nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        if temp is None:
            temp = self._get(index, "tempv", "nvmlDeviceGetTemperatureV", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0))
        power_mw = self._get(index, "power", "nvmlDeviceGetPowerUsage", h)
        limit_mw = self._get(index, "limit", "nvmlDeviceGetEnforcedPowerLimit", h)
        if limit_mw is None:
            limit_mw = self._get(index, "limit2", "nvmlDeviceGetPowerManagementLimit", h)
        sm_clock = self._get(index, "smclk", "nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_SM", 1))
        mem_clock = self._get(index, "memclk", "nvmlDeviceGetClockInfo", h, getattr(nv, "NVML_CLOCK_MEM", 2))
        ecc = self._get(
            index,
            "ecc",
            "nvmlDeviceGetTotalEccErrors",
            h,
            getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
            getattr(nv, "NVML_VOLATILE_ECC", 0),
        )
        energy_mj, energy_source = self._energy(index, h)
        mig = self._get(index, "mig", "nvmlDeviceGetMigMode", h)  # [current, pending]
        mig_on = None if not isinstance(mig, list | tuple) or not mig else bool(_int(mig[0]))
        reasons = self._get(index, "events", "nvmlDeviceGetCurrentClocksEventReasons", h)
        if reasons is None:  # the name before NVML 12.2
            reasons = self._get(index, "throttle", "nvmlDeviceGetCurrentClocksThrottleReasons", h)
        return GpuSnapshot(
            index=index,
            name=name,
            uuid=uuid,
            taken_at=now,
            throttle_reasons=throttle_names(reasons),
            util_percent=_num(getattr(util, "gpu", None)),
            mem_util_percent=_num(getattr(util, "memory", None)),
            mem_used_bytes=used,
            mem_total_bytes=total,
            temperature_c=_num(temp),
            power_w=None if _num(power_mw) is None else float(power_mw) / 1000.0,
            power_limit_w=None if _num(limit_mw) is None else float(limit_mw) / 1000.0,
            sm_clock_mhz=_int(sm_clock),
            mem_clock_mhz=_int(mem_clock),
            ecc_errors=_int(ecc),
            xid_errors=tuple(self._xids.get(index, ())),
            processes=self._processes(index, h),
            energy_mj=energy_mj,
            energy_source=energy_source if energy_mj is not None else "",
            mig=mig_on,
        )

    def _energy(self, index: int, h: Any) -> tuple[float | None, str]:
        """The total-energy counter (mJ), or, where the device or pynvml lacks it, power integrated
        at 10 Hz in a thread of its own (None until it has two samples)."""
        if (index, "energy") not in self._unsupported and hasattr(self._nvml, "nvmlDeviceGetTotalEnergyConsumption"):
            mj = _num(self._get(index, "energy", "nvmlDeviceGetTotalEnergyConsumption", h))
            if mj is not None or (index, "energy") not in self._unsupported:
                return mj, "counter"  # None here: a passing error, try the counter again next time
        if (index, "power") in self._unsupported:
            return None, ""
        if self._integrator is None:
            self._integrator = PowerIntegrator(self._nvml)
        if not self._integrator.tracking(index):
            self._integrator.add(index, h)
        return self._integrator.energy_mj(index), "integrated"

    def _memory(self, index: int, h: Any) -> tuple[int | None, int | None]:
        nv = self._nvml
        info: Any = None
        # v2 reports "used" without the driver-reserved part (what nvidia-smi shows); not on old drivers.
        version = getattr(nv, "nvmlMemory_v2", None)
        if version is not None and self._mem_v2_ok.get(index, True):
            try:
                info = nv.nvmlDeviceGetMemoryInfo(h, version=version)
                self._mem_v2_ok[index] = True
            except Exception:
                self._mem_v2_ok[index] = False
                info = None
        if info is None:
            info = self._get(index, "mem", "nvmlDeviceGetMemoryInfo", h)
        if info is None:
            return None, None
        return _int(getattr(info, "used", None)), _int(getattr(info, "total", None))

    def _processes(self, index: int, h: Any) -> tuple[GpuProcess, ...]:
        merged: dict[int, int | None] = {}
        for kind in ("Compute", "Graphics"):
            procs = self._get(index, f"procs-{kind}", f"nvmlDeviceGet{kind}RunningProcesses", h)
            if procs is None:  # v3 struct missing in an old driver: the v2 call still works there
                procs = self._get(index, f"procs-{kind}-v2", f"nvmlDeviceGet{kind}RunningProcesses_v2", h)
            for p in procs or ():
                pid = _int(getattr(p, "pid", None))
                if pid is None:
                    continue
                used = _int(getattr(p, "usedGpuMemory", None))  # None: not available (e.g. MIG, WDDM)
                if pid in merged:
                    prev = merged[pid]
                    used = prev if used is None else (used if prev is None else max(prev, used))
                merged[pid] = used
        return tuple(
            GpuProcess(pid=pid, used_bytes=used, name=self._name_of(pid)) for pid, used in sorted(merged.items())
        )

    def _read_xid_events(self, handles: dict[int, Any], uuids: dict[int, str]) -> None:
        """Drain critical XID events without waiting (timeout 0).

        Registration may be refused (not supported, no permission, some containers); then XIDs stay
        empty and nothing else is affected.
        """
        nv = self._nvml
        xid_mask = getattr(nv, "nvmlEventTypeXidCriticalError", None)
        if xid_mask is None:
            return
        if not self._events_registered:
            self._events_registered = True  # one attempt per init
            try:
                self._event_set = nv.nvmlEventSetCreate()
            except Exception:
                self._event_set = None
                return
            registered = 0
            for h in handles.values():
                try:
                    if int(nv.nvmlDeviceGetSupportedEventTypes(h)) & xid_mask:
                        nv.nvmlDeviceRegisterEvents(h, xid_mask, self._event_set)
                        registered += 1
                except Exception:
                    continue
            if not registered:
                try:
                    nv.nvmlEventSetFree(self._event_set)
                except Exception:
                    pass
                self._event_set = None
        if self._event_set is None:
            return
        by_uuid = {u: i for i, u in uuids.items() if u}
        for _ in range(_XID_DRAIN_MAX):
            try:
                data = nv.nvmlEventSetWait(self._event_set, 0)
            except Exception:  # NVMLError_Timeout: no pending event (or the set broke; try next tick)
                return
            if not int(getattr(data, "eventType", 0)) & xid_mask:
                continue
            try:
                index = by_uuid.get(_text(nv.nvmlDeviceGetUUID(data.device)))
            except Exception:
                index = None
            if index is None:
                continue
            self._xids.setdefault(index, deque(maxlen=XID_HISTORY)).append(int(data.eventData))


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


class NvmlPoller:
    """``NvmlSource`` behind a deadline: one dedicated daemon thread, never two calls at once.

    ``poll()`` (blocking, at most ``timeout_s``, or ``init_timeout_s`` until NVML is initialised)
    and ``apoll()`` (awaitable) return the newest fleet; when NVML overruns the deadline, or is
    still stuck in an earlier call, they return the last fleet marked ``STALE`` with reason
    ``"NVML call timed out after 2.0 s"`` and ``stale_since`` set at the first failure. The stuck
    thread is left alone; once it returns the next poll collects normally again.
    """

    def __init__(
        self,
        source: NvmlSource | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        init_timeout_s: float = DEFAULT_INIT_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source if source is not None else NvmlSource()
        self.timeout_s = timeout_s
        # nvmlInit plus the first sweep can take seconds on a multi-GPU box without persistence mode.
        self.init_timeout_s = max(timeout_s, init_timeout_s)
        self._clock = clock
        self._worker = DeadlineWorker("enginedeck-nvml")
        self._last: GpuFleet | None = None
        self._stale_since: float | None = None

    @property
    def worker(self) -> DeadlineWorker:
        return self._worker

    @property
    def hung(self) -> bool:
        """True while an NVML call is still running after its deadline (or right now)."""
        return self._worker.busy

    @property
    def last(self) -> GpuFleet | None:
        return self._last

    @property
    def timeout_reason(self) -> str:
        return f"NVML call timed out after {self._deadline():.1f} s"

    def _deadline(self) -> float:
        return self.timeout_s if self.source.initialised else self.init_timeout_s

    def poll(self) -> GpuFleet:
        deadline = self._deadline()
        try:
            fleet = self._worker.call(self.source.collect, deadline)
        except DeadlineExceeded as exc:
            return self._stale(f"NVML call timed out after {exc.timeout_s:.1f} s")
        except WorkerBusy:
            return self._stale(self.timeout_reason)
        except WorkerClosed:
            return self._stale("NVML source closed")
        except Exception as exc:  # collect() does not raise; belt and braces for a custom source
            return self._stale(f"NVML error: {_reason(exc)}")
        return self._accept(fleet)

    async def apoll(self) -> GpuFleet:
        try:
            fleet = await self._worker.acall(self.source.collect, self._deadline())
        except DeadlineExceeded as exc:
            return self._stale(f"NVML call timed out after {exc.timeout_s:.1f} s")
        except WorkerBusy:
            return self._stale(self.timeout_reason)
        except WorkerClosed:
            return self._stale("NVML source closed")
        except Exception as exc:
            return self._stale(f"NVML error: {_reason(exc)}")
        return self._accept(fleet)

    def close(self) -> None:
        """Shut NVML down on the worker thread, unless it is hung (then it is just abandoned)."""
        if not self._worker.busy:
            try:
                self._worker.call(self.source.close, self.timeout_s)
            except Exception:
                pass
        self._worker.close()

    def _accept(self, fleet: GpuFleet) -> GpuFleet:
        if fleet.freshness.state is SourceState.OK:
            self._stale_since = None
        self._last = fleet
        return fleet

    def _stale(self, reason: str) -> GpuFleet:
        if self._stale_since is None:
            self._stale_since = self._clock()
        last = self._last
        if last is None or last.freshness.state is SourceState.UNAVAILABLE:
            last = GpuFleet(source="nvml")
        return mark_stale(last, reason, self._stale_since)
