"""The hub: schedules every collector and assembles fleet snapshots from its parts.

It runs its own asyncio loop in a background thread, so neither the TUI nor a headless command
ever waits on an engine, NVML or the host. Each engine has its own collector task with its own
period and timeouts (scheduled here); the GPU side (``gpu/side.py``: NVML or simulated GPUs, which
engine holds which) and the host side (``host/side.py``: host and per-engine process stats) run
their own loops; a slow or dead source only marks its own data stale. Every ``refresh`` seconds
the latest parts are combined into one ``FleetSnapshot`` (with what engine control knows of each
engine) and handed to the fan-out (``fanout.py``), which keeps the history and tells subscribers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import replace

from console.config import EngineInstance
from console.model import (
    NOT_COLLECTED,
    Alert,
    EngineSnapshot,
    FleetSnapshot,
    GpuFleet,
    LifecycleView,
    Phase,
)
from console.telemetry.engine.collector import (
    NO_FOREGROUND,
    EngineCollector,
    Foreground,
    innermost,
    mark_late,
    mark_unanswered,
)
from console.telemetry.fanout import FanOut
from console.telemetry.gpu.energy import EnergyMeter
from console.telemetry.gpu.side import GpuSide, GpuSourceKind
from console.telemetry.host.side import HostSide
from console.telemetry.metrics.history import CHART_POINTS, History
from console.telemetry.source import ENGINE_SCHEMA, ENGINE_SERIES, Listener, PayloadListener

log = logging.getLogger(__name__)
# Records go to whatever the application configures; never to stderr by default (a TUI owns it).
log.addHandler(logging.NullHandler())


class Hub:
    """A ``FleetSource`` over configured/ad-hoc engine instances, GPUs and the host."""

    def __init__(
        self,
        instances: Sequence[EngineInstance],
        *,
        refresh: float = 1.0,
        gpu_source: GpuSourceKind = "nvml",
        gpu_assignment: Mapping[str, tuple[int, ...]] | None = None,
        history_capacity: int = CHART_POINTS,
        simulated_gpu_count: int = 8,
        pids_of: Callable[[str], tuple[int, ...]] | None = None,
        lifecycle_phase: Callable[[str], LifecycleView | tuple[Phase, str] | None] | None = None,
        alerts: Callable[[FleetSnapshot], tuple[Alert, ...]] | None = None,
        foreground: Foreground = NO_FOREGROUND,
    ) -> None:
        """``pids_of(name)``: the current process ids of an engine the lifecycle layer runs (they
        change on restart); without it an instance's own ``pids`` are used.
        ``lifecycle_phase(name)``: what the lifecycle layer knows of a managed engine (phase and a
        one-line detail); it wins over HTTP probing while the engine is starting, loading, stopping
        or has exited, where a refused connection alone cannot tell those apart.
        ``alerts(snapshot)``: the alert states for a snapshot about to be published (an
        ``AlertEvaluator`` from console.alerts); evaluated here, off the UI's loop.
        ``foreground``: what collection steps aside for (the UI passes its input gate): no payload's
        CPU work starts and no snapshot goes out while it asks to wait."""
        self._foreground = foreground
        self._instances = list(instances)
        self._refresh = refresh
        self._paused = False
        self._pids_of = pids_of
        self._lifecycle_phase = lifecycle_phase
        self._lifecycle_seen: dict[str, Phase] = {}
        self._alerts = alerts
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._wake: asyncio.Event | None = None
        self._wakes: list[asyncio.Event] = []  # every loop's sleep; a refresh change sets them all
        self._collectors: dict[str, EngineCollector] = {}
        # When each engine's collection in progress began (wall clock); None between collections.
        self._asked_at: dict[str, float | None] = {}
        # The GPUs (NVML or simulated; which engine holds which) and the host are parts of their own.
        assignment = gpu_assignment or {inst.name: inst.gpus for inst in instances if inst.gpus}
        self._gpu_side = GpuSide(gpu_source, assignment, engines=self._engines_now, simulated_count=simulated_gpu_count)
        self._host_side = HostSide(self._engine_pids)
        now = time.time()
        self._engines: dict[str, EngineSnapshot] = {
            inst.name: EngineSnapshot(
                name=inst.name,
                profile=inst.profile.name,
                url=inst.url,
                taken_at=now,
                simulated=inst.config.simulated,
                managed=inst.managed,
                gpus=self._gpu_side.assignment.get(inst.name, inst.gpus),
                pids=inst.pids,
                metrics_freshness=NOT_COLLECTED,
                health_freshness=NOT_COLLECTED,
            )
            for inst in self._instances
        }
        # Handing out snapshots and payloads is the fan-out's job (fanout.py).
        self._fanout = FanOut(FleetSnapshot(taken_at=now, engines=tuple(self._engines.values()),
                                            gpus=self._gpu_side.latest()),
                              History(capacity=history_capacity), record)
        self.history = self._fanout.history
        self._energy = EnergyMeter()
        self._detail: str | None = None  # the engine whose every raw series is collected (set_detail)
        # Set once every engine has answered (or failed) once: the first snapshot waits for them.
        # Made afresh by each run of the loop (``_collect_all``), with the engines answered so far.
        self._first_round = asyncio.Event()
        self._collected: set[str] = set()

    # -- FleetSource -------------------------------------------------------------------------

    @property
    def refresh(self) -> float:
        return self._refresh

    def set_refresh(self, seconds: float) -> None:
        self._refresh = max(0.1, min(60.0, seconds))
        for c in self._collectors.values():
            c.period = self._refresh
        self._poke()

    @property
    def paused(self) -> bool:
        return self._paused

    def set_paused(self, paused: bool) -> None:
        self._paused = paused
        if not paused:
            self._poke()

    def latest(self) -> FleetSnapshot:
        return self._fanout.latest()

    def set_detail(self, name: str | None) -> None:
        """Collect every raw series of engine ``name`` (for a metrics browser); None for none."""
        self._detail = name
        for n, c in self._collectors.items():
            c.want_raw = n == name

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self._fanout.subscribe(listener)

    def subscribe_payloads(self, listener: PayloadListener) -> Callable[[], None]:
        """Call ``listener(engine, body, at)`` with each metrics payload read, in the hub's thread
        (it must return at once: a recorder queues what it keeps); returns an unsubscribe function."""
        return self._fanout.subscribe_payloads(listener)

    def start(self) -> None:
        if self._thread is not None:
            return
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="enginedeck-hub", daemon=True)
        self._thread.start()
        ready.wait(5)

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._thread = None

    def wait_published(self, timeout: float) -> bool:
        """Block until at least one snapshot has been published (headless commands)."""
        return self._fanout.wait_published(timeout)

    # -- the loop ----------------------------------------------------------------------------

    def _pacer(self) -> Callable[[], Awaitable[None]]:
        """A part's sleep between rounds: one refresh period, or less when poked (``set_refresh``)."""
        wake = self._new_wake()
        return lambda: self._nap(wake, self._refresh)

    def _poke(self) -> None:
        """Wake every sleeping loop (publishing, each engine, host, GPUs) at once."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for event in self._wakes:
            event.set()

    def _new_wake(self) -> asyncio.Event:
        event = asyncio.Event()
        self._wakes.append(event)
        return event

    @staticmethod
    async def _nap(event: asyncio.Event, seconds: float) -> None:
        """Sleep ``seconds`` or until ``event`` is set."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout=seconds)
        event.clear()

    def _run(self, ready: threading.Event) -> None:
        asyncio.run(self._main(ready))

    async def _main(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._wake = self._new_wake()
        ready.set()
        # One worker per engine: each engine has at most one payload in work, so no engine ever
        # queues behind another's.
        digesters = ThreadPoolExecutor(max_workers=max(1, len(self._instances)), thread_name_prefix="enginedeck-digest")
        try:
            await self._collect_all(digesters)
        finally:
            digesters.shutdown(wait=False, cancel_futures=True)
        self._gpu_side.close()

    async def _collect_all(self, digesters: Executor) -> None:
        assert self._stop is not None
        # One TLS context for every https engine: each would otherwise load the CA store (tens of ms).
        https = any(inst.url.startswith("https:") for inst in self._instances)
        tls = ssl.create_default_context() if https else None
        try:
            for inst in self._instances:
                period = inst.config.scrape_period or self._refresh
                c = EngineCollector(inst, period=period, executor=digesters, tls=tls, foreground=self._foreground)
                c.want_raw = inst.name == self._detail
                c.on_payload = self._fanout.payload
                c.wake = self._new_wake()
                self._collectors[inst.name] = c
            self._first_round = asyncio.Event()
            self._collected = set()
            self._gpu_side.reset()
            if not self._collectors:
                self._first_round.set()
            tasks = [asyncio.create_task(self._engine_loop(c)) for c in self._collectors.values()]
            tasks.append(asyncio.create_task(self._host_side.run(self._pacer())))
            if self._gpu_side.polled:
                tasks.append(asyncio.create_task(self._gpu_side.run(self._pacer())))
            tasks.append(asyncio.create_task(self._publish_loop()))
            await self._stop.wait()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            for c in self._collectors.values():
                c.probe.close()

    async def _sleep(self, seconds: float) -> None:
        assert self._wake is not None
        await self._nap(self._wake, seconds)

    async def _engine_loop(self, c: EngineCollector) -> None:
        """Collect one engine every period, forever: nothing that goes wrong in one round (a
        timeout, a bug, a payload nobody foresaw) ends the loop; it becomes the engine's stale
        reason, is logged, and the next round runs as usual."""
        last_error = ""
        while True:
            started = time.monotonic()
            self._asked_at[c.instance.name] = time.time()
            try:
                try:
                    # A collection that overruns its deadline is abandoned; its engine goes stale.
                    snap = await asyncio.wait_for(c.collect(), timeout=c.collect_timeout)
                except TimeoutError:
                    snap = c.fail(f"collection took longer than {c.collect_timeout:g} s")
                except Exception as exc:
                    leaf = innermost(exc)
                    reason = f"collection failed: {type(leaf).__name__}: {leaf}"[:200]
                    if reason != last_error:  # the traceback once per distinct failure
                        log.warning("engine %s: %s", c.instance.name, reason, exc_info=True)
                    last_error = reason
                    snap = c.fail(reason)
                else:
                    last_error = ""
                with self._lock:
                    gpus = self._gpu_side.assignment.get(c.instance.name, snap.gpus)
                    self._engines[c.instance.name] = replace(snap, gpus=gpus)
                    self._asked_at[c.instance.name] = None
                if not self._first_round.is_set():
                    self._collected.add(c.instance.name)
                    if len(self._collected) == len(self._collectors):
                        self._first_round.set()
            except Exception:  # bookkeeping itself failed: log it and keep the loop alive
                log.exception("engine %s: collection loop", c.instance.name)
            elapsed = time.monotonic() - started
            assert c.wake is not None
            await self._nap(c.wake, max(0.05, c.period - elapsed))

    async def _publish_loop(self) -> None:
        # The first snapshot goes out as soon as every engine has answered (or failed) once, so a
        # screen shows data without waiting a whole refresh period.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_round.wait(), timeout=max(self._refresh, 3.0))
        await self._gpu_side.wait_first()
        while True:
            await self._foreground.opened()  # a snapshot mid-key would repaint the screen the key is changing
            if not self._paused:
                self._publish()
            await self._sleep(self._refresh)

    def _with_lifecycle(self, e: EngineSnapshot) -> EngineSnapshot:
        assert self._lifecycle_phase is not None
        try:
            known = self._lifecycle_phase(e.name)
        except Exception:  # a lifecycle lookup failure must not stop publishing
            return e
        if known is None:
            return e
        view = known if isinstance(known, LifecycleView) else LifecycleView(known[0], known[1])
        seen = self._lifecycle_seen.get(e.name)
        self._lifecycle_seen[e.name] = view.phase
        c = self._collectors.get(e.name)
        if seen is not None and seen is not view.phase and c is not None and c.wake is not None:
            c.wake.set()  # a phase change (started, ready, stopped): probe it now, not a period later
        return merge_lifecycle(e, view)

    def _period_of(self, name: str) -> float:
        c = self._collectors.get(name)
        return c.period if c is not None else self._refresh

    def _engines_now(self) -> dict[str, EngineSnapshot]:
        """The engines as last collected, with their current process ids (for the GPU side)."""
        with self._lock:
            engines = dict(self._engines)
        if self._pids_of is not None:
            engines = {n: replace(e, pids=self._current_pids(e)) for n, e in engines.items()}
        return engines

    def _engine_pids(self) -> dict[str, tuple[int, ...]]:
        """Each engine whose process ids are known, with them (for the host side)."""
        with self._lock:
            engines = list(self._engines.values())
        return {e.name: p for e in engines if (p := self._current_pids(e))}

    def _current_pids(self, e: EngineSnapshot) -> tuple[int, ...]:
        if self._pids_of is None:
            return e.pids
        try:
            return tuple(self._pids_of(e.name))
        except Exception:  # a lookup failure must not stop publishing
            return e.pids

    def _publish(self) -> None:
        now = time.time()
        with self._lock:
            engines = tuple(self._engines[i.name] for i in self._instances)
        if self._pids_of is not None:
            engines = tuple(e if (p := self._current_pids(e)) == e.pids else replace(e, pids=p) for e in engines)
        if self._lifecycle_phase is not None:
            engines = tuple(self._with_lifecycle(e) for e in engines)
        engines = tuple(mark_unanswered(mark_late(e, now, self._period_of(e.name)), now,
                                        self._asked_at.get(e.name), self._period_of(e.name)) for e in engines)
        gpus = self._gpu_side.fleet_for(engines)
        engines = self._with_gpus_and_process_stats(engines, gpus)
        snap = FleetSnapshot(taken_at=now, engines=engines, gpus=gpus, host=self._host_side.latest())
        snap = self._energy.update(snap)  # energy per GPU and engine (console/telemetry/gpu/energy.py)
        if self._alerts is not None:
            try:
                snap = replace(snap, alerts=self._alerts(snap))
            except Exception:  # a failing rule must not stop publishing
                log.exception("alert evaluation failed")
        self._fanout.publish(snap)

    def _with_gpus_and_process_stats(self, engines: tuple[EngineSnapshot, ...], fleet: GpuFleet
                                     ) -> tuple[EngineSnapshot, ...]:
        """Engines learn which GPUs they hold from the GPU side (attributed processes, or the
        simulated placement) unless the configuration pinned them, and their processes' CPU/RSS
        from the host side."""
        held = self._gpu_side.holdings(fleet)
        procs = self._host_side.proc_stats()
        out = []
        for e in engines:
            gpus = held.get(e.name, ())
            cpu, rss = procs.get(e.name, (None, None))
            if (gpus, cpu, rss) != (e.gpus, e.cpu_percent, e.rss_bytes):
                e = replace(e, gpus=gpus, cpu_percent=cpu, rss_bytes=rss)
            out.append(e)
        return tuple(out)


# Lifecycle phases that win over what HTTP probing says (a refused connection cannot tell them apart).
LIFECYCLE_WINS = frozenset({Phase.PULLING, Phase.CREATING, Phase.STARTING, Phase.LOADING, Phase.STOPPING,
                            Phase.EXITED, Phase.FAILED})


def merge_lifecycle(e: EngineSnapshot, view: LifecycleView) -> EngineSnapshot:
    """An engine's snapshot with what engine control knows. Its phase wins while the engine starts,
    loads, stops or has ended (except an answering, ready engine the lifecycle still calls
    loading). Once the lifecycle calls it ready, an HTTP failure from before that moment (the
    stop of a restart) is old news: it shows as loading until the first sample, not unreachable."""
    if view.phase in LIFECYCLE_WINS and not (e.reachable and e.phase is Phase.READY and view.phase is Phase.LOADING):
        return replace(e, phase=view.phase, health_detail=view.detail or e.health_detail, lifecycle=view)
    failing_since = e.health_freshness.stale_since
    if (view.phase in (Phase.READY, Phase.DEGRADED) and not e.reachable and view.since is not None
            and (failing_since is None or failing_since <= view.since)):
        return replace(e, phase=Phase.LOADING, health_detail="ready; waiting for the first metrics sample",
                       lifecycle=view)
    return replace(e, lifecycle=view)


def record(h: History, snap: FleetSnapshot) -> None:
    """Append one snapshot to history. An engine whose numbers are not live (stale, starting,
    loading, stopping, ended) gets a gap in every series, never its last values again."""
    t = snap.taken_at
    for e in snap.engines:
        m = e.total
        if m is None or not e.live:
            for key in ENGINE_SERIES:
                h.append((e.name, key), t, None)
            continue
        for series in ENGINE_SCHEMA:
            h.append((e.name, series.key), t, series.read(m))
    for g in snap.gpus.gpus:
        key = f"gpu:{g.index}"
        h.append((key, "util"), t, g.util_percent)
        h.append((key, "mem_used"), t, None if g.mem_used_bytes is None else float(g.mem_used_bytes))
        h.append((key, "power"), t, g.power_w)
        h.append((key, "temperature"), t, g.temperature_c)
    if snap.host is not None:
        h.append(("host", "cpu"), t, snap.host.cpu_percent)
        mem = snap.host.mem_used_bytes
        h.append(("host", "mem_used"), t, None if mem is None else float(mem))
