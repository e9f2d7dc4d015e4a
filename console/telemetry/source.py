"""The contract between the telemetry layer and its readers (the TUI, ``status --watch``).

A ``FleetSource`` collects in its own thread and hands out immutable ``FleetSnapshot`` objects.
Readers never call HTTP, NVML or Docker themselves: they read ``latest()``/``history`` and get a
callback (in the source's thread, so a UI must hop to its own loop, e.g. ``app.call_from_thread``)
each time a new snapshot is published.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from console.model import FleetSnapshot
from console.telemetry.metrics.history import History

Listener = Callable[[FleetSnapshot], None]
# (engine name, metrics payload as read, arrival time): what a recorder archives.
PayloadListener = Callable[[str, bytes, float], None]

# Metric keys kept in History per engine instance (entity = instance name):
ENGINE_SERIES = (
    "running",
    "waiting",
    "kv_usage",
    "prefix_hit_rate",
    "generation_tps",
    "prompt_tps",
    "request_rate",
    "error_rate",
    "ttft_p50",
    "ttft_p99",
    "itl_p50",
    "itl_p99",
    "e2e_p50",
    "e2e_p99",
    "queue_p50",
    "queue_p99",
)
# ... and per GPU (entity = f"gpu:{index}"):
GPU_SERIES = ("util", "mem_used", "power", "temperature")
# ... and for the host (entity = "host"):
HOST_SERIES = ("cpu", "mem_used")


class FleetSource(Protocol):
    history: History

    def start(self) -> None:
        """Begin collecting (idempotent). Returns at once; collection runs in a background thread."""

    def stop(self) -> None:
        """Stop collecting and release resources (HTTP clients, NVML)."""

    def latest(self) -> FleetSnapshot: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each new snapshot; returns an unsubscribe function."""
        ...

    @property
    def refresh(self) -> float: ...

    def set_refresh(self, seconds: float) -> None: ...

    @property
    def paused(self) -> bool: ...

    def set_paused(self, paused: bool) -> None:
        """While paused, collection continues to be skipped and no snapshot is published."""

    def set_detail(self, name: str | None) -> None:
        """Keep every raw series of engine ``name`` in its snapshots (a reader shows them); None for none."""


class PayloadSource(Protocol):
    """A source that also hands out each raw metrics payload it reads (the live hub; a replay does not)."""

    def subscribe_payloads(self, listener: PayloadListener) -> Callable[[], None]: ...
