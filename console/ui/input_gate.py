"""Input first: background collection steps aside for a moment after each key press or click.

The hub parses payloads in threads of the UI's own interpreter. With many engines that work holds
the GIL for most of each second, so a key's screen change (compose, layout, the first frame) waits
behind it and takes seconds instead of a tenth of one. The UI marks each input (``hold``); the
hub starts no new payload's CPU work and publishes nothing while the mark lasts (``opened``),
then catches up. A wait never exceeds ``MAX_WAIT``, so a held-down key slows collection without
stopping it. One gate per process, as there is one interpreter lock per process.

The garbage collector steps aside too. With 64 engines the heap holds a few hundred thousand
objects made after start, and a collection of them takes a large part of a frame's budget (a young
one too, as each digest leaves large new lists and dicts; docs/performance.md), so one landing in a
key's screen change was most of the slowest keys (``benchmarks/key_latency.py``). The UI's holds
pause automatic collection until it ends, ``GC_PAUSE_MAX`` at most; collection then resumes where
it left off, and after a pause that reached the cap the next ``GC_REST`` seconds of input do not
pause it again, so keys held down cannot starve it. Only a gate that paused collection resumes it
(``release`` at exit too); the pause is counted with the digests' own (``console/gc_control.py``), so
theirs ending does not end it.
"""

from __future__ import annotations

import asyncio
import time

from console import gc_control

HOLD = 0.25  # seconds after an input: long enough for a screen change's first frame
MAX_WAIT = 0.4  # the longest a collection step waits for the UI
GC_PAUSE_MAX = 1.0  # the longest automatic garbage collection stays paused for input
GC_REST = 0.2  # after a pause that reached GC_PAUSE_MAX, input does not pause collection for this long


class InputGate:
    """When the UI last asked for the interpreter, and for how long."""

    def __init__(self) -> None:
        self._until = 0.0
        self.waited = 0.0  # seconds collection has stepped aside so far (for benchmarks)
        self.gc_paused = 0.0  # seconds the garbage collector has been paused so far (for benchmarks)
        self._gc_since: float | None = None  # when this gate paused the collector (None: it did not)
        self._gc_after = 0.0

    def hold(self, seconds: float = HOLD, *, pause_gc: bool = False) -> None:
        """The UI has input to handle: background work waits for ``seconds`` from now. With
        ``pause_gc``, called on the UI's running event loop, so does automatic garbage collection:
        the caller must ``release`` the gate when that loop ends (a pending resume dies with it)."""
        self._until = max(self._until, time.monotonic() + seconds)
        if pause_gc:
            self._pause_gc()

    @property
    def gc_held(self) -> bool:
        """Whether this gate has the garbage collector paused now."""
        return self._gc_since is not None

    def _pause_gc(self) -> None:
        now = time.monotonic()
        if self._gc_since is not None or now < self._gc_after:
            return  # paused already, or resting after a capped pause
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop to resume it from: collection stays on
        gc_control.pause()  # counted: a digest's own pause ending meanwhile does not end this one
        self._gc_since = now
        loop.call_later(self.remaining(), self._resume_gc, loop)

    def _resume_gc(self, loop: asyncio.AbstractEventLoop) -> None:
        since = self._gc_since
        if since is None:
            return  # released meanwhile
        paused = time.monotonic() - since
        left = min(self.remaining(), GC_PAUSE_MAX - paused)
        if left > 0:
            loop.call_later(left, self._resume_gc, loop)
            return
        if paused >= GC_PAUSE_MAX:
            self._gc_after = time.monotonic() + GC_REST
        self.release()

    def release(self) -> None:
        """Resume garbage collection if this gate paused it (the UI is going away, or a pause ended)."""
        since = self._gc_since
        if since is None:
            return
        self._gc_since = None
        self.gc_paused += time.monotonic() - since
        gc_control.resume()

    def remaining(self) -> float:
        """Seconds left of the current hold (0 when open)."""
        return max(0.0, self._until - time.monotonic())

    async def opened(self, limit: float = MAX_WAIT) -> None:
        """Return once no hold is in force, or after ``limit`` seconds, whichever is first."""
        left = self.remaining()
        if left <= 0:
            return
        start = time.monotonic()
        deadline = start + limit
        while left > 0:
            await asyncio.sleep(min(left, deadline - time.monotonic()))
            left = min(self.remaining(), deadline - time.monotonic())
        self.waited += time.monotonic() - start


GATE = InputGate()
