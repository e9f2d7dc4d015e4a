"""The garbage collector's one switchboard: every pause, freeze and collection the console asks for.

The collector's switch is one flag per process. The hub's digest threads pause it while a payload
becomes tuples, the UI's input gate while a key's screen change is drawn, a replay while it seeks,
the load generator while it measures. Toggled directly, one holder's ``gc.enable()`` ends another's
pause: a digest finishing during a key press turned collection back on, and a young collection
landed in the key's frame (its size: docs/performance.md, ``benchmarks/key_latency.py``). Here
pauses are counted: collection stops with the first and comes back with the last, and only if it
was on when the first began (a start-up pause, or a command that turned it off for good, stays its
owner's to end). No other module of the console calls ``gc`` (a boundary test holds it).

Start-up: starting the console makes a few hundred thousand long-lived objects (modules, classes,
the methods dataclasses write), and the collector walks them again and again while they are being
made: about 0.15-0.2 s of a 1 s start, measured then. ``cli.main`` pauses collection first thing
(``startup_pause``); a command that paints resumes it just before its first frame (``ui.launch``),
every other command as soon as its arguments are parsed (``startup_resume``). What exists by then
is frozen out of later collections: it lives as long as the process does.

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

__all__ = [
    "collect_young", "depth", "measuring_begin", "measuring_end", "off_until_exit", "pause", "paused",
    "resume", "startup_pause", "startup_resume", "trim_heap",
]

_lock = threading.Lock()
_depth = 0
_restore = False  # whether the last resume turns collection back on
_startup_held = False  # whether the start-up pause is in force (resumed from more than one place)


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


def startup_pause() -> None:
    """Collection off while the process starts (idempotent)."""
    global _startup_held
    if not _startup_held:
        _startup_held = True
        pause()


def startup_resume() -> None:
    """The start-up pause ends: what exists now is frozen out of later collections (idempotent)."""
    global _startup_held
    if _startup_held:
        _startup_held = False
        gc.freeze()
        resume()


def collect_young() -> None:
    """Walk the young objects now, in the caller's own time, not in whatever allocates next."""
    gc.collect(1)


def off_until_exit() -> None:
    """A process about to end: its objects die with it, and the interpreter's collection at exit
    would only walk them. A counted pause, never resumed, so no holder can turn it back on."""
    pause()
    gc.freeze()


def measuring_begin() -> None:
    """No collector pauses inside a measurement: collect what is garbage now, freeze the rest out of
    the collector's walks, and pause (counted) until ``measuring_end``."""
    gc.collect()
    gc.freeze()
    pause()


def measuring_end() -> None:
    resume()
    gc.unfreeze()


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
