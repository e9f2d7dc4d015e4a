"""Chart history from ``query_range``: the console's engine series (``ENGINE_SERIES``) as PromQL.

One query per series for every engine of a profile at once (``by (ID)``, ID the identity label), so
8 engines cost as many queries as one. The expressions follow the console's own windows
(``console.telemetry.windows``): gauges combined with the mapping's aggregate, token and request
rates over 5 s (60 s for counters an engine bumps only when a request finishes), the prefix hit
rate as Δhits / Δqueries over 60 s, latency quantiles by ``histogram_quantile`` over 60 s of bucket
rates. Windows shorter than 2.5 scrape intervals are widened to that (a rate needs two samples).
A mapping's ``match`` filter is applied on its first label (``a|b`` reads ``a``); its ``plus`` parts
are added by name. The raw name used is the one the engine's federated series carry.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.profiles import EngineProfile, MetricMapping
from console.prometheus.api import Matrix
from console.prometheus.federate import present_name
from console.sources import Matcher, matchers_text

GAUGES = (("running", "running"), ("waiting", "waiting"), ("kv_usage", "kv_usage"))
RATES = (("generation_tps", "generation_tokens"), ("prompt_tps", "prompt_tokens"),
         ("request_rate", "requests_finished"), ("error_rate", "requests_failed"))
QUANTILES = (("ttft", "ttft"), ("itl", "itl"), ("e2e", "e2e"))
_AGG = {"sum": "sum", "max": "max", "mean": "avg"}


@dataclass(frozen=True, slots=True)
class Query:
    """One history series of every engine of a group: its key and PromQL."""

    series: str  # the history metric (running, ttft_p99 ...)
    promql: str


def _re_escape(v: str) -> str:
    return re.escape(v).replace("\\", "\\\\").replace('"', '\\"')


def _selector(name: str, base: tuple[Matcher, ...], m: MetricMapping, extra: str = "") -> str:
    inner = [matchers_text(base)] if base else []
    for key, values in m.match.items():
        inner.append(f'{key.split("|")[0]}=~"{"|".join(_re_escape(v) for v in values)}"')
    if extra:
        inner.append(extra)
    return f"{name}{{{','.join(i for i in inner if i)}}}"


def _window(seconds: float, interval: float) -> str:
    return f"{math.ceil(max(seconds, 2.5 * interval))}s"


def _counter_names(m: MetricMapping, families: set[str]) -> list[tuple[str, MetricMapping]]:
    """The raw counter of ``m`` and of its ``plus`` parts the engines have (a histogram's ``_sum``
    or ``_count`` for those kinds: TGI's token counts)."""
    out = []
    for part in (m, *m.plus):
        suffix = {"histogram_sum": "_sum", "histogram_count": "_count"}.get(part.kind, "")
        name = present_name(part.names, families, suffix)
        if name is not None:
            out.append((name + suffix, part))
    return out


def queries_for(profile: EngineProfile, families: set[str], base: tuple[Matcher, ...], ident: str,
                idents: Iterable[str], interval: float) -> list[Query]:
    """The PromQL for each history series ``profile`` has, over the engines ``idents`` (values of
    label ``ident``), read with the selector's label ``base`` matchers; ``families``: the sample
    names those engines' federated series carry."""
    who = f'{ident}=~"{"|".join(_re_escape(i) for i in sorted(idents))}"'
    by = f"by ({ident})"
    maps = profile.metrics.map
    out: list[Query] = []
    for series, canonical in GAUGES:
        m = maps.get(canonical)
        name = present_name(m.names, families) if m is not None and m.kind == "gauge" else None
        if m is None or name is None:
            continue
        scale = f" * {m.scale:g}" if m.scale != 1 else ""
        out.append(Query(series, f"{_AGG[m.aggregate]} {by} ({_selector(name, base, m, who)}{scale})"))
    for series, canonical in RATES:
        m = maps.get(canonical)
        if m is None or m.kind not in ("counter", "histogram_sum", "histogram_count"):
            continue
        parts = _counter_names(m, families)
        if not parts:
            continue
        w = _window(60.0 if m.at_finish else 5.0, interval)
        terms = [f"sum {by} (rate({_selector(n, base, p, who)}[{w}]){_scaled(p)})" for n, p in parts]
        out.append(Query(series, " + ".join(terms)))
    hit = _hit_rate(profile, families, base, who, by, interval)
    if hit is not None:
        out.append(Query("prefix_hit_rate", hit))
    for prefix, canonical in QUANTILES:
        m = maps.get(canonical)
        name = present_name(m.names, families, "_bucket") if m is not None and m.kind == "histogram" else None
        if m is None or name is None:
            continue
        w = _window(60.0, interval)
        rate = f"sum by ({ident}, le) (rate({_selector(name + '_bucket', base, m, who)}[{w}]))"
        scale = f" * {m.scale:g}" if m.scale != 1 else ""
        for q in (0.5, 0.99):
            out.append(Query(f"{prefix}_p{round(q * 100)}", f"histogram_quantile({q:g}, {rate}){scale}"))
    return out


def _scaled(m: MetricMapping) -> str:
    return f" * {m.scale:g}" if m.scale != 1 else ""


def _hit_rate(profile: EngineProfile, families: set[str], base: tuple[Matcher, ...], who: str, by: str,
              interval: float) -> str | None:
    hr = profile.metrics.prefix_hit_rate
    maps = profile.metrics.map
    w = _window(60.0, interval)
    if hr is not None:
        sides = []
        for canonicals in (hr.numerator, hr.denominator):
            terms = [f"sum {by} (increase({_selector(n, base, p, who)}[{w}]))"
                     for c in canonicals if c in maps for n, p in _counter_names(maps[c], families)]
            if not terms:
                break
            sides.append(" + ".join(terms))
        if len(sides) == 2:
            return f"({sides[0]}) / ({sides[1]})"
    m = maps.get("prefix_hit_rate_gauge")
    name = present_name(m.names, families) if m is not None else None
    if m is None or name is None:
        return None
    return f"avg {by} ({_selector(name, base, m, who)}{_scaled(m)})"


def grid(matrix: Matrix, ident: str, start: float, end: float, step: float
         ) -> dict[str, tuple[list[float], list[float | None]]]:
    """Each engine's series on the full step grid from ``start`` to ``end`` (a step Prometheus had
    no value for is a gap, so the chart keeps its time axis)."""
    n = round((end - start) / step) + 1
    times = [start + k * step for k in range(n)]
    out: dict[str, tuple[list[float], list[float | None]]] = {}
    for labels, points in matrix.series:
        who = labels.get(ident)
        if who is None:
            continue
        values: list[float | None] = [None] * n
        for t, v in points:
            k = round((t - start) / step)
            if 0 <= k < n:
                values[k] = v
        out[who] = (times, values)
    return out


def group_by_profile(engines: Mapping[str, tuple[EngineProfile, str]]) -> dict[tuple[str, str], list[str]]:
    """Engine idents grouped by (profile name, identity label): one set of queries per group."""
    out: dict[tuple[str, str], list[str]] = {}
    for who, (profile, label) in engines.items():
        out.setdefault((profile.name, label), []).append(who)
    return out
