"""Automatic garbage collection paused by several holders at once, threads included.

The collector's switch is one flag per process. The hub's digest threads pause it while a payload
becomes tuples, the UI's input gate while a key's screen change is drawn, a replay while it seeks.
Toggled directly, one holder's ``gc.enable()`` ends another's pause: a digest finishing during a
key press turned collection back on, and a young collection landed in the key's frame (its size:
docs/performance.md, ``benchmarks/key_latency.py``). Here pauses are counted: collection stops with the first and
comes back with the last, and only if it was on when the first began (a start-up pause, or a
command that turned it off for good, stays its owner's to end).

``trim_heap`` hands freed heap back to the system after a rare burst of short-lived allocations
(glibc keeps freed small blocks in the process otherwise); never on a per-scrape or per-frame path.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["depth", "pause", "paused", "resume", "trim_heap"]

_lock = threading.Lock()
_depth = 0
_restore = False  # whether the last resume turns collection back on


def pause() -> None:
    """One more holder: automatic collection stays off until every holder has resumed."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            if _restore:
                gc.disable()
        _depth += 1


def resume() -> None:
    """One holder fewer; the last turns collection back on if the first found it on."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            return  # not paused here: nothing to end
        _depth -= 1
        if _depth == 0 and _restore:
            _restore = False
            gc.enable()


def depth() -> int:
    """Pauses in force now (for tests)."""
    return _depth


@contextmanager
def paused() -> Iterator[None]:
    pause()
    try:
        yield
    finally:
        resume()


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim  # glibc only
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _malloc_trim()


def trim_heap() -> None:
    """Return the heap's free memory to the system (glibc's ``malloc_trim``; elsewhere nothing)."""
    if _TRIM is not None:
        _TRIM(0)
