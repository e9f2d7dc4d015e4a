"""Typed messages that carry data into the UI thread."""

from __future__ import annotations

from textual.message import Message

from console.model import FleetSnapshot


class FleetUpdated(Message):
    """A new snapshot from the FleetSource (posted from its thread; post_message is thread-safe)."""

    def __init__(self, snapshot: FleetSnapshot) -> None:
        super().__init__()
        self.snapshot = snapshot


class LifecycleDone(Message):
    """A start/stop/restart finished (in a worker thread); ``error`` is '' on success."""

    def __init__(self, verb: str, engine: str, error: str) -> None:
        super().__init__()
        self.verb = verb
        self.engine = engine
        self.error = error
