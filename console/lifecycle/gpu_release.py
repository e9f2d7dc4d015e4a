"""Has a stopped engine released its GPUs? Asks NVML which processes hold GPU memory.

NVML calls can hang with a sick driver, so each runs in a daemon thread that the caller waits
for with a deadline; while a call is stuck no second one is started.
When NVML cannot work here the caller gets the reason and says so in the instance state
instead of pretending the memory was freed.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

NVML_TIMEOUT = 3.0


class NvmlUnavailable(Exception):
    """NVML cannot answer here (no driver, no library, timed out); ``str()`` says why."""


_busy = False
_worker_lock = threading.Lock()
_init_error: str | None = None
_inited = False


def _nvml_pids() -> set[int]:
    global _inited, _init_error
    import pynvml

    if not _inited:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            _init_error = str(exc)
            raise NvmlUnavailable(f"NVML unavailable: {exc}") from None
        _inited = True
    pids: set[int] = set()
    for i in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            fn: Any = getattr(pynvml, getter, None)
            if fn is None:
                continue
            try:
                for p in fn(handle):
                    pids.add(int(p.pid))
            except pynvml.NVMLError:
                continue
    return pids


def gpu_pids(timeout: float = NVML_TIMEOUT) -> set[int]:
    """PIDs that hold GPU memory now. Raises NvmlUnavailable with a one-line reason."""
    global _busy
    if _init_error is not None:
        raise NvmlUnavailable(f"NVML unavailable: {_init_error}")
    with _worker_lock:
        if _busy:
            raise NvmlUnavailable("NVML did not answer (an earlier call is still hanging)")
        _busy = True
    fut: Future[set[int]] = Future()

    def run() -> None:
        global _busy
        try:
            fut.set_result(_nvml_pids())
        except BaseException as exc:
            fut.set_exception(exc)
        finally:
            with _worker_lock:
                _busy = False

    threading.Thread(target=run, name="enginedeck-nvml-release", daemon=True).start()
    try:
        return fut.result(timeout=timeout)
    except NvmlUnavailable:
        raise
    except TimeoutError:
        raise NvmlUnavailable(f"NVML did not answer within {timeout:.0f} s") from None
    except ImportError:
        raise NvmlUnavailable("NVML unavailable: pynvml is not installed") from None
    except Exception as exc:
        raise NvmlUnavailable(f"NVML unavailable: {type(exc).__name__}: {exc}") from None
