"""A firing alert says when it will resolve while it waits out its clear period, and an engine you
stop resolves its alerts with the reason "stopped by you" (issue 31 item 10)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from console.alerts.evaluate import STOPPED_BY_YOU, AlertEvaluator
from console.alerts.rules import load_rules
from console.model import (
    Alert,
    AlertState,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    LifecycleView,
    ModelMetrics,
    Phase,
    Rates,
)
from console.profiles import load_profiles

T0 = 1_800_000_000.0
RULES = {r.id: r for r in load_rules(user=False)}


def _engine(t: float, preemptions_per_s: float, **kw: Any) -> EngineSnapshot:
    m = ModelMetrics(model="m", running=4.0, waiting=0.0, preemption_rate=Rates(preemptions_per_s, preemptions_per_s,
                                                                                 preemptions_per_s))
    return replace(EngineSnapshot(name="vllm-a", profile="vllm", url="http://127.0.0.1:8000", taken_at=t,
                                  phase=Phase.READY, reachable=True, metrics_freshness=Freshness(updated_at=t),
                                  health_freshness=Freshness(updated_at=t), models=(m,), total=m, managed=True),
                   **kw)


def _run(ev: AlertEvaluator, start: float, seconds: int, **engine: Any) -> Alert:
    alert = None
    for dt in range(0, seconds, 5):
        t = start + dt
        alert = next(a for a in ev.evaluate(FleetSnapshot(taken_at=t, engines=(_engine(t, **engine),)))
                     if a.rule == "preempting")
    assert alert is not None
    return alert


def _firing() -> AlertEvaluator:
    ev = AlertEvaluator([RULES["preempting"]], {"vllm": load_profiles()["vllm"]})
    assert _run(ev, T0, 70, preemptions_per_s=0.5).state is AlertState.FIRING  # for = 60 s
    return ev


def test_a_firing_alert_that_stopped_holding_says_when_it_clears() -> None:
    ev = _firing()
    rule = RULES["preempting"]
    held = _run(ev, T0 + 70, 5, preemptions_per_s=0.5)
    assert held.state is AlertState.FIRING and held.clears_at is None
    quiet_from = T0 + 75
    clearing = _run(ev, quiet_from, 20, preemptions_per_s=0.0)  # last evaluation at +15 s
    assert clearing.state is AlertState.FIRING
    assert clearing.clears_at == quiet_from + rule.clear_for  # 60 s after it stopped holding
    assert _run(ev, quiet_from + 20, 45, preemptions_per_s=0.0).state is AlertState.RESOLVED


def test_an_engine_stopped_by_you_resolves_its_alerts_and_says_why() -> None:
    ev = _firing()
    stopping = LifecycleView(phase=Phase.STOPPING, detail="stopping", since=T0 + 70)
    # The stop leaves the last figures in the snapshot; the phase says the engine is going away.
    resolved = _run(ev, T0 + 70, 5, preemptions_per_s=0.5, phase=Phase.STOPPING, lifecycle=stopping)
    assert resolved.state is AlertState.RESOLVED and resolved.note == STOPPED_BY_YOU
    stopped = LifecycleView(phase=Phase.EXITED, detail="stopped (exit code 0)", ended="stopped", exit_code=0,
                            since=T0 + 75)
    later = _run(ev, T0 + 75, 120, preemptions_per_s=0.0, phase=Phase.EXITED, reachable=False, lifecycle=stopped)
    assert later.state is AlertState.RESOLVED and later.note == STOPPED_BY_YOU


def test_an_engine_that_crashed_keeps_its_alerts() -> None:
    ev = _firing()
    crashed = LifecycleView(phase=Phase.EXITED, detail="exited (exit code 1)", ended="crashed", exit_code=1,
                            since=T0 + 70)
    alert = _run(ev, T0 + 70, 30, preemptions_per_s=0.0, phase=Phase.EXITED, reachable=False, lifecycle=crashed)
    assert alert.state is AlertState.FIRING and alert.note == ""
