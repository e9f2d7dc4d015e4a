"""The alert state machine: every rule on every engine, once per fleet snapshot.

States (``console.model.AlertState``): a rule's conditions all hold -> ``pending``; held for the
rule's ``for`` seconds -> ``firing``; then, once a condition fails at its *clear* threshold for
``clear_for`` seconds -> ``resolved`` (kept on show for ``RESOLVED_SHOWN_S``, then ``ok``). Pending
that stops holding goes back to ``ok`` without a resolve. An engine you stop (or are stopping)
resolves what fired at once, with the note "stopped by you", and enters nothing while stopped.
The two thresholds and the clear hold are the hysteresis: noise around the firing threshold
neither fires twice nor resolves early.

No verdict (a signal is ``None``: not live, too little traffic or history) changes nothing: a
pending alert does not progress, a firing one does not start clearing. Time is the snapshot's
``taken_at`` only, so tests run hours of virtual time in milliseconds. Cheap: a few comparisons per
rule and engine; the hub calls it in its publish path, never the UI.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from console.alerts.signals import SIGNALS, EngineMemory, Slo
from console.model import Alert, AlertState, EngineSnapshot, FleetSnapshot, Phase

if TYPE_CHECKING:
    from console.alerts.rules import Rule
    from console.profiles import EngineProfile

RESOLVED_SHOWN_S = 300.0


@dataclass(slots=True)
class _Track:
    state: AlertState = AlertState.OK
    since: float | None = None
    entered: float = 0.0
    clear_since: float | None = None
    by_stop: bool = False  # resolved because the user stopped the engine


STOPPED_BY_YOU = "stopped by you"


def stopped_by_user(e: EngineSnapshot) -> bool:
    """A managed engine being stopped, or stopped, on request: its alerts are over, not its fault."""
    lc = e.lifecycle
    return lc is not None and (lc.phase is Phase.STOPPING or (lc.phase is Phase.EXITED and lc.ended == "stopped"))


class AlertEvaluator:
    """Keeps each engine's signal memory and each (rule, engine) state between snapshots."""

    def __init__(self, rules: Sequence[Rule], profiles: Mapping[str, EngineProfile]) -> None:
        self.rules = tuple(rules)
        self.profiles = profiles
        self._mem: dict[str, EngineMemory] = {}
        self._tracks: dict[tuple[str, str], _Track] = {}
        self._texts: dict[tuple[str, bool], str] = {}

    def __call__(self, snap: FleetSnapshot) -> tuple[Alert, ...]:
        return self.evaluate(snap)

    def evaluate(self, snap: FleetSnapshot) -> tuple[Alert, ...]:
        now = snap.taken_at
        out: list[Alert] = []
        names = set()
        for e in snap.engines:
            names.add(e.name)
            mem = self._mem.get(e.name)
            if mem is None:
                mem = self._mem[e.name] = EngineMemory()
            mem.observe(e, snap, now)
            profile = self.profiles.get(e.profile)
            out.extend(self._rule(rule, e, mem, profile, now) for rule in self.rules)
        for gone in set(self._mem) - names:
            del self._mem[gone]
            for key in [k for k in self._tracks if k[1] == gone]:
                del self._tracks[key]
        return tuple(out)

    def with_alerts(self, snap: FleetSnapshot) -> FleetSnapshot:
        return replace(snap, alerts=self.evaluate(snap))

    def _text(self, rule: Rule, at_finish: bool) -> str:
        key = (rule.id, at_finish)
        text = self._texts.get(key)
        if text is None:
            text = self._texts[key] = " and ".join(
                c.text(at_finish and SIGNALS[c.signal].at_finish_sensitive) for c in rule.when)
        return text

    def _rule(self, rule: Rule, e: EngineSnapshot, mem: EngineMemory, profile: EngineProfile | None,
              now: float) -> Alert:
        base = Alert(rule=rule.id, engine=e.name, severity=rule.severity.value, state=AlertState.NA,
                     summary=rule.summary, runbook=rule.runbook, condition=self._text(rule, False))
        signals = [SIGNALS[c.signal] for c in rule.when]
        if not all(s.available(profile) for s in signals):
            return base
        slo = Slo(rule.slo.ttft_s, rule.slo.objective) if rule.slo is not None else None
        at_finish = mem.m is not None and mem.m.generation_tps.at_finish
        values = [s.compute(mem, slo) for s in signals]
        if any(s.gpu for s in signals) and not mem.gpus:
            return base  # no GPU attributed to this engine: n/a
        key = (rule.id, e.name)
        tr = self._tracks.get(key)
        if tr is None:
            tr = self._tracks[key] = _Track()
        enter = all(v is not None and c.holds(v, False, at_finish and s.at_finish_sensitive)
                    for c, s, v in zip(rule.when, signals, values, strict=True))
        stay_vals = [(c, s, v) for c, s, v in zip(rule.when, signals, values, strict=True) if not c.enter_only]
        unknown = any(v is None for _, _, v in stay_vals)
        stay = not unknown and all(c.holds(v, True, at_finish and s.at_finish_sensitive)
                                   for c, s, v in stay_vals if v is not None)
        if stopped_by_user(e):
            # You stopped it: what fired resolves now (and says why), nothing new enters.
            if tr.state is AlertState.FIRING:
                tr.state, tr.since, tr.clear_since, tr.by_stop = AlertState.RESOLVED, now, None, True
            elif tr.state is AlertState.PENDING:
                tr.state, tr.since = AlertState.OK, now
            self._step(tr, rule, now, enter=False, stay=False, unknown=True)
        else:
            self._step(tr, rule, now, enter, stay, unknown)
        state = tr.state
        if state is AlertState.OK and values[0] is None:
            state = AlertState.NO_DATA
        note = mem.ttft_snap_note if slo is not None else ""
        if tr.by_stop and state is AlertState.RESOLVED:
            note = STOPPED_BY_YOU
        clears_at = None
        if state is AlertState.FIRING and tr.clear_since is not None:
            clears_at = tr.clear_since + rule.clear_for
        return Alert(rule=rule.id, engine=e.name, severity=base.severity, state=state, summary=rule.summary,
                     since=tr.since, value=values[0], condition=self._text(rule, at_finish), note=note,
                     values=tuple((c.signal, v) for c, v in zip(rule.when, values, strict=True)),
                     runbook=rule.runbook, clears_at=clears_at)

    @staticmethod
    def _step(tr: _Track, rule: Rule, now: float, enter: bool, stay: bool, unknown: bool) -> None:
        if tr.state in (AlertState.OK, AlertState.RESOLVED):
            if enter:
                tr.state, tr.since, tr.entered, tr.clear_since = AlertState.PENDING, now, now, None
                tr.by_stop = False
            elif tr.state is AlertState.RESOLVED and tr.since is not None and now - tr.since >= RESOLVED_SHOWN_S:
                tr.state, tr.since = AlertState.OK, now
        if tr.state is AlertState.PENDING:
            if unknown:
                return
            if not stay:
                tr.state, tr.since = AlertState.OK, now
            elif now - tr.entered >= rule.for_s:
                tr.state, tr.since, tr.clear_since = AlertState.FIRING, now, None
            return
        if tr.state is AlertState.FIRING and not unknown:
            if stay:
                tr.clear_since = None
                return
            if tr.clear_since is None:
                tr.clear_since = now
            if now - tr.clear_since >= rule.clear_for:
                tr.state, tr.since, tr.clear_since = AlertState.RESOLVED, now, None


def counts(alerts: Sequence[Alert]) -> dict[str, int]:
    """Firing alerts by severity (critical, warning, info), for the header badge."""
    out = {"critical": 0, "warning": 0, "info": 0}
    for a in alerts:
        if a.state is AlertState.FIRING:
            out[a.severity] = out.get(a.severity, 0) + 1
    return out


def worst(alerts: Sequence[Alert], engine: str) -> str | None:
    """The most severe firing alert's severity on one engine (for row tint), or None."""
    sev = {a.severity for a in alerts if a.engine == engine and a.state is AlertState.FIRING}
    for s in ("critical", "warning", "info"):
        if s in sev:
            return s
    return None


def evaluator_for(instances: Sequence[object], extra_dirs: Sequence[object] = ()) -> AlertEvaluator:
    """The evaluator for these engine instances (``EngineInstance``: its ``profile``), with the
    shipped rules and the user's; a broken rules file raises a one-line ``ConfigError``."""
    from pathlib import Path

    from console.alerts.rules import load_rules

    profiles = {p.name: p for p in (getattr(i, "profile", None) for i in instances) if p is not None}
    return AlertEvaluator(load_rules([Path(str(d)) for d in extra_dirs]), profiles)
