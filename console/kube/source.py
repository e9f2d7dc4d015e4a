"""``KubeSource``: one ``[sources.NAME] kubernetes = URL`` read every period, as engine snapshots.

A thread of its own lists the pods every ``list_every`` seconds (one ``labelSelector`` request per
known stack, ``console.kube.labels``, or the configured selector), then every ``period`` reads each
Ready pod's ``/metrics`` through the API server's pod proxy and puts it through the normaliser and
the windows of a local engine (``EngineMetricsState``). ``view()`` has the shape of a remote host's
stream (``console.remote``): the source is STALE with why when the API server does not answer or
refuses the list (a 403 names the RBAC permission missing); a pod not Ready is shown with its
phase and reason, one whose proxy read fails is unreachable with why, and one gone from the list
is shown gone for ``GONE_KEEP_S``. Logs come from ``kubectl logs`` on request, in another thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from console.kube.api import KubeClient, KubeError, proxy_path
from console.kube.labels import STACK_SELECTORS, PodInfo, pod_info
from console.kube.logs import kubectl_logs
from console.model import (
    Alert,
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    HostView,
    Phase,
    aged,
    late_after,
)
from console.model import SourceState as S
from console.profiles import EngineProfile
from console.prometheus.federate import profile_for
from console.sources import KubeTarget, PolledSource
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.promtext import parse
from console.telemetry.metrics.windows import EngineMetricsState

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())

SLACK_S = 1.0
GONE_KEEP_S = 60.0  # a pod gone from the list is shown gone this long, then dropped
SCRAPE_WORKERS = 8  # pod-proxy reads in flight at once
LOG_TAIL = 200


@dataclass
class _Pod:
    """What is kept of one pod between reads."""

    info: PodInfo
    snap: EngineSnapshot
    profile: EngineProfile | None = None
    state: EngineMetricsState | None = None
    gone_at: float | None = None


class KubeSource(PolledSource):
    """Reads ``target``; ``on_change()`` is called (in its thread) after each read or state change."""

    KIND = "kubernetes"
    target: KubeTarget

    def __init__(self, target: KubeTarget, profiles: Mapping[str, EngineProfile], *,
                 on_change: Callable[[], None] | None = None) -> None:
        self.target = target
        self._profiles = dict(profiles)
        self._on_change = on_change
        self._client = KubeClient(target)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pods: dict[str, _Pod] = {}
        self._reason = "connecting"
        self._stale_since: float | None = time.time()
        self._last_ok: float | None = None
        self._listed_at = 0.0  # time.monotonic() of the last pod list (0: never)
        self.resource_version = ""
        self._logs: dict[str, tuple[list[str], str, float]] = {}  # ident -> (lines, reason, read at)
        self._log_thread: threading.Thread | None = None

    # -- life --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"enginedeck-kube-{self.target.name}", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        for t in (self._thread, self._log_thread):
            if t is not None:
                t.join(timeout)
        self._thread = None
        with contextlib.suppress(Exception):
            self._client.close()

    def kill(self) -> None:
        """Nothing to kill (kubectl runs only within a call, with a time limit)."""

    # -- what readers see ----------------------------------------------------------------------

    def view(self, now: float | None = None) -> tuple[HostView, FleetSnapshot | None, tuple[Alert, ...]]:
        now = time.time() if now is None else now
        with self._lock:
            engines = [p.snap for p in self._pods.values()]
            reason, since, last = self._reason, self._stale_since, self._last_ok
        fresh = Freshness(S.STALE, updated_at=last, stale_since=since, reason=reason) if reason else \
            aged(Freshness(S.OK, updated_at=last), now, late_after(self.target.period, self.target.timeout + SLACK_S),
                 f"no answer from the API server for {now - last:.0f} s" if last is not None else "")
        view = HostView(name=self.target.name, destination=self.target.display, freshness=fresh, last_doc_at=last,
                        gpus=GpuFleet(source="none"), engines=len(engines), kind="kubernetes")
        snap = FleetSnapshot(taken_at=now, engines=tuple(sorted(engines, key=lambda e: e.name)),
                             gpus=GpuFleet(source="none")) if last is not None else None
        return view, snap, ()

    def pods(self) -> dict[str, PodInfo]:
        """The pods known now, by engine ident (gone ones included until dropped)."""
        with self._lock:
            return {k: p.info for k, p in self._pods.items()}

    # -- the thread ------------------------------------------------------------------------------

    def read_once(self) -> None:
        """One read: the pod list when due, then every Ready pod's metrics through the proxy."""
        if not self._listed_at or time.monotonic() - self._listed_at >= self.target.list_every:
            try:
                self._list()
            except KubeError as exc:
                self._fail(str(exc))
                return
        with self._lock:
            todo = [(k, p.info) for k, p in self._pods.items() if p.gone_at is None and p.info.ready and p.info.port]
        with ThreadPoolExecutor(max_workers=SCRAPE_WORKERS, thread_name_prefix="enginedeck-kube-read") as pool:
            results = list(pool.map(self._read_pod, todo))
        now = time.time()
        for (ident, info), (body, err) in zip(todo, results, strict=True):
            self._ingest(ident, info, body, err, now)
        with self._lock:
            self._reason, self._stale_since, self._last_ok = "", None, now

    def _list(self) -> None:
        selectors = [(None, self.target.selector)] if self.target.selector else list(STACK_SELECTORS)
        found: dict[str, PodInfo] = {}
        version = ""
        for stack, sel in selectors:
            version, items = self._client.list_pods(sel)
            for item in items:
                info = pod_info(item, stack=None if stack else "selector")
                if info is not None and info.uid not in {i.uid for i in found.values()}:
                    found[self._ident(info)] = info
        self._listed_at = time.monotonic()
        self.resource_version = version
        now = time.time()
        with self._lock:
            for ident, info in found.items():
                known = self._pods.get(ident)
                if known is None or known.info.uid != info.uid:
                    self._pods[ident] = _Pod(info, _initial(self.target, ident, info))
                else:
                    known.info, known.gone_at = info, None
                self._pods[ident].snap = _with_pod_state(self._pods[ident].snap, info, now)
            for ident, p in list(self._pods.items()):
                if ident in found:
                    continue
                if p.gone_at is None:
                    p.gone_at = now
                    p.snap = _gone(p.snap, now)
                elif now - p.gone_at > GONE_KEEP_S:
                    del self._pods[ident]

    def _ident(self, info: PodInfo) -> str:
        return info.name if self.target.namespace else f"{info.name}.{info.namespace}"

    def _read_pod(self, job: tuple[str, PodInfo]) -> tuple[bytes | None, str]:
        _ident, info = job
        try:
            return self._client.metrics(info.namespace, info.name, info.port or 0, info.path), ""
        except KubeError as exc:
            return None, str(exc)

    def _ingest(self, ident: str, info: PodInfo, body: bytes | None, err: str, now: float) -> None:
        with self._lock:
            p = self._pods.get(ident)
        if p is None or p.info.uid != info.uid:
            return
        snap = p.snap
        if body is None:
            f = snap.metrics_freshness
            stale = Freshness(S.STALE, f.updated_at, f.stale_since or now, err)
            p.snap = replace(snap, taken_at=now, reachable=False, phase=Phase.UNREACHABLE, health_detail=err,
                             metrics_freshness=stale, health_freshness=replace(stale, updated_at=now))
            return
        if p.profile is None:
            p.profile = self._profile(info, body)
            if p.profile is None:
                why = "no engine metrics at " + snap.url + " (not a vLLM/SGLang/TGI/trtllm/llama.cpp payload)"
                p.snap = replace(snap, taken_at=now, reachable=True, phase=Phase.DEGRADED, health_detail=why,
                                 metrics_freshness=Freshness(S.STALE, stale_since=now, reason=why))
                return
            p.state = EngineMetricsState(p.profile)
        assert p.state is not None
        reading = normalize(p.profile, body, full=True)
        p.state.ingest(time.monotonic(), reading, wall=now)
        models, total = p.state.metrics()
        served = tuple(m.model for m in models if m.model)
        ok = Freshness(S.OK, updated_at=now)
        p.snap = replace(snap, profile=p.profile.name, taken_at=now, reachable=True, phase=Phase.READY,
                         health_detail="", models=models, total=total, raw=reading.raw, unmapped=reading.unmapped,
                         missing=reading.missing, identity=EngineIdentity(models=served or ((info.model,) if info.model
                                                                                           else ())),
                         metrics_freshness=ok, health_freshness=ok)

    def _profile(self, info: PodInfo, body: bytes) -> EngineProfile | None:
        forced = self.target.profile or info.profile_hint
        if forced and forced in self._profiles:
            return self._profiles[forced]
        return profile_for(parse(body).families, self._profiles)

    # -- logs --------------------------------------------------------------------------------------

    def log_tail(self, ident: str, n: int = LOG_TAIL) -> tuple[list[str], str] | None:
        """The pod's last log lines as last read ((lines, "") or ([], why)); asks for a fresh read
        (in a thread of its own, at most one at a time) when the last is older than 2 s. None: not
        read yet."""
        with self._lock:
            info = self._pods[ident].info if ident in self._pods else None
            got = self._logs.get(ident)
        if info is None:
            return None
        running = self._log_thread is not None and self._log_thread.is_alive()
        if not running and (got is None or time.monotonic() - got[2] > 2.0):
            def work() -> None:
                lines, why = kubectl_logs(self.target, info.namespace, info.name, info.container, n)
                with self._lock:
                    self._logs[ident] = (lines, why, time.monotonic())
                self._changed()

            self._log_thread = threading.Thread(target=work, name=f"enginedeck-kube-logs-{ident}", daemon=True)
            self._log_thread.start()
        return None if got is None else (got[0], got[1])


_PENDING = {"ContainerCreating": Phase.CREATING, "PodInitializing": Phase.CREATING, "ErrImagePull": Phase.PULLING,
            "ImagePullBackOff": Phase.PULLING, "CrashLoopBackOff": Phase.FAILED}


def _with_pod_state(snap: EngineSnapshot, info: PodInfo, now: float) -> EngineSnapshot:
    """A pod that is not Ready shows its phase and reason (its last numbers are not current)."""
    snap = replace(snap, role=info.role or snap.role)
    if info.ready:
        return snap
    why = f"pod {info.phase}" + (f": {info.reason}" if info.reason else "")
    key = info.reason.split(":", 1)[0]
    phase = {"Failed": Phase.FAILED, "Succeeded": Phase.EXITED}.get(info.phase) or _PENDING.get(key) or (
        Phase.STARTING if info.phase == "Pending" else Phase.LOADING)
    stale = Freshness(S.STALE, snap.metrics_freshness.updated_at, snap.metrics_freshness.stale_since or now, why)
    return replace(snap, taken_at=now, reachable=False, phase=phase, health_detail=why, metrics_freshness=stale,
                   health_freshness=replace(stale, updated_at=now))


def _gone(snap: EngineSnapshot, now: float) -> EngineSnapshot:
    why = "pod gone from the API server's list (deleted, evicted or relabelled)"
    stale = Freshness(S.STALE, snap.metrics_freshness.updated_at, now, why)
    return replace(snap, taken_at=now, reachable=False, phase=Phase.EXITED, health_detail=why,
                   metrics_freshness=stale, health_freshness=stale)


def _initial(target: KubeTarget, ident: str, info: PodInfo) -> EngineSnapshot:
    waiting = Freshness(S.STALE, reason="not read yet")
    where = target.display + proxy_path(info.namespace, info.name, info.port, info.path) if info.port else \
        f"{target.display} (pod {info.namespace}/{info.name}: no metrics port found)"
    return EngineSnapshot(name=ident, profile=target.profile or info.profile_hint or "unknown", url=where,
                          taken_at=time.time(), source=target.name, role=info.role,
                          identity=EngineIdentity(models=(info.model,) if info.model else ()),
                          metrics_freshness=waiting, health_freshness=waiting)
