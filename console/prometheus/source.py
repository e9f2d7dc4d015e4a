"""``PromSource``: one ``[sources.NAME]`` read every period, as engine snapshots with freshness.

A thread of its own reads ``/federate`` (the selector, and ``up`` of the same targets) every
``period``, splits it by engine (``federate``) and puts each engine's share through the normaliser
and the windows of a local engine (``EngineMetricsState``), stamped with Prometheus' own scrape
time: a sample already read is not read again, so rates are over Prometheus' scrapes. The targets
(``/api/v1/targets``: scrape URL, health, last error, interval) are read at start and every
``DISCOVER_EVERY`` reads. ``view()`` has the shape of a remote host's stream (``console.remote``):
the source is STALE with why when the server does not answer; an engine is stale when Prometheus
has no sample of it newer than two scrape intervals and a period (plus slack), unreachable when
its target is down. Chart history comes from ``query_range`` on request (``backfill``), in a
thread of its own, never on a caller's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from console.model import (
    Alert,
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    HostView,
    Phase,
    SourceState,
    aged,
    late_after,
)
from console.profiles import EngineProfile
from console.prometheus.api import PromClient, PromError, TargetInfo, step_for
from console.prometheus.backfill import Query, Split, bucket_quantiles, grid, group_by_profile, queries_for
from console.prometheus.federate import EngineText, profile_for, split_federate
from console.secrets import scrub
from console.sources import PolledSource, PromTarget, matchers_text
from console.telemetry.metrics.history import CHART_POINTS, History
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

DISCOVER_EVERY = 10  # federate reads between target listings
SLACK_S = 1.0
FORGET_AFTER_S = 300.0  # an engine gone from Prometheus this long is dropped from view
BACKFILL_WORKERS = 8  # query_range requests in flight at once
BACKFILL_POINTS = CHART_POINTS  # no chart draws more: older points would cost the server and never show


@dataclass
class _Engine:
    """What is kept of one engine between reads."""

    profile: EngineProfile
    ident_label: str
    state: EngineMetricsState
    snap: EngineSnapshot
    ts_ms: int = 0
    families: frozenset[str] = frozenset()
    last_seen: float = 0.0  # time.time() of the last read it was in


class PromSource(PolledSource):
    """Reads ``target``; ``on_change()`` is called (in its thread) after each read or state change."""

    KIND = "prometheus"
    target: PromTarget

    def __init__(self, target: PromTarget, profiles: Mapping[str, EngineProfile], *,
                 on_change: Callable[[], None] | None = None) -> None:
        self.target = target
        self._profiles = dict(profiles)
        self._on_change = on_change
        self._client = PromClient(target)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._engines: dict[str, _Engine] = {}
        self._targets: dict[str, TargetInfo] = {}
        self._reason = "connecting"
        self._stale_since: float | None = time.time()
        self._last_ok: float | None = None
        self._reads = 0
        self._rediscover = False  # a target went down: list the targets again for its last error
        self._backfilling: threading.Thread | None = None
        self.backfilled: set[str] = set()  # idents whose history came from query_range
        self.last_backfill_s: float | None = None  # how long the last backfill took (seconds)
        self.last_split = Split()  # where its time went
        label = matchers_text(target.label_matchers)
        self._matches = [target.selector, f"up{{{label}}}"]

    # -- life --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"enginedeck-prom-{self.target.name}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for t in (self._thread, self._backfilling):
            if t is not None:
                t.join(timeout)
        self._thread = None
        with contextlib.suppress(Exception):
            self._client.close()

    def kill(self) -> None:
        """Nothing to kill (no child process); here so a fleet treats it as a host's stream."""

    @property
    def interval_s(self) -> float:
        """Prometheus' scrape interval of these engines (the largest listed; the period without one)."""
        with self._lock:
            known = [t.interval_s for t in self._targets.values() if t.interval_s > 0]
        return max(known) if known else self.target.period

    # -- what readers see ----------------------------------------------------------------------

    def view(self, now: float | None = None) -> tuple[HostView, FleetSnapshot | None, tuple[Alert, ...]]:
        now = time.time() if now is None else now
        with self._lock:
            engines = [e.snap for e in self._engines.values()]
            reason, since, last = self._reason, self._stale_since, self._last_ok
        fresh = (Freshness(SourceState.STALE, updated_at=last, stale_since=since, reason=reason) if reason
                 else aged(Freshness(SourceState.OK, updated_at=last), now,
                           late_after(self.target.period, self.target.timeout + SLACK_S),
                           f"no answer from /federate for {now - last:.0f} s" if last is not None else ""))
        engines = [self._aged(e, now) for e in engines]
        view = HostView(name=self.target.name, destination=self.target.display, freshness=fresh, last_doc_at=last,
                        gpus=GpuFleet(source="none"), engines=len(engines), kind="prometheus")
        snap = FleetSnapshot(taken_at=now, engines=tuple(sorted(engines, key=lambda e: e.name)),
                             gpus=GpuFleet(source="none")) if last is not None else None
        return view, snap, ()

    def _aged(self, e: EngineSnapshot, now: float) -> EngineSnapshot:
        """An engine whose newest Prometheus sample is too old is stale, whatever the server says."""
        f = e.metrics_freshness
        if f.updated_at is None:
            return e
        why = f"Prometheus has no sample newer than {now - f.updated_at:.0f} s (scraped every {self.interval_s:g} s)"
        # Its own period is Prometheus's scrape interval; reading /federate adds ours as slack.
        stale = aged(f, now, late_after(self.interval_s, self.target.period + SLACK_S), why)
        if stale is f:
            return e
        return replace(e, metrics_freshness=stale, phase=Phase.DEGRADED if e.reachable else e.phase,
                        health_detail=why)

    # -- the thread ------------------------------------------------------------------------------

    def read_once(self) -> None:
        """One read: the targets now and then, then ``/federate`` into every engine's windows."""
        if self._reads % DISCOVER_EVERY == 0 or self._rediscover:
            self._rediscover = False
            try:
                self._discover()
            except PromError as exc:
                self._fail(str(exc))
                self._reads += 1
                return
        self._reads += 1
        try:
            body = self._client.federate(self._matches)
        except PromError as exc:
            self._fail(str(exc))
            return
        now = time.time()
        parts = split_federate(body, self.target.identity, self.target.role_labels)
        for who, part in parts.items():
            self._ingest(who, part, now)
        with self._lock:
            for who, e in list(self._engines.items()):
                if who not in parts and now - e.last_seen > FORGET_AFTER_S:
                    del self._engines[who]
            self._reason, self._stale_since, self._last_ok = "", None, now

    def _discover(self) -> None:
        found: dict[str, TargetInfo] = {}
        for t in self._client.targets():
            who = next((t.labels[k] for k in self.target.identity if t.labels.get(k)), None)
            if who is not None:
                found[who] = t
        with self._lock:
            self._targets = found

    def _ingest(self, who: str, part: EngineText, now: float) -> None:
        with self._lock:
            known = self._engines.get(who)
            target = self._targets.get(who)
        if known is None:
            if not part.lines:
                return  # only an ``up`` series: a target that is no engine (or never answered)
            profile = profile_for(part.families, self._profiles, self.target.profile)
            if profile is None:
                return
            known = _Engine(profile, part.ident_label, EngineMetricsState(profile), _initial(self.target, who, profile))
        e = known
        e.last_seen = now
        up = part.up is None or part.up >= 1
        if not up and (target is None or target.health != "down"):
            self._rediscover = True
        # Prometheus's lastError names the scrape URL, with its ?token= or user:password@ if it has one.
        detail = "" if up else "Prometheus: target down" + (f": {scrub(target.last_error)}"
                                                             if target and target.last_error else "")
        snap = e.snap
        if part.lines and part.ts_ms > e.ts_ms:
            e.ts_ms = part.ts_ms
            e.families = frozenset(part.families)
            wall = part.ts_ms / 1000.0
            reading = normalize(e.profile, part.text, full=True)
            e.state.ingest(time.monotonic() - (now - wall), reading, wall=wall)
            models, total = e.state.metrics()
            served = tuple(m.model for m in models if m.model)
            snap = replace(snap, models=models, total=total, raw=reading.raw, unmapped=reading.unmapped,
                            missing=reading.missing, identity=EngineIdentity(models=served),
                            metrics_freshness=Freshness(SourceState.OK, updated_at=wall))
        url = target.scrape_url if target and target.scrape_url else snap.url
        health = (Freshness(SourceState.OK, updated_at=now) if up else
                  Freshness(SourceState.STALE, updated_at=snap.health_freshness.updated_at,
                            stale_since=snap.health_freshness.stale_since or now, reason=detail))
        metrics = snap.metrics_freshness if up else Freshness(SourceState.STALE, snap.metrics_freshness.updated_at,
                                                              snap.metrics_freshness.stale_since or now, detail)
        e.snap = replace(snap, taken_at=now, url=url, reachable=up, phase=Phase.READY if up else Phase.UNREACHABLE,
                          health_detail=detail, health_freshness=health, metrics_freshness=metrics,
                          role=part.role or snap.role)
        with self._lock:
            self._engines[who] = e

    # -- history ------------------------------------------------------------------------------

    def backfill(self, history: History, key_of: Callable[[str], Hashable], *, end: float | None = None,
                 idents: set[str] | None = None) -> float:
        """Fill ``history`` (series keyed ``(key_of(ident), metric)``) from ``query_range`` over the
        source's history range, or the newest ``BACKFILL_POINTS`` steps of it (what a chart can
        draw), every engine of a profile in one query per series; returns the seconds it took.
        Blocking: call it from a worker thread (``request_backfill``)."""
        started = time.perf_counter()
        end = time.time() if end is None else end
        step = step_for(self.target.history_s, self.interval_s)
        start = end - step * min(BACKFILL_POINTS - 1, int(self.target.history_s // step))
        engines, jobs = self.backfill_queries(idents)
        # The histograms' raw bucket series first: their answers are most of the bytes and of the
        # work, so they start at once and the small ones fill in around them.
        jobs.sort(key=lambda job: not job[1].quantiles)

        split, split_lock = Split(queries=len(jobs)), threading.Lock()

        def run(job: tuple[str, Query]) -> None:
            label, q = job
            lead = math.ceil(q.window_s / step - 1e-9) * step  # a histogram's window before the range
            try:
                matrix = self._client.query_range(q.promql, start - lead, end, step)
            except PromError as exc:
                log.warning("backfill %s %s: %s", self.target.name, q.series, exc)
                return
            filling = time.perf_counter()
            points = 0
            filled = ({who: {q.series: pts} for who, pts in grid(matrix, label, start, end, step).items()}
                      if not q.quantiles else bucket_quantiles(matrix, label, start, end, step, q))
            for who, series in filled.items():
                for name, (times, values) in series.items():
                    history.backfill((key_of(who), name), times, values)
                    points += len(times)
            with split_lock:
                split.fetch_s += matrix.fetched_s
                split.decode_s += matrix.decoded_s
                split.fill_s += time.perf_counter() - filling
                split.points += points

        # The queries at once (Prometheus evaluates up to 20 concurrently by default): their wait
        # for the server, not our parsing, is most of the time.
        with ThreadPoolExecutor(max_workers=BACKFILL_WORKERS, thread_name_prefix="enginedeck-backfill") as pool:
            list(pool.map(run, jobs))
        self.backfilled.update(engines)
        self.last_backfill_s = split.wall_s = time.perf_counter() - started
        self.last_split = split
        return self.last_backfill_s

    def backfill_queries(self, idents: set[str] | None = None) -> tuple[set[str], list[tuple[str, Query]]]:
        """The engines a backfill of ``idents`` (None: all) covers, and its queries (with the
        identity label each one's series carry)."""
        with self._lock:
            engines = {w: (e.profile, e.ident_label) for w, e in self._engines.items()
                       if idents is None or w in idents}
            families = {w: e.families for w, e in self._engines.items()}
        jobs = []
        for (_profile, label), group in group_by_profile(engines).items():
            profile = engines[group[0]][0]
            names = set().union(*(families.get(w, frozenset()) for w in group))
            jobs += [(label, q) for q in queries_for(profile, names, self.target.label_matchers, label, group,
                                                     self.interval_s)]
        return set(engines), jobs

    def request_backfill(self, history: History, key_of: Callable[[str], Hashable],
                         done: Callable[[], None] | None = None) -> bool:
        """Start a backfill of the engines not backfilled yet in a thread of its own; False when one
        runs already or there is nothing to do. ``done()`` is called when it ends."""
        with self._lock:
            todo = set(self._engines) - self.backfilled
        running = self._backfilling
        if not todo or (running is not None and running.is_alive()):
            return False

        def work() -> None:
            try:
                self.backfill(history, key_of, idents=todo)
            except Exception:
                log.exception("backfill %s", self.target.name)
            if done is not None:
                with contextlib.suppress(Exception):
                    done()

        self._backfilling = threading.Thread(target=work, name=f"enginedeck-backfill-{self.target.name}", daemon=True)
        self._backfilling.start()
        return True


def _initial(target: PromTarget, who: str, profile: EngineProfile) -> EngineSnapshot:
    waiting = Freshness(SourceState.STALE, reason="not read yet")
    return EngineSnapshot(name=who, profile=profile.name, url=who, taken_at=time.time(), source=target.name,
                          metrics_freshness=waiting, health_freshness=waiting)
