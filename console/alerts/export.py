"""The alert rules as a Prometheus rules file, in each engine's raw metric names.

One group per engine profile (``enginedeck-vllm``, ...), holding each rule whose inputs the profile
maps, plus a ``enginedeck-gpu`` group on NVIDIA DCGM exporter names. Every series is aggregated
``by (instance)`` before conditions are joined ``and on (instance)`` (summing both sides before a
division avoids llm-d-router's vector-matching pitfall). Old and new raw names of one metric are
joined with ``or``. A signal that needs history (a burn rate over hours, a prefix-hit baseline) is
guarded by ``signals.min_history_s``, as in the console: no alert before its series has been there that
long. The console's clear thresholds have no PromQL form; a rule's ``clear_for`` becomes
``keep_firing_for`` (Prometheus 2.42 and newer). A TTFT SLO threshold must be one of the engine's
histogram bucket bounds (``le``): the console snaps it, a rules file cannot.
The output is YAML written by hand (strings JSON-quoted, which YAML reads as they are).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from console.alerts.rules import Condition, Rule
from console.alerts.signals import (
    BASELINE_OFFSET_S,
    BASELINE_S,
    MIN_BASELINE_HIT,
    MIN_PREFIX_TOKENS_PER_S,
    MIN_REQUESTS_FOR_RATIO,
    SIGNALS,
    SLO_WINDOWS,
    min_history_s,
)
from console.profiles import EngineProfile, MetricMapping

BY = "instance"
# DCGM exporter fields for the GPU rules, and the clock-event bits of NVML's throttle reasons.
DCGM = {"gpu_temperature_c": "DCGM_FI_DEV_GPU_TEMP", "gpu_util_percent": "DCGM_FI_DEV_GPU_UTIL"}
THROTTLE_BITS = {"sw_power_cap": 4, "hw_slowdown": 8, "sw_thermal": 32, "hw_thermal": 64, "hw_power_brake": 128}


def _secs(s: float) -> str:
    return f"{int(s)}s" if float(s).is_integer() else f"{int(s * 1000)}ms"


def _selector(name: str, m: MetricMapping, suffix: str = "", extra: str = "") -> list[str]:
    """Selectors of one raw name, one per alternative label of a ``match`` key such as "a|b"."""
    groups: list[list[str]] = [[]]
    for key, values in m.match.items():
        alts = key.split("|")
        regex = "|".join(values)
        groups = [[*g, f'{label}=~"{regex}"'] for g in groups for label in alts]
    return [f"{name}{suffix}{{{','.join([*g, *([extra] if extra else [])])}}}" if g or extra else f"{name}{suffix}"
            for g in groups]


def _any_name(m: MetricMapping, fn: str, suffix: str = "", extra: str = "") -> str:
    """``fn`` applied to every raw name of a mapping, aggregated by instance, joined with or."""
    parts = []
    for name in m.names:
        sels = _selector(name, m, suffix, extra)
        inner = " or ".join(fn.format(s) for s in sels)
        parts.append(f"sum by ({BY}) ({inner})" if m.aggregate != "max" else f"max by ({BY}) ({inner})")
    expr = parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
    if m.scale != 1.0:
        expr = f"({expr} * {m.scale:g})"
    return expr


def gauge(p: EngineProfile, canonical: str, offset: str = "") -> str:
    m = p.metrics.map[canonical]
    return _any_name(m, "{}" + (f" offset {offset}" if offset else ""))


def _counter_suffix(m: MetricMapping) -> str:
    return {"histogram_sum": "_sum", "histogram_count": "_count"}.get(m.kind, "")


def rate(p: EngineProfile, canonical: str, window: str, fn: str = "rate", offset: str = "") -> str:
    """Per-second rate of a canonical counter (plus parts added, absent ones as 0)."""
    m = p.metrics.map[canonical]
    call = fn + "({}[" + window + "]" + (f" offset {offset}" if offset else "") + ")"
    first = _any_name(m, call, _counter_suffix(m))
    for part in m.plus:
        extra = _any_name(part, call, _counter_suffix(part))
        first = f"({first} + ({extra} or {first} * 0))"
    return first


def _history_guard(p: EngineProfile, canonical: str, signal: str) -> str:
    """PromQL that holds once the canonical counter's series has been there ``min_history_s(signal)``
    seconds: the console gives no verdict before that, so the exported rule may not fire either."""
    m = p.metrics.map[canonical]
    suffix = "_count" if m.kind == "histogram" else _counter_suffix(m)
    return _any_name(m, "{} offset " + _secs(min_history_s(signal)), suffix)


def _cmp(expr: str, c: Condition, at_finish: bool = False) -> str:
    return f"({expr}) {c.op} {c.threshold(False, at_finish):g}"


def condition(p: EngineProfile, rule: Rule, c: Condition, jobs: Mapping[str, str]) -> str:
    """One condition of a rule as PromQL on this profile's raw names."""
    s = c.signal
    if s in ("kv_usage", "waiting", "running"):
        return _cmp(gauge(p, s), c)
    if s == "waiting_growth_30s":
        return _cmp(f"{gauge(p, 'waiting')} - {gauge(p, 'waiting', '30s')}", c)
    if s == "preemption_rate":
        return _cmp(rate(p, "preemptions", "1m"), c)
    if s == "decode_stalled_s":
        gen = p.metrics.map["generation_tokens"]
        t = c.threshold(False, gen.at_finish)
        return f"({gauge(p, 'running')} > 0) and on ({BY}) ({rate(p, 'generation_tokens', _secs(t), 'increase')} == 0)"
    if s == "prefix_hit_vs_baseline":
        base, off = _secs(BASELINE_S), _secs(BASELINE_OFFSET_S)
        settle = _secs(min_history_s(s))
        counter = "prefix_queries" if "prefix_hits" in p.metrics.map and "prefix_queries" in p.metrics.map else (
            "prompt_tokens")
        if counter == "prefix_queries":
            now = f"{rate(p, 'prefix_hits', '1m')} / {rate(p, 'prefix_queries', '1m')}"
            then = f"{rate(p, 'prefix_hits', base, offset=off)} / {rate(p, 'prefix_queries', base, offset=off)}"
        else:
            now = gauge(p, "prefix_hit_rate_gauge")
            then = _any_name(p.metrics.map["prefix_hit_rate_gauge"], f"avg_over_time({{}}[{base}] offset {off})")
        traffic = rate(p, counter, "1m")
        # The console's guards (signals.py): enough traffic, a baseline worth dropping from, and no
        # verdict until the baseline covers enough time since the engine (re)started.
        restart = rate(p, counter, settle, "resets")
        return (f"(({now}) / ({then})) {c.op} {c.value:g} and on ({BY}) ({traffic} >= {MIN_PREFIX_TOKENS_PER_S:g})"
                f" and on ({BY}) (({then}) >= {MIN_BASELINE_HIT:g})"
                f" and on ({BY}) ({_history_guard(p, counter, s)}) and on ({BY}) ({restart} == 0)")
    if s.startswith("ttft_slo_burn_"):
        assert rule.slo is not None
        w = _secs(SLO_WINDOWS[s.removeprefix("ttft_slo_burn_")])
        m = p.metrics.map["ttft"]
        le = repr(float(rule.slo.ttft_s))
        good = _any_name(m, f"rate({{}}[{w}])", "_bucket", f'le="{le}"')
        total = _any_name(m, f"rate({{}}[{w}])", "_count")
        return _cmp(f"(1 - {good} / {total}) / {1 - rule.slo.objective:g}", c) + (
            f" and on ({BY}) ({_history_guard(p, 'ttft', s)})")
    if s == "error_ratio":
        guard = f"{rate(p, 'requests_finished', '1m', 'increase')} >= {MIN_REQUESTS_FOR_RATIO:g}"
        return _cmp(f"{rate(p, 'requests_failed', '1m')} / {rate(p, 'requests_finished', '1m')}", c) + (
            f" and on ({BY}) ({guard})")
    if s == "scrape_failing":
        return f'up{{job="{jobs.get(p.name, p.name)}"}} == 0'
    raise ValueError(f"signal {s!r} has no PromQL form")


def gpu_condition(c: Condition) -> str:
    s = c.signal
    if s in DCGM:
        return _cmp(DCGM[s], c)
    if s == "gpu_new_xid":
        return "changes(DCGM_FI_DEV_XID_ERRORS[1m]) > 0"
    if s == "gpu_throttle_active":
        bits = " or ".join(f"(floor(DCGM_FI_DEV_CLOCK_THROTTLE_REASONS / {b}) % 2 == 1)"
                           for b in THROTTLE_BITS.values())
        return f"({bits})"
    raise ValueError(f"signal {s!r} has no PromQL form")


def alert_name(rule: Rule) -> str:
    return "Enginedeck" + "".join(w.capitalize() for w in rule.id.split("_"))


def _rule_yaml(rule: Rule, expr: str, labels: Mapping[str, str]) -> list[str]:
    q = json.dumps
    out = [f"      - alert: {alert_name(rule)}", f"        expr: {q(expr)}"]
    if rule.for_s:
        out.append(f"        for: {_secs(rule.for_s)}")
    if rule.clear_for:
        out.append(f"        keep_firing_for: {_secs(rule.clear_for)}")
    out.append("        labels:")
    out.extend(f"          {k}: {q(v)}" for k, v in {"severity": rule.severity.value, **labels}.items())
    out.append("        annotations:")
    out.append(f"          summary: {q(rule.summary)}")
    desc = "enginedeck rule " + rule.id + ": " + " and ".join(c.text() for c in rule.when)
    out.append(f"          description: {q(desc)}")
    if rule.runbook:
        out.append(f"          runbook: {q(rule.runbook)}")
    return out


def export_prometheus(rules: Iterable[Rule], profiles: Mapping[str, EngineProfile],
                      jobs: Mapping[str, str] | None = None) -> str:
    """The rules file text. ``jobs``: profile -> the Prometheus job that scrapes it (default: its name)."""
    rules = tuple(rules)
    jobs = jobs or {}
    lines = ["# Written by `enginedeck alerts export --format prometheus`: enginedeck's alert rules in each",
             "# engine's raw metric names. Clear thresholds have no PromQL form: clear_for is keep_firing_for.",
             "groups:"]
    for name in sorted(profiles):
        p = profiles[name]
        if p.metrics.format != "prometheus":
            continue
        body: list[str] = []
        for rule in rules:
            sigs = [SIGNALS[c.signal] for c in rule.when]
            if any(s.gpu for s in sigs) or not all(s.available(p) for s in sigs):
                continue
            expr = " and on (instance) ".join(f"({condition(p, rule, c, jobs)})" for c in rule.when)
            body.extend(_rule_yaml(rule, expr, {"engine": p.name}))
        if body:
            lines += [f"  - name: enginedeck-{p.name}", "    rules:", *body]
    gpu = [r for r in rules if all(SIGNALS[c.signal].gpu for c in r.when)]
    if gpu:
        lines += ["  - name: enginedeck-gpu", "    rules:"]
        for rule in gpu:
            expr = " and on (instance, gpu) ".join(f"({gpu_condition(c)})" for c in rule.when)
            lines.extend(_rule_yaml(rule, expr, {}))
    return "\n".join(lines) + "\n"
