"""Which demo fleet this `enginedeck demo` runs, so that two demos of one user run side by side.

The demo's simulators are managed process engines, and a process engine's record is kept by name
(``state_dir()/processes/NAME.json``): a second demo with the same names would take the first
demo's engines for its own and wait for them at its own ports. So each demo holds a slot, an
exclusive lock on ``state_dir()/demo/slot-N.lock`` for as long as it runs (the kernel drops it when
the process ends, however it ends): slot 1 names its engines ``vllm-sim``..., slot 2
``vllm-sim-2``... A record of a slot's name whose owner is gone is a leftover of a demo that
died: its process is stopped before the slot is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Callable, Sequence
from typing import BinaryIO

from console.errors import UserError

MAX_SLOTS = 16


def slot_suffix(slot: int) -> str:
    return "" if slot == 1 else f"-{slot}"


def _owner_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _clear_leftovers(names: Sequence[str]) -> bool:
    """Stop what a dead demo left under these names; False when a live enginedeck owns one."""
    from console.lifecycle.process_records import drop_record, read_record

    for name in names:
        rec = read_record(name)
        if rec is None:
            continue
        if not rec.alive():
            drop_record(name, rec.pid)
            continue
        if rec.owner_pid != os.getpid() and _owner_alive(rec.owner_pid):
            return False  # another running enginedeck manages it: not ours to touch
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(rec.pgid, signal.SIGKILL)  # a simulator of a demo that is gone
        drop_record(name, rec.pid)
    return True


def claim_slot(names_for: Callable[[int], Sequence[str]]) -> tuple[int, BinaryIO]:
    """The first free slot (its lock held by the returned file, to keep open while the demo runs).

    ``names_for(slot)`` gives the engine names that slot uses."""
    from console.paths import private_dir, state_dir

    folder = private_dir(state_dir() / "demo")
    for slot in range(1, MAX_SLOTS + 1):
        f = open(folder / f"slot-{slot}.lock", "ab")  # noqa: SIM115 - held open for the demo's life
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        if _clear_leftovers(names_for(slot)):
            return slot, f
        f.close()
    raise UserError(f"{MAX_SLOTS} enginedeck demos already run for this user: quit one first")
