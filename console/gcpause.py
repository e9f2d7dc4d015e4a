"""Automatic garbage collection paused by several holders at once, threads included.

The collector's switch is one flag per process. The hub's digest threads pause it while a payload
becomes tuples, the UI's input gate while a key's screen change is drawn, a replay while it seeks.
Toggled directly, one holder's ``gc.enable()`` ends another's pause: a digest finishing during a
key press turned collection back on, and a young collection landed in the key's frame (its size:
docs/performance.md, ``benchmarks/key_latency.py``). Here pauses are counted: collection stops with the first and
comes back with the last, and only if it was on when the first began (a start-up pause, or a
command that turned it off for good, stays its owner's to end).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["depth", "pause", "paused", "resume"]

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
