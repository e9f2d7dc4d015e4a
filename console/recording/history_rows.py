"""The history rows of one status document: what ``telemetry.hub.record`` appends for the snapshot the
document was made from, read straight from the document (both follow ``telemetry.source.ENGINE_SCHEMA``).

A replay rebuilds ten minutes of chart history on every seek; going through a ``FleetSnapshot`` for
each of 600 documents costs seconds, reading the few numbers the charts keep costs milliseconds.
A test holds this equal to ``record(history, snapshot_from_doc(doc))`` for live, stale and
unreachable engines.

The writer also stores each document frame's rows as a rows frame of their own (``rows_payload``,
read back by ``RowsFrame``): a seek then decodes a few KB of numbers per frame instead of the
documents. Times and values are JSON (a non-finite value is null, as in the document itself), so a
rows frame gives exactly the rows ``doc_rows`` gives for the document read back.
"""

from __future__ import annotations

import itertools
import math
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from console.model import NOT_LIVE
from console.telemetry.source import ENGINE_SCHEMA, ENGINE_SERIES

Row = tuple[tuple[str, str], float, float | None]
_DECIMALS = re.compile(rb"\.(\d*[1-9])")  # a float's decimals (".0" is none)
# Times and values by series, a gap as NaN. Packed doubles, not lists of floats: a seek gathers an hour
# of points (about 350,000 for 4 engines and 8 GPUs), which as float objects left the console's heap
# several MB larger after they were freed (docs/performance.md, "History memory").
Points = dict[tuple[str, str], tuple["array[float]", "array[float]"]]
_NOT_LIVE = frozenset(p.value for p in NOT_LIVE)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def packed(values: Sequence[float | None]) -> array[float]:
    """``values`` as packed doubles, ``None`` (a gap) as NaN."""
    try:
        return array("d", values)  # type: ignore[arg-type]
    except TypeError:
        return array("d", [math.nan if v is None else v for v in values])


def add_point(series: Points, key: tuple[str, str], t: float, v: float | None) -> None:
    got = series.get(key)
    if got is None:
        got = series[key] = (array("d"), array("d"))
    got[0].append(t)
    got[1].append(math.nan if v is None else v)


def _at(summary: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` in an engine's summary; None where a part is absent (a recording made
    before that series was kept: queue time)."""
    value: Any = summary
    for part in path:
        value = value.get(part) if value is not None else None
    return value


def doc_rows(doc: Mapping[str, Any]) -> list[Row]:
    t = float(doc["taken_at"])
    out: list[Row] = []
    add = out.append
    for e in doc["engines"]:
        name = e["name"]
        m = e["summary"]
        live = e["reachable"] and e["metrics"]["state"] == "ok" and e["phase"] not in _NOT_LIVE
        if m is None or not live:
            for key in ENGINE_SERIES:
                add(((name, key), t, None))
            continue
        for series in ENGINE_SCHEMA:
            add(((name, series.key), t, _f(_at(m, series.doc))))
    for g in doc["gpus"]["devices"]:
        key = f"gpu:{g['index']}"
        add(((key, "util"), t, _f(g["util_percent"])))
        add(((key, "mem_used"), t, _f(g["mem_used_bytes"])))
        add(((key, "power"), t, _f(g["power_w"])))
        add(((key, "temperature"), t, _f(g["temperature_c"])))
    host = doc["host"]
    if host is not None:
        add((("host", "cpu"), t, _f(host["cpu_percent"])))
        add((("host", "mem_used"), t, _f(host["mem_used_bytes"])))
    return out



def rows_of(doc: Mapping[str, Any]) -> list[Row]:
    """``doc_rows``, or none for a document that is not one of ours (no history from it)."""
    try:
        return doc_rows(doc)
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError):
        return []


def rows_payload(times: Sequence[float], rows: Sequence[Sequence[Row]]) -> bytes:
    """The rows of a frame's documents (``times``: their recorded times), by series: four JSON lines,
    the times; each document's ``taken_at`` (null for a document without rows; the whole line null
    when they are the times); the series as ``[entity, [metric, ...]]`` runs; and one array a series
    (``_column``) with its value in each document (``false``: the document has no such row)."""
    index: dict[tuple[str, str], int] = {}
    for doc in rows:
        for key, _t, _v in doc:
            index.setdefault(key, len(index))
    cols: list[list[float | bool | None]] = [[False] * len(rows) for _ in index]
    for k, doc in enumerate(rows):
        for key, _t, v in doc:
            cols[index[key]][k] = v
    runs: list[list[Any]] = []
    for entity, metric in index:
        if runs and runs[-1][0] == entity:
            runs[-1][1].append(metric)
        else:
            runs.append([entity, [metric]])
    taken = [doc[0][1] if doc else None for doc in rows]
    return b"\n".join([orjson.dumps(list(times)), orjson.dumps(None if taken == list(times) else taken),
                       orjson.dumps(runs), orjson.dumps([_column(c) for c in cols])]) + b"\n"


def _column(col: list[float | bool | None]) -> list[Any]:
    """A series' values as ``[d, n0, n1 - n0, ...]`` when each is exactly ``n / 10**d`` (d <= 6: the
    numbers of a document are rounded; the small differences compress a fifth smaller), else
    ``[null, v0, v1, ...]``."""
    text = orjson.dumps(col)  # each float as the shortest text that reads back as it: its decimals are d
    if b"e" in text or b"n" in text or b"-0.0" in text:  # false, null (None, inf, nan), 1e-7; -0.0 (and -0.05)
        return [None, *col]
    d = max(map(len, _DECIMALS.findall(text)), default=0)
    if d > 6:
        return [None, *col]
    scale = 10**d
    ns = [round(v * scale) for v in col]  # type: ignore[operator]
    if max(map(abs, ns), default=0) < 2**53 and [n / scale for n in ns] == col:
        return [d, *(b - a for a, b in itertools.pairwise([0, *ns]))]
    return [None, *col]


def _values(col: list[Any]) -> list[Any]:
    """A series' values from ``_column``'s form. Raises ValueError or TypeError for a column no writer
    makes (a crafted frame): a scale beyond 10**6, differences that are not integers, raw values
    that are not numbers, null or false."""
    d = col[0]
    if d is None:
        values = col[1:]
        array("d", [0.0 if v is None else v for v in values])  # TypeError for a string, list or object
        return values
    if type(d) is not int or not 0 <= d <= 6:
        raise ValueError(f"a rows column of scale {d!r}")
    scale = 10**d
    # Each sum is divided as it is made: a difference that is no number fails at once (lists or
    # strings are never concatenated along the column).
    return [n / scale for n in itertools.accumulate(col[1:])]


@dataclass(frozen=True, slots=True)
class RowsFrame:
    """The rows of one document frame, read back from its rows frame."""

    times: list[float]  # the documents' recorded times
    taken: list[float | None]
    keys: list[tuple[str, str]]
    cols: list[list[float | bool | None]]
    whole: bool  # every document has every series (no ``false`` in ``cols``)

    @classmethod
    def decode(cls, payload: bytes) -> RowsFrame:
        """Raises ValueError for a payload that is not a rows frame's."""
        lines = payload.split(b"\n")
        try:
            times, taken, runs, cols = (orjson.loads(x) for x in lines[:4])
            times = [float(t) for t in times]
            keys = [(str(e), str(m)) for e, ms in runs for m in ms]
            # Only a column of raw values (d null) can hold a false.
            whole = not any(v is False for c in cols if c[0] is None for v in c)
            cols = [_values(c) for c in cols]
            if taken is not None:
                taken = [None if t is None else float(t) for t in taken]
        except (orjson.JSONDecodeError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise ValueError(f"not a rows payload: {exc}") from None
        if taken is None:
            taken = times
        n = len(times)
        if len(taken) != n or len(cols) != len(keys) or any(len(c) != n for c in cols):
            raise ValueError("a rows payload of inconsistent lengths")
        return cls(times, taken, keys, cols, whole and None not in taken)

    def doc(self, k: int) -> list[Row]:
        """The rows of document ``k`` of the frame (what ``doc_rows`` gives for it)."""
        t = self.taken[k]
        if t is None:
            return []
        return [(key, t, v) for key, col in zip(self.keys, self.cols, strict=True)
                if (v := col[k]) is not False]  # type: ignore[misc]

    def add_to(self, series: Points, lo: float, end: int | None = None) -> None:
        """Append the points of the documents recorded at ``lo`` or later (the first ``end`` only)."""
        taken = self.taken
        ks = [k for k, at in enumerate(self.times[:end]) if at >= lo and taken[k] is not None]
        if not ks:
            return
        a, b = ks[0], ks[-1] + 1
        whole = self.whole and b - a == len(ks)
        ts = packed(taken[a:b]) if whole else array("d")
        for key, col in zip(self.keys, self.cols, strict=True):
            if whole:  # every document has every series (the usual case): two slices
                got = series.get(key)
                if got is None:
                    got = series[key] = (array("d"), array("d"))
                got[0].extend(ts)
                got[1].extend(packed(col[a:b]))  # type: ignore[arg-type]
                continue
            for k in ks:
                if (v := col[k]) is not False:
                    add_point(series, key, taken[k], v)  # type: ignore[arg-type]
