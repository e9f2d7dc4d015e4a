"""Chart history from ``query_range``: the console's engine series (``ENGINE_SERIES``) as PromQL.

One query per series for every engine of a profile at once (``by (ID)``, ID the identity label), so
8 engines cost as many queries as one. The expressions follow the console's own windows
(``console.telemetry.metrics.windows``): gauges combined with the mapping's aggregate, token and request
rates over 5 s (60 s for counters an engine bumps only when a request finishes), the prefix hit
rate as Δhits / Δqueries over 60 s, latency quantiles by ``histogram_quantile`` over 60 s of bucket
rates. Windows shorter than 2.5 scrape intervals are widened to that (a rate needs two samples).
A mapping's ``match`` filter is applied on its first label (``a|b`` reads ``a``); its ``plus`` parts
are added by name. The raw name used is the one the engine's federated series carry.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from console.profiles import EngineProfile, MetricMapping
from console.prometheus.api import Matrix
from console.prometheus.federate import present_name
from console.sources import Matcher, matchers_text
from console.telemetry.metrics.windows import QUANTILE_WINDOW, histogram_quantile
from console.telemetry.source import ENGINE_SCHEMA

# The history schema's series (telemetry.source.ENGINE_SCHEMA) by how each is computed here.
_FILLED = [s for s in ENGINE_SCHEMA if s.backfilled]
GAUGES = tuple((s.key, s.canonical) for s in _FILLED if s.how == "gauge")
RATES = tuple((s.key, s.canonical) for s in _FILLED if s.how == "rate")
QUANTILES = tuple(dict.fromkeys((s.key.rpartition("_")[0], s.canonical) for s in _FILLED if s.how == "quantile"))
_AGG = {"sum": "sum", "max": "max", "mean": "avg"}


@dataclass(slots=True)
class Split:
    """Where one backfill's time went: the wall time, and summed over its queries (run in
    parallel, so the sums can exceed it) the requests, their JSON decoding and the filling of
    the history."""

    wall_s: float = 0.0
    queries: int = 0
    points: int = 0
    fetch_s: float = 0.0
    decode_s: float = 0.0
    fill_s: float = 0.0

    def line(self) -> str:
        """One line for a benchmark or a log."""
        return (f"{self.wall_s:.3f} s wall: {self.queries} queries, {self.points} points; summed over the queries "
                f"{self.fetch_s:.3f} s waiting for Prometheus, {self.decode_s:.3f} s decoding JSON, "
                f"{self.fill_s:.3f} s filling the history")


@dataclass(frozen=True, slots=True)
class Query:
    """One history series of every engine of a group: its key and PromQL. A histogram's query has
    ``quantiles`` instead: it reads the raw cumulative bucket counts (``window_s`` more before the
    range), from which ``bucket_quantiles`` makes those series (name, quantile)."""

    series: str  # the history metric (running, ttft_p99 ...; a histogram: its prefix, ttft ...)
    promql: str
    quantiles: tuple[tuple[str, float], ...] = ()
    window_s: float = 0.0
    scale: float = 1.0


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
        # The raw counts, not histogram_quantile(sum by (ID, le) (rate(...))): that costs Prometheus
        # a per-step aggregation of every bucket series twice (p50, p99), most of the backfill's
        # time (benchmarks/prom_backfill.py); the deltas are the console's own 60 s window.
        qs = ((f"{prefix}_p50", 0.5), (f"{prefix}_p99", 0.99))
        sel = _selector(name + "_bucket", base, m, who)
        out.append(Query(prefix, sel, quantiles=qs, window_s=max(QUANTILE_WINDOW, interval), scale=m.scale))
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
    for labels, ts, vs in matrix.series:
        who = labels.get(ident)
        if who is None:
            continue
        out[who] = (times, _on_grid(ts, vs, start, step, n))
    return out


def _on_grid(ts: tuple[float, ...], vs: tuple[float | None, ...], start: float, step: float, n: int
             ) -> list[float | None]:
    """``vs`` at their steps of the ``n``-step grid from ``start``; None at the steps without."""
    if len(ts) == n and (not n or (ts[0] == start and ts[-1] == start + (n - 1) * step)):
        return list(vs)  # every step there (the usual case): nothing to place
    values: list[float | None] = [None] * n
    for t, v in zip(ts, vs, strict=True):
        k = round((t - start) / step)
        if 0 <= k < n:
            values[k] = v
    return values


def bucket_quantiles(matrix: Matrix, ident: str, start: float, end: float, step: float, query: Query
                     ) -> dict[str, dict[str, tuple[list[float], list[float | None]]]]:
    """Each engine's ``query.quantiles`` series on the step grid from ``start`` to ``end``, from
    the raw bucket counts in ``matrix`` (which starts ``query.window_s`` earlier): at each step the
    increase of every bucket since the newest sample at least the window older, the engine's series
    summed per bound, interpolated by the live path's ``histogram_quantile``. A step where a series
    dropped (a reset) or is not there at the step is a gap; a series not there at the window's
    start counts from 0 (born since) when the engine had others then, and from its first sample
    when the engine had none (the console's start-up rule)."""
    lag = math.ceil(query.window_s / step - 1e-9)
    first = start - lag * step
    n = round((end - start) / step) + 1
    rows: dict[str, dict[float, list[list[float | None]]]] = {}
    for labels, ts, vs in matrix.series:
        who, le = labels.get(ident), labels.get("le")
        try:
            bound = float(le) if le is not None else None
        except ValueError:
            bound = None
        if who is None or bound is None:
            continue
        rows.setdefault(who, {}).setdefault(bound, []).append(_on_grid(ts, vs, first, step, n + lag))
    times = [start + k * step for k in range(n)]
    out: dict[str, dict[str, tuple[list[float], list[float | None]]]] = {}
    for who, by_bound in rows.items():
        bounds = tuple(sorted(by_bound))
        # At the window's start: had the engine any series? (a series missing then was born since)
        then = _present([r for c in by_bound.values() for r in c], n) if lag else [True] * n
        deltas = [_summed([_delta(r, lag, n, then) for r in by_bound[b]]) for b in bounds]
        series: dict[str, list[float | None]] = {name: [None] * n for name, _q in query.quantiles}
        for k, counts in enumerate(zip(*deltas, strict=True)):
            if None in counts:
                continue
            for name, q in query.quantiles:
                value, _capped = histogram_quantile(q, bounds, counts)  # type: ignore[arg-type]
                if value is not None and math.isfinite(value):
                    series[name][k] = value * query.scale
        out[who] = {name: (times, vals) for name, vals in series.items()}
    return out


def _delta(r: list[float | None], lag: int, n: int, then: list[bool]) -> list[float | None]:
    """The increase of one series over each window (``lag`` steps; 0: the values are increases
    already); None where it is not there, dropped (a reset), or nothing of the engine was there."""
    if not lag:
        return r[:n]
    if None not in r:  # every step there (the usual case): one C loop, unless a count dropped
        deltas: list[float] = list(map(operator.sub, r[lag:], r[:n]))  # type: ignore[arg-type]
        if not deltas or min(deltas) >= 0:
            return deltas  # type: ignore[return-value]
    # Before the window reaches back to the first sample, the window is from that sample (the
    # console's start-up rule: the oldest frame is used).
    first = next((i for i, v in enumerate(r) if v is not None), len(r))
    out: list[float | None] = []
    for k, (new, old, was) in enumerate(zip(r[lag:], r[:n], then, strict=True)):
        if old is None and not was and k < first < k + lag:
            old = r[first]
        if new is None or (old is None and not was) or (old is not None and new < old):
            out.append(None)
        else:
            out.append(new - (old or 0.0))
    return out


def _present(rows: list[list[float | None]], n: int) -> list[bool]:
    """At each of the first ``n`` steps: is any of ``rows`` there?"""
    if any(None not in r[:n] for r in rows):
        return [True] * n  # one series there throughout (the usual case)
    there = [False] * n
    for r in rows:
        there = [t or v is not None for t, v in zip(there, r[:n], strict=True)]
    return there


def _summed(cols: list[list[float | None]]) -> list[float | None]:
    """Element-wise sum of same-length columns; None where any is None."""
    if len(cols) == 1:
        return cols[0]
    if not any(None in c for c in cols):
        return list(map(sum, zip(*cols, strict=True)))  # type: ignore[arg-type]
    return [None if None in vs else sum(vs) for vs in zip(*cols, strict=True)]  # type: ignore[arg-type]


def group_by_profile(engines: Mapping[str, tuple[EngineProfile, str]]) -> dict[tuple[str, str], list[str]]:
    """Engine idents grouped by (profile name, identity label): one set of queries per group."""
    out: dict[tuple[str, str], list[str]] = {}
    for who, (profile, label) in engines.items():
        out.setdefault((profile.name, label), []).append(who)
    return out
