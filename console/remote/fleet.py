"""``RemoteFleet``: a ``FleetSource`` over this machine's hub (if any) and every remote host's stream.

It publishes a merged snapshot (``merge``) every ``refresh`` seconds (the local hub's latest, each
host's latest document), and at once when a host's state changes (its first document, ssh ended,
the host went silent), so a dead host is shown stale within a fraction of a second of it being
known. History is kept as the hub keeps it (``hub.record``), under the qualified ``HOST/NAME`` engine names.
A Prometheus source (``[sources.NAME]``, ``console.prometheus``) joins as a host does, its engines
``SOURCE/IDENT``; their older chart history comes from its ``query_range`` on ``request_backfill``.
A Kubernetes source (``console.kube``) joins the same way, its engines ``SOURCE/POD``; ``log_tail``
gives their ``kubectl logs``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from console.hosts import HostTarget
from console.listeners import add_listener
from console.model import EngineSnapshot, FleetSnapshot
from console.profiles import EngineProfile
from console.remote.merge import merge, qualified
from console.remote.stream import HostStream
from console.remote.tunnel import Tunnels, forwarded_url
from console.secrets import Scrubber
from console.telemetry.hub import Hub, record
from console.telemetry.metrics.history import CHART_POINTS, History
from console.telemetry.source import Listener, PayloadListener

if TYPE_CHECKING:
    from console.kube.source import KubeSource
    from console.prometheus.source import PromSource
    from console.sources import KubeTarget, PromTarget


class RemoteFleet:
    """Watches ``hosts`` over SSH, ``sources`` (Prometheus servers, ``console.prometheus``) and this
    machine's engines through ``local`` (None: none)."""

    def __init__(self, hosts: Sequence[HostTarget], *, local: Hub | None = None, refresh: float = 1.0,
                 ssh: str = "ssh", scrubber: Scrubber | None = None, history_capacity: int = CHART_POINTS,
                 tunnels: Tunnels | None = None, sources: Sequence[PromTarget | KubeTarget] = (),
                 profiles: Mapping[str, EngineProfile] | None = None) -> None:
        self.history = History(capacity=history_capacity)
        self.tunnels = tunnels if tunnels is not None else Tunnels(ssh=ssh, scrubber=scrubber)
        self._targets = {h.name: h for h in hosts}
        self.local = local
        self._refresh = refresh
        self._paused = False
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._wake = threading.Event()
        self._halt = threading.Event()
        self._published = threading.Event()
        self._thread: threading.Thread | None = None
        self.streams: list[Any] = [HostStream(h, ssh=ssh, scrubber=scrubber, on_change=self._wake.set) for h in hosts]
        self.sources: list[PromSource] = []
        self.kube_sources: list[KubeSource] = []
        if sources:
            from console.kube.source import KubeSource
            from console.profiles import load_profiles
            from console.prometheus.source import PromSource
            from console.sources import KubeTarget

            table = dict(profiles) if profiles is not None else load_profiles()
            self.sources = [PromSource(t, table, on_change=self._wake.set) for t in sources
                            if not isinstance(t, KubeTarget)]
            self.kube_sources = [KubeSource(t, table, on_change=self._wake.set) for t in sources
                                 if isinstance(t, KubeTarget)]
            self.streams += self.sources + self.kube_sources
        self._latest = merge(local.latest() if local else None, [s.view() for s in self.streams], time.time())

    # -- FleetSource -----------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        if self.local is not None:
            self.local.start()
        for s in self.streams:
            s.start()
        self._thread = threading.Thread(target=self._run, name="enginedeck-fleet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._halt.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=3)
            self._thread = None
        self.kill_streams()
        for s in self.streams:
            s.stop()
        if self.local is not None:
            self.local.stop()

    def kill_streams(self) -> None:
        """End every ssh process group now, the tunnels' too (the terminal guard's last resort; safe
        from any thread)."""
        for s in self.streams:
            with contextlib.suppress(Exception):
                s.kill()
        self.tunnels.close_all()

    def engine_url(self, engine: EngineSnapshot) -> str:
        """Where this machine reaches ``engine``: a remote engine's loopback URL becomes a local port
        forwarded over ssh to that port on its host (opened now, ready a moment later, reused); any
        other URL is the engine's own."""
        target = self._targets.get(engine.host or "")
        if target is None:
            return engine.url
        return forwarded_url(engine.url, lambda port: self.tunnels.port(target, port, wait=False))

    def latest(self) -> FleetSnapshot:
        with self._lock:
            return self._latest

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return add_listener(self._listeners, self._lock, listener)

    def subscribe_payloads(self, listener: PayloadListener) -> Callable[[], None]:
        """This machine's raw payloads (a remote host's stay there)."""
        if self.local is not None:
            return self.local.subscribe_payloads(listener)
        return lambda: None

    @property
    def refresh(self) -> float:
        return self._refresh

    def set_refresh(self, seconds: float) -> None:
        self._refresh = max(0.1, min(60.0, seconds))
        if self.local is not None:
            self.local.set_refresh(seconds)
        self._wake.set()

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        if self.local is not None:
            self.local.set_paused(paused)
        self._wake.set()

    def set_detail(self, name: str | None) -> None:
        if self.local is not None:
            local = {e.name for e in self.local.latest().engines}
            self.local.set_detail(name if name in local else None)

    def wait_published(self, timeout: float) -> bool:
        return self._published.wait(timeout)

    def request_backfill(self, engine: str) -> bool:
        """Chart history of ``engine``'s source (and of every other engine there not filled yet)
        from Prometheus' ``query_range``, in the source's own thread; a snapshot is published when
        it is in. False: not a source's engine, nothing left to fill, or a backfill runs already."""
        for src in self.sources:
            prefix = src.target.name + "/"
            if engine.startswith(prefix):
                return src.request_backfill(self.history, partial(qualified, src.target.name), done=self._wake.set)
        return False

    def source_of(self, engine: str) -> str | None:
        """The [sources.NAME] an engine is read from; None for this machine's and SSH hosts' engines."""
        every: list[PromSource | KubeSource] = [*self.sources, *self.kube_sources]
        return next((s.target.name for s in every if engine.startswith(s.target.name + "/")), None)

    def log_tail(self, engine: str, n: int = 200) -> tuple[list[str], str] | None:
        """A Kubernetes source's pod logs (``kubectl logs``, read in the source's log thread):
        (lines, "") or ([], why there are none); None: not read yet, or not such an engine."""
        for src in self.kube_sources:
            prefix = src.target.name + "/"
            if engine.startswith(prefix):
                return src.log_tail(engine[len(prefix):], n)
        return None

    def wait_hosts(self, deadline: float) -> None:
        """Until every host has sent a document or failed with a reason (``time.monotonic`` deadline)."""
        while time.monotonic() < deadline:
            views = [s.view()[0] for s in self.streams]
            if all(v.last_doc_at is not None or "connecting" not in v.freshness.reason for v in views):
                return
            time.sleep(0.05)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._halt.is_set():
            self._wake.wait(self._refresh)
            self._wake.clear()
            if self._halt.is_set():
                break
            if not self._paused:
                self.publish()

    def publish(self) -> FleetSnapshot:
        now = time.time()
        snap = merge(self.local.latest() if self.local else None, [s.view(now) for s in self.streams], now)
        with self._lock:
            self._latest = snap
            listeners = list(self._listeners)
        record(self.history, snap)
        self._published.set()
        for fn in listeners:
            fn(snap)
        return snap
