"""How a stop ends an engine: SIGTERM, a countdown in the state, SIGKILL when the instance's
stopping timeout runs out; then, for an engine with GPUs, a wait until NVML shows its memory
released (or says why it cannot tell). Both block: the manager runs them in its worker threads."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from console.lifecycle.backend import ExitInfo, Handle
from console.lifecycle.errors import LifecycleError
from console.lifecycle.gpu_release import NvmlUnavailable, gpu_pids
from console.lifecycle.slot import Slot

KILL_WAIT = 15.0  # after SIGKILL, how long an engine may take to be gone before the stop fails


def terminate(
    slot: Slot, handle: Handle, limit: float, publish: Callable[[Slot], None], clock: Callable[[], float]
) -> ExitInfo:
    """SIGTERM, then SIGKILL after ``limit`` s; the exit. ``publish`` shows each countdown step."""
    handle.terminate()
    deadline = clock() + limit
    while True:
        info = handle.poll()
        if info is not None:
            return info
        left = deadline - clock()
        if left <= 0:
            break
        with slot.lock:
            slot.machine.countdown(left)
        publish(slot)
        time.sleep(min(0.2, left))
    with slot.lock:
        slot.machine.killing()
    publish(slot)
    handle.kill()
    end = clock() + KILL_WAIT
    while clock() < end:
        info = handle.poll()
        if info is not None:
            return info
        time.sleep(0.1)
    raise LifecycleError(f"{slot.inst.name} did not exit {KILL_WAIT:.0f} s after SIGKILL ({handle.ident})")


def await_gpu_release(slot: Slot, publish: Callable[[Slot], None], clock: Callable[[], float]) -> str:
    """Wait (up to the instance's gpu_release timeout) until none of the engine's processes
    (``slot.gpu_pids``, taken before the stop) holds GPU memory; the note for the state."""
    pids = slot.gpu_pids
    limit = slot.inst.config.timeouts.gpu_release
    with slot.lock:
        slot.machine.waiting_for_gpu("exited; waiting until NVML shows its GPU memory released")
    publish(slot)
    deadline = clock() + limit
    while True:
        try:
            held = gpu_pids() & pids if pids else set()
        except NvmlUnavailable as exc:
            return f"GPU release not verified ({exc})"
        if not pids:
            return "GPU release not verified (the engine's process ids were unknown)"
        if not held:
            return "GPU memory released"
        if clock() >= deadline:
            return f"GPU memory still held by {_pids_text(held)} after {limit:.0f} s"
        time.sleep(0.5)


def _pids_text(pids: Collection[int]) -> str:
    ids = ", ".join(map(str, sorted(pids)))
    return f"pid {ids}" if len(pids) == 1 else f"pids {ids}"
