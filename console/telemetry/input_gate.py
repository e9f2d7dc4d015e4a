"""Input first: background collection steps aside for a moment after each key press or click.

The hub parses payloads in threads of the UI's own interpreter. With many engines that work holds
the GIL for most of each second, so a key's screen change (compose, layout, the first frame) waits
behind it and takes seconds instead of a tenth of one. The UI marks each input (``hold``); the
hub starts no new payload's CPU work and publishes nothing while the mark lasts (``opened``),
then catches up. A wait never exceeds ``MAX_WAIT``, so a held-down key slows collection without
stopping it. One gate per process, as there is one interpreter lock per process.
"""

from __future__ import annotations

import asyncio
import time

HOLD = 0.25  # seconds after an input: long enough for a screen change's first frame
MAX_WAIT = 0.4  # the longest a collection step waits for the UI


class InputGate:
    """When the UI last asked for the interpreter, and for how long."""

    def __init__(self) -> None:
        self._until = 0.0
        self.waited = 0.0  # seconds collection has stepped aside so far (for benchmarks)

    def hold(self, seconds: float = HOLD) -> None:
        """The UI has input to handle: background work waits for ``seconds`` from now."""
        self._until = max(self._until, time.monotonic() + seconds)

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
