"""Typed messages that carry data into the UI thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.message import Message

from console.client.progress import BenchEvent
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


# The bench screen's worker thread posts these to the screen (post_message is thread-safe).


class BenchReady(Message):
    """Every engine answered; ``models`` is what each will be asked for, in engine order."""

    def __init__(self, models: Sequence[str]) -> None:
        super().__init__()
        self.models = tuple(models)


class BenchProgress(Message):
    """An event from the running benchmark (console/client/progress.py)."""

    def __init__(self, event: BenchEvent) -> None:
        super().__init__()
        self.event = event


class BenchDone(Message):
    """The benchmark finished (or was interrupted): its result document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        super().__init__()
        self.doc = doc


class BenchStopped(Message):
    """The benchmark did not produce a result: why, in one line (not ready, stopped, failed)."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason
