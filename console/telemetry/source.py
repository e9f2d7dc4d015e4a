"""The contract between the telemetry layer and its readers (the TUI, ``status --watch``).

A ``FleetSource`` collects in its own thread and hands out immutable ``FleetSnapshot`` objects.
Readers never call HTTP, NVML or Docker themselves: they read ``latest()``/``history`` and get a
callback (in the source's thread, so a UI must hop to its own loop, e.g. ``app.call_from_thread``)
each time a new snapshot is published.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from console.model import FleetSnapshot, ModelMetrics, Quantiles
from console.telemetry.metrics.history import History

Listener = Callable[[FleetSnapshot], None]
# (engine name, metrics payload as read, arrival time): what a recorder archives.
PayloadListener = Callable[[str, bytes, float], None]



@dataclass(frozen=True, slots=True)
class EngineSeries:
    """One chart series kept per engine: the history schema. The hub appends ``read`` of each live
    snapshot (``hub.record``), a replay reads the same number at ``doc`` in a status document's
    ``summary`` (``recording/history_rows.py``), and a Prometheus backfill computes it from the
    profile's ``canonical`` metric the way ``how`` says (``prometheus/backfill.py``)."""

    key: str
    read: Callable[[ModelMetrics], float | None]
    doc: tuple[str, ...]
    canonical: str
    how: Literal["gauge", "rate", "hit_rate", "quantile"]
    backfilled: bool = True  # whether a Prometheus backfill fills it (queue time: not yet)


def _quantiles(prefix: str, canonical: str, read: Callable[[ModelMetrics], Quantiles], doc: str, *,
               backfilled: bool = True) -> tuple[EngineSeries, EngineSeries]:
    return (EngineSeries(f"{prefix}_p50", lambda m: read(m).p50, (doc, "p50"), canonical, "quantile", backfilled),
            EngineSeries(f"{prefix}_p99", lambda m: read(m).p99, (doc, "p99"), canonical, "quantile", backfilled))


# Per engine instance (entity = instance name), in this order. ``now`` of a token rate: 5 s, or 60 s
# for token counters the engine bumps only when a request finishes.
ENGINE_SCHEMA: tuple[EngineSeries, ...] = (
    EngineSeries("running", lambda m: m.running, ("running",), "running", "gauge"),
    EngineSeries("waiting", lambda m: m.waiting, ("waiting",), "waiting", "gauge"),
    EngineSeries("kv_usage", lambda m: m.kv_usage, ("kv_usage",), "kv_usage", "gauge"),
    EngineSeries("prefix_hit_rate", lambda m: m.prefix_hit_rate, ("prefix_hit_rate",), "prefix_hits", "hit_rate"),
    EngineSeries("generation_tps", lambda m: m.generation_tps.now, ("generation_tokens_per_s", "now"),
                 "generation_tokens", "rate"),
    EngineSeries("prompt_tps", lambda m: m.prompt_tps.now, ("prompt_tokens_per_s", "now"), "prompt_tokens", "rate"),
    EngineSeries("request_rate", lambda m: m.request_rate.r5s, ("requests_per_s", "5s"), "requests_finished", "rate"),
    EngineSeries("error_rate", lambda m: m.error_rate.r5s, ("errors_per_s", "5s"), "requests_failed", "rate"),
    *_quantiles("ttft", "ttft", lambda m: m.ttft, "ttft_s"),
    *_quantiles("itl", "itl", lambda m: m.itl, "itl_s"),
    *_quantiles("e2e", "e2e", lambda m: m.e2e, "e2e_s"),
    *_quantiles("queue", "queue_time", lambda m: m.queue_time, "queue_time_s", backfilled=False),
)
# Metric keys kept in History per engine instance:
ENGINE_SERIES = tuple(s.key for s in ENGINE_SCHEMA)
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


class LiveSource(FleetSource, Protocol):
    """A source that collects live (the hub, the merged remote fleet; a replay does not): a headless
    reader such as ``status`` waits for its first snapshot."""

    def wait_published(self, timeout: float) -> bool:
        """Block until at least one snapshot has been published; False if ``timeout`` passed first."""
        ...


class PayloadSource(Protocol):
    """A source that also hands out each raw metrics payload it reads (the live hub; a replay does not)."""

    def subscribe_payloads(self, listener: PayloadListener) -> Callable[[], None]: ...
