"""One ``FleetSnapshot`` out of this machine's and every remote host's (pure: no I/O, no threads).

A remote engine is named ``HOST/NAME`` and carries ``host``; its GPUs are numbered after this
machine's (``host`` set on each, the engines' GPU lists renumbered with them) and its alerts name
the qualified engine. A STALE host never shows its last numbers as current: its engines become
unreachable with the host's reason, its GPUs lose their live readings and its active alerts turn
to "no data".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from console.model import (
    Alert,
    AlertState,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuSnapshot,
    HostSnapshot,
    HostView,
    Phase,
    SourceState,
)

HostPart = tuple[HostView, FleetSnapshot | None, tuple[Alert, ...]]


def qualified(host: str, name: str) -> str:
    return f"{host}/{name}"


def _engine(e: EngineSnapshot, view: HostView, gpu_map: dict[int, int]) -> EngineSnapshot:
    out = replace(e, name=qualified(view.name, e.name), host=view.name,
                  gpus=tuple(gpu_map.get(g, g) for g in e.gpus), pids=())  # remote pids mean nothing here
    if not view.freshness.stale:
        return out
    why = f"{_what(view)} {view.name}: {view.freshness.reason or 'stale'}"
    stale = Freshness(SourceState.STALE, updated_at=e.metrics_freshness.updated_at,
                      stale_since=view.freshness.stale_since, reason=why)
    return replace(out, reachable=False, phase=Phase.UNREACHABLE, health_detail=why, metrics_freshness=stale,
                   health_freshness=replace(stale, updated_at=e.health_freshness.updated_at))


def _what(view: HostView) -> str:
    return "source" if view.kind in ("prometheus", "kubernetes") else "host"


def _gpu(g: GpuSnapshot, view: HostView, index: int) -> GpuSnapshot:
    procs = tuple(replace(p, engine=qualified(view.name, p.engine) if p.engine else None) for p in g.processes)
    out = replace(g, index=index, host=view.name, processes=procs)
    if view.freshness.stale:
        out = replace(out, util_percent=None, mem_util_percent=None, mem_used_bytes=None, temperature_c=None,
                      power_w=None, sm_clock_mhz=None, mem_clock_mhz=None, energy=None, processes=())
    return out


def _alert(a: Alert, view: HostView) -> Alert:
    out = replace(a, engine=qualified(view.name, a.engine))
    if view.freshness.stale and a.state in (AlertState.PENDING, AlertState.FIRING):
        out = replace(out, state=AlertState.NO_DATA, since=view.freshness.stale_since,
                      note=f"{_what(view)} {view.name} is stale")
    return out


def merge(local: FleetSnapshot | None, parts: Sequence[HostPart], now: float) -> FleetSnapshot:
    """This machine's snapshot (None: no local engines watched) and the hosts', as one fleet."""
    engines = list(local.engines) if local is not None else []
    gpus = list(local.gpus.gpus) if local is not None else []
    alerts = list(local.alerts) if local is not None else []
    views = []
    for view, snap, host_alerts in parts:
        views.append(view)
        if snap is None:
            continue
        base = max((g.index for g in gpus), default=-1) + 1
        gpu_map = {g.index: base + i for i, g in enumerate(snap.gpus.gpus)}
        gpus.extend(_gpu(g, view, gpu_map[g.index]) for g in snap.gpus.gpus)
        engines.extend(_engine(e, view, gpu_map) for e in snap.engines)
        alerts.extend(_alert(a, view) for a in host_alerts)
    return FleetSnapshot(taken_at=now, engines=tuple(engines), gpus=_gpu_fleet(local, parts, tuple(gpus)),
                         host=_host(local, parts), alerts=tuple(alerts), hosts=tuple(views))


def _gpu_fleet(local: FleetSnapshot | None, parts: Sequence[HostPart], gpus: tuple[GpuSnapshot, ...]) -> GpuFleet:
    if local is not None:
        return replace(local.gpus, gpus=gpus)
    fleets = [snap.gpus for _view, snap, _a in parts if snap is not None]
    if not fleets:
        return GpuFleet(source="none", freshness=Freshness(SourceState.STALE, reason="no host has reported yet"))
    simulated = all(f.source == "simulated" for f in fleets)
    reason = "" if gpus else next((f.unavailable_reason for f in fleets if f.unavailable_reason), "")
    stale = [v.name for v, _s, _a in parts if v.freshness.stale]
    fresh = Freshness(SourceState.STALE, reason=f"stale host: {', '.join(stale)}") if stale else Freshness()
    drivers = {f.driver_version for f in fleets if f.driver_version}
    return GpuFleet(gpus=gpus, freshness=fresh, driver_version=drivers.pop() if len(drivers) == 1 else None,
                    source="simulated" if simulated else "nvml", unavailable_reason=reason)


def _host(local: FleetSnapshot | None, parts: Sequence[HostPart]) -> HostSnapshot | None:
    """This machine's host stats, or the one remote host's when it is the only one watched."""
    if local is not None:
        return local.host
    if len(parts) == 1:
        view = parts[0][0]
        if view.host is not None and view.freshness.stale:
            return replace(view.host, freshness=view.freshness)
        return view.host
    return None
