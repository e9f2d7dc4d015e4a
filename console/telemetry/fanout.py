"""The hub's fan-out: the latest snapshot, its history, and the readers told of each one.

The hub (``hub.py``) schedules collection and assembles each ``FleetSnapshot``; handing it out is
this part's one job: it keeps the latest (``latest``), appends it to the chart history
(``hub.record``, following ``source.ENGINE_SCHEMA``), and calls every subscriber in the publishing
thread. Raw payloads go the same way to their subscribers (a recorder). A reader's failure never
stops collection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from console.listeners import add_listener
from console.model import FleetSnapshot
from console.telemetry.metrics.history import History
from console.telemetry.source import Listener, PayloadListener

log = logging.getLogger(__name__)


class FanOut:
    """Hands each published snapshot and each raw payload to its readers."""

    def __init__(self, first: FleetSnapshot, history: History, record: Callable[[History, FleetSnapshot], None]
                 ) -> None:
        self.history = history
        self._record = record
        self._lock = threading.Lock()
        self._latest = first
        self._listeners: list[Listener] = []
        self._payload_listeners: list[PayloadListener] = []
        self._published = threading.Event()

    def latest(self) -> FleetSnapshot:
        with self._lock:
            return self._latest

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return add_listener(self._listeners, self._lock, listener)

    def subscribe_payloads(self, listener: PayloadListener) -> Callable[[], None]:
        return add_listener(self._payload_listeners, self._lock, listener)

    def payload(self, name: str, body: bytes, at: float) -> None:
        with self._lock:
            listeners = list(self._payload_listeners)
        for fn in listeners:
            try:
                fn(name, body, at)
            except Exception:  # a reader's failure must not stop collection
                log.exception("payload listener")

    def publish(self, snap: FleetSnapshot) -> None:
        with self._lock:
            self._latest = snap
            listeners = list(self._listeners)
        self._record(self.history, snap)
        self._published.set()
        for fn in listeners:
            fn(snap)

    def wait_published(self, timeout: float) -> bool:
        return self._published.wait(timeout)
