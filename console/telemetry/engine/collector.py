"""One engine's collection: health every period, identity on (re)connect, metrics when it answers.

A payload is parsed, normalised and windowed in a worker thread within the engine's own time
budget, so one engine's pathological payload marks only that engine. Freshness is judged here too:
an engine whose last good sample is older than its period allows is stale, whatever its loop does.
Used by the hub (``hub.py``), which schedules one collector per engine.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Protocol

from console.config import EngineInstance
from console.model import (
    NOT_COLLECTED,
    EngineIdentity,
    EngineSnapshot,
    Freshness,
    ModelMetrics,
    Phase,
    RawSeries,
    SourceState,
    aged,
    went_stale,
)
from console.model import late_after as model_late_after
from console.telemetry.engine.scrape import EngineProbe, Health
from console.telemetry.metrics.normmemo import NormalizeMemo
from console.telemetry.metrics.promdelta import ScrapeParser


class Foreground(Protocol):
    """Whatever collection steps aside for (the UI's input gate: a key's screen change goes first)."""

    async def opened(self) -> None:
        """Return once the foreground no longer asks collection to wait."""


class NoForeground:
    """Nothing to step aside for (a headless command, a benchmark, a recorder)."""

    async def opened(self) -> None:
        return None


NO_FOREGROUND = NoForeground()


def innermost(exc: BaseException) -> BaseException:
    """The first real error inside (task-group) exception groups: the one worth naming."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def fresh(updated_at: float) -> Freshness:
    return Freshness(SourceState.OK, updated_at=updated_at)


def late_after(period: float) -> float:
    """How old an engine's last good sample may be before its numbers stop counting as fresh
    (``model.late_after``), with slack for a slow scrape of at least 1 s (1 s -> 3.5 s, 30 s -> 61 s)."""
    return model_late_after(period, slack=max(1.0, 2.5 - period))


def mark_late(e: EngineSnapshot, now: float, period: float) -> EngineSnapshot:
    """``e`` with its metrics marked stale when the last good sample is older than its period
    allows: a collector that sleeps, hangs or died must never leave numbers looking fresh."""
    f = e.metrics_freshness
    late = aged(f, now, late_after(period), f"no new sample (collected every {period:g} s)")
    return e if late is f else replace(e, metrics_freshness=late)


def answer_allowance(period: float) -> float:
    """How long one collection may go unanswered before the engine's numbers stop counting as fresh:
    a scrape takes milliseconds, so a hang shows within this, not after the probe's whole timeout."""
    return max(1.5, period)


def mark_unanswered(e: EngineSnapshot, now: float, asked_at: float | None, period: float) -> EngineSnapshot:
    """``e`` marked stale while its collection begun at ``asked_at`` has gone unanswered too long."""
    f = e.metrics_freshness
    allowance = answer_allowance(period)
    if asked_at is None or f.stale or now - asked_at <= allowance:
        return e
    waiting = Freshness(SourceState.STALE, updated_at=f.updated_at, stale_since=asked_at,
                        reason=f"no answer within {allowance:g} s (still waiting)")
    return replace(e, metrics_freshness=waiting)


@dataclass(frozen=True, slots=True)
class _Digest:
    """What one metrics payload gave, computed in a worker thread."""

    models: tuple[ModelMetrics, ...]
    total: ModelMetrics
    missing: tuple[str, ...]
    raw: tuple[RawSeries, ...] | None  # only when every family was parsed (want_raw)
    unmapped: tuple[str, ...] | None


class EngineCollector:
    """Collects one engine: health every period, identity on (re)connect, metrics when answering.

    A payload is parsed, normalised and windowed in a worker thread (``executor``), never on the
    hub's loop, and within the engine's own time budget: one engine's huge or pathological payload
    marks that engine and delays no other. At most one payload per engine is in work at a time.
    """

    IDENTITY_EVERY = 30  # periods between identity refreshes while connected
    HEALTH_EVERY = 5  # while metrics answer, the health endpoint is asked only every N periods

    def __init__(self, instance: EngineInstance, *, period: float, executor: Executor | None = None,
                 tls: ssl.SSLContext | None = None, foreground: Foreground = NO_FOREGROUND) -> None:
        from console.telemetry.metrics.windows import EngineMetricsState

        self.instance = instance
        self.period = period
        self.executor = executor  # None: the loop's default executor
        self.foreground = foreground
        self._digesting: asyncio.Future[_Digest | str] | None = None
        self.probe = EngineProbe(instance, timeout=max(0.5, min(2.0, period * 1.5)), tls=tls)
        self.state = EngineMetricsState(instance.profile)
        self.parser = ScrapeParser()  # touched only by this engine's digest, one at a time
        self.memo = NormalizeMemo()  # the same
        self.identity: EngineIdentity | None = None
        self._identity_age = 0
        self._health_age = 0
        # Parse every raw family only while someone looks at them (the metrics browser): the
        # profile's own families are a fraction of a real payload.
        self.want_raw = False
        self.samples = 0  # payloads read into the windows so far
        # The engine stopped answering: the next payload may be a new run's (a restart), so the
        # windows start afresh there, and no rate or quantile mixes the old run in as current.
        self._lost = False
        self.wake: asyncio.Event | None = None  # set to cut its sleep short (refresh changed)
        # Called with (engine name, body, arrival time) for each metrics payload read (a recorder).
        self.on_payload: Callable[[str, bytes, float], None] | None = None
        self.snapshot = EngineSnapshot(
            name=instance.name,
            profile=instance.profile.name,
            url=instance.url,
            taken_at=time.time(),
            simulated=instance.config.simulated,
            managed=instance.managed,
            gpus=instance.gpus,
            pids=instance.pids,
            metrics_freshness=NOT_COLLECTED,
            health_freshness=NOT_COLLECTED,
        )

    @property
    def digest_budget(self) -> float:
        """Seconds a payload may take to process before the engine is marked for it."""
        return max(1.0, self.period * 2)

    @property
    def collect_timeout(self) -> float:
        """Seconds a whole collection (probes and processing) may take."""
        return max(2.0, self.period * 3) + self.digest_budget

    def fail(self, reason: str) -> EngineSnapshot:
        """This round did not finish: the metrics go stale with ``reason`` (a ready engine shows as
        degraded, with the reason), and nothing else changes."""
        now = time.time()
        prev = self.snapshot
        snap = replace(prev, taken_at=now, metrics_freshness=went_stale(prev.metrics_freshness, now, reason))
        if prev.phase is Phase.READY:
            snap = replace(snap, phase=Phase.DEGRADED, health_detail=reason)
        self.snapshot = snap
        return snap

    async def _digest(self, body: bytes, mono: float) -> _Digest | str:
        """The payload processed in a worker thread within ``digest_budget``; a string says why not."""
        path = self.instance.profile.metrics.path
        busy = self._digesting
        if busy is not None and not busy.done():
            return f"{path}: still processing an earlier payload (over {self.digest_budget:g} s)"
        # A key the UI is handling goes first: the payload's CPU work starts once it is done.
        await self.foreground.opened()
        loop = asyncio.get_running_loop()
        work = loop.run_in_executor(self.executor, self._digest_sync, body, mono, self.want_raw, self._lost)
        # A late result is not awaited by anyone: fetch its exception so none goes unreported.
        work.add_done_callback(lambda f: None if f.cancelled() else f.exception())
        self._digesting = work
        try:
            return await asyncio.wait_for(asyncio.shield(work), timeout=self.digest_budget)
        except TimeoutError:
            size = len(body) / 2**20
            return f"{path}: payload ({size:.1f} MiB) took longer than {self.digest_budget:g} s to process"

    def _digest_sync(self, body: bytes, mono: float, want_raw: bool, afresh: bool = False) -> _Digest | str:
        """Worker thread: parse, normalise, add to the windows (emptied first when ``afresh``). Only
        one runs per engine at a time, so ``self.state`` is never touched by two threads at once."""
        from console.telemetry.metrics.normalize import normalize
        from console.telemetry.metrics.recognize import DRAINED, foreign_hint, is_drained

        profile = self.instance.profile
        reading = normalize(profile, body, full=want_raw, parser=self.parser, memo=self.memo)
        # Another engine's payload (or the wrong profile) is no reading of this one: say whose it is.
        hint = foreign_hint(profile, reading, body)
        if hint:
            return f"{profile.metrics.path}: {hint}"
        if not reading.ok:
            if reading.format == "trtllm-json" and is_drained(body):
                return f"{profile.metrics.path}: {DRAINED}"
            return f"{profile.metrics.path}: unparseable payload ({reading.error_summary()})"
        if afresh:
            self.state.reset()
        # The wall-clock moment of ``mono``, to compare with the series' _created times.
        self.state.ingest(mono, reading, wall=time.time() - (time.monotonic() - mono))
        models, total = self.state.metrics()
        if want_raw:
            return _Digest(models, total, reading.missing, reading.raw, reading.unmapped)
        return _Digest(models, total, reading.missing, None, None)

    async def collect(self) -> EngineSnapshot:
        now = time.time()
        prev = self.snapshot
        resp = None
        if prev.phase is Phase.READY and prev.reachable and self._health_age < self.HEALTH_EVERY:
            # Ready and answering: a metrics scrape that works is proof enough of life.
            self._health_age += 1
            resp = await self.probe.metrics()
            health = Health(Phase.READY, "", True) if resp.status is not None else await self.probe.health()
        else:
            self._health_age = 0
            health = await self.probe.health()
        if not health.reachable:
            self.identity = None  # re-read after a restart: the version may have changed
            self._lost = True
            snap = replace(
                prev,
                taken_at=now,
                phase=health.phase,
                reachable=False,
                health_detail=health.detail,
                health_freshness=went_stale(prev.health_freshness, now, health.detail),
                metrics_freshness=went_stale(prev.metrics_freshness, now, health.detail),
            )
            self.snapshot = snap
            return snap

        stale_identity = self._identity_age >= self.IDENTITY_EVERY and health.phase is Phase.READY
        if self.identity is None or stale_identity:
            self.identity = await self.probe.identity()
            self._identity_age = 0
        self._identity_age += 1

        phase, detail = health.phase, health.detail
        if resp is None or resp.status is None:
            resp = await self.probe.metrics()
        mono = time.monotonic()
        metrics_fresh: Freshness
        raw, unmapped, missing = prev.raw, prev.unmapped, prev.missing
        models: tuple[ModelMetrics, ...] = prev.models
        total = prev.total
        if resp.ok:
            # Stamp the data with the moment the payload arrived, not when the probe began.
            arrived = time.time()
            if self.on_payload is not None:
                self.on_payload(self.instance.name, resp.body, arrived)
            digest = await self._digest(resp.body, mono)
            if isinstance(digest, str):
                metrics_fresh = went_stale(prev.metrics_freshness, now, digest)
            else:
                models, total, missing = digest.models, digest.total, digest.missing
                self.samples += 1
                self._lost = False
                if digest.raw is not None and digest.unmapped is not None:
                    raw, unmapped = digest.raw, digest.unmapped
                metrics_fresh = fresh(arrived)
        else:
            reason = f"{self.instance.profile.metrics.path}: {resp.reason()}"
            if resp.status == 404 and self.instance.profile.metrics.enable_hint:
                reason += f" ({self.instance.profile.metrics.enable_hint})"
            elif resp.status in (401, 403):
                env = self.instance.config.api_key_env
                reason += f" (set {env})" if env and not self.instance.api_key else " (check the API key)"
            metrics_fresh = went_stale(prev.metrics_freshness, now, reason)
        if metrics_fresh.stale and phase is Phase.READY:
            phase, detail = Phase.DEGRADED, metrics_fresh.reason
        snap = replace(
            prev,
            taken_at=now,
            phase=phase,
            reachable=True,
            health_detail=detail,
            identity=self.identity or EngineIdentity(),
            health_freshness=fresh(now),
            metrics_freshness=metrics_fresh,
            models=models,
            total=total,
            raw=raw,
            unmapped=unmapped,
            missing=missing,
        )
        self.snapshot = snap
        return snap
