"""The explain popup for an alert (``e`` on the alerts screen): the rule's formula, each signal's
inputs in THIS engine's raw names, their values now, the hold times and the runbook line."""

from __future__ import annotations

from functools import lru_cache

from rich.text import Text

from console.alerts.rules import Rule, load_rules
from console.alerts.signals import SIGNALS
from console.model import Alert, AlertState
from console.profiles import EngineProfile
from console.ui import format as fmt


@lru_cache(maxsize=1)
def _rules() -> dict[str, Rule]:
    return {r.id: r for r in load_rules()}


def _value(v: float | None) -> str:
    return "n/a (no verdict now)" if v is None else f"{v:.4g}"


def explain_alert(rule_id: str, alert: Alert | None, profile: EngineProfile | None) -> Text:
    out = Text()
    rule = _rules().get(rule_id)
    if rule is None:
        out.append(f"No alert rule {rule_id!r}.\n", style="dim")
        return out
    out.append(f"{rule.summary}\n", style="bold")
    out.append(f"rule {rule.id} · {rule.severity.value} · from {rule.source}\n\n", style="dim")
    out.append("Fires when ", style="bold")
    out.append(" and ".join(c.text() for c in rule.when))
    out.append(f" holds for {rule.for_s:g} s; resolves when one condition fails at its clear threshold for "
               f"{rule.clear_for:g} s.\n")
    if alert is not None:
        out.append("Now: ", style="bold")
        style = fmt.CRIT if alert.state is AlertState.FIRING else None
        out.append(alert.state.value, style=style)
        out.append(f" for {alert.engine}\n")
        if alert.note:
            out.append(f"  {alert.note}\n", style=fmt.WARN)
    values = dict(alert.values) if alert is not None else {}
    for c in rule.when:
        sig = SIGNALS[c.signal]
        out.append(f"\n{c.signal}", style="bold")
        out.append(f" = {_value(values.get(c.signal))}  [{sig.unit}]\n")
        out.append(f"  {sig.formula}\n")
        if c.enter_only:
            out.append("  needed to enter only (the alert stays active without it)\n", style="dim")
        if c.at_finish_value is not None:
            out.append(f"  {c.at_finish_value:g} instead of {c.value:g} on engines that count tokens only when a "
                       "request finishes\n", style="dim")
        if sig.gpu:
            out.append("  from the engine's GPUs (NVML): n/a where none is attributed to it\n", style="dim")
            continue
        if not sig.inputs:
            continue
        if profile is None or not sig.available(profile):
            out.append("  this engine's profile maps none of its inputs: n/a, never ok\n", style=fmt.WARN)
            continue
        for name in sig.inputs_for(profile):
            m = profile.metrics.map[name]
            out.append(f"  {name}: ", style="bold")
            out.append(" | ".join(m.names) + f"  [{m.kind}]\n")
    if rule.runbook:
        out.append("\nRunbook: ", style="bold")
        out.append(rule.runbook + "\n")
    return out
