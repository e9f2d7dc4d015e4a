"""Bounded per-metric history: fixed-size ring buffers of (time, value).

A ring holds ``CHART_POINTS`` by default, what the widest chart draws: points no chart shows would
only cost memory (an hour at 1 s, 3,600 points, made the rings 5.3 MB of a 64 MB console on four
engines). Each point is two float64 in ``array('d')`` storage, allocated up front, so a series costs
about 6.4 KB whatever its age, and the whole store is bounded by ``capacity x series``.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Hashable, Sequence
from typing import cast

NAN = math.nan
# The most points a chart draws: one a column, the newest first, at most this many columns wide
# (console.ui.widgets.chart). Older points are kept, but no chart shows them.
CHART_POINTS = 400


class Ring:
    """A fixed-capacity ring of (t, value) pairs; ``None`` values are stored as NaN (gaps)."""

    __slots__ = ("_n", "_start", "_t", "_v", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._t = array("d", bytes(8 * capacity))
        self._v = array("d", bytes(8 * capacity))
        self._start = 0
        self._n = 0

    def append(self, t: float, value: float | None) -> None:
        i = (self._start + self._n) % self.capacity
        self._t[i] = t
        self._v[i] = NAN if value is None else float(value)
        if self._n < self.capacity:
            self._n += 1
        else:
            self._start = (self._start + 1) % self.capacity

    def extend(self, times: Sequence[float], values: Sequence[float | None]) -> None:
        """``append`` of each (time, value); into an empty ring, as two slice copies."""
        n = len(times)
        if self._n or not n or n > self.capacity:
            for t, v in zip(times, values, strict=True):
                self.append(t, v)
            return
        vs: array[float]
        try:
            vs = array("d", cast("Sequence[float]", values))
        except TypeError:  # a None among them: a gap
            vs = array("d", [NAN if v is None else v for v in values])
        if len(vs) != n:
            raise ValueError("as many values as times")
        self._t[:n] = array("d", times)
        self._v[:n] = vs
        self._n = n

    def __len__(self) -> int:
        return self._n

    def _slices(self, column: array[float], last: int | None) -> array[float]:
        """The newest ``last`` entries of a column, oldest first: one or two slice copies (in C),
        not a Python step per point (charts read hundreds of points per series each refresh)."""
        n = self._n if last is None else max(0, min(last, self._n))
        first = (self._start + self._n - n) % self.capacity
        end = first + n
        if end <= self.capacity:
            return column[first:end]
        return column[first:] + column[: end - self.capacity]

    def values(self, last: int | None = None) -> list[float]:
        """Values oldest first (NaN where there was no data)."""
        return self._slices(self._v, last).tolist()

    def points(self, last: int | None = None) -> list[tuple[float, float]]:
        return list(zip(self._slices(self._t, last), self._slices(self._v, last), strict=True))

    def since(self, t0: float) -> list[tuple[float, float]]:
        return [(t, v) for t, v in self.points() if t >= t0]

    def latest(self) -> tuple[float, float] | None:
        if not self._n:
            return None
        i = (self._start + self._n - 1) % self.capacity
        return self._t[i], self._v[i]

    @property
    def nbytes(self) -> int:
        return self._t.buffer_info()[1] * self._t.itemsize + self._v.buffer_info()[1] * self._v.itemsize


class History:
    """Thread-safe store of rings keyed by (entity, metric), e.g. ("vllm-a", "generation_tps")."""

    def __init__(self, capacity: int = CHART_POINTS, max_series: int = 4096) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self._rings: dict[Hashable, Ring] = {}
        self._lock = threading.Lock()

    def append(self, key: Hashable, t: float, value: float | None) -> None:
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            ring.append(t, value)

    def _ring(self, key: Hashable) -> Ring | None:
        """The series' ring, made on first use; None once ``max_series`` are held (bounded: a runaway
        label set cannot grow memory without limit). Called under the lock."""
        ring = self._rings.get(key)
        if ring is None and len(self._rings) < self.max_series:
            ring = self._rings[key] = Ring(self.capacity)
        return ring

    def extend(self, key: Hashable, times: Sequence[float], values: Sequence[float | None]) -> None:
        """``append`` of many points (``times[i]``, ``values[i]``) under one lock (a replay rebuilding
        its charts)."""
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            ring.extend(times, values)

    def backfill(self, key: Hashable, times: Sequence[float], values: Sequence[float | None]) -> None:
        """Put older points (``times`` ascending) before what the series holds: those at or after its
        first point are dropped (the live ones win; leading gaps within their span give way), and the
        newest ``capacity`` are kept (a chart's
        history from a Prometheus source, fetched when the chart opens)."""
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            live = ring.points()
            if not live:  # nothing live yet (a chart opened with its history): the points as they are
                ring.extend(times[-self.capacity:], values[-self.capacity:])
                return
            # The gaps recorded before the source's first read, where the older points have data: theirs.
            covered = times[-1] if len(times) else -math.inf
            while live and math.isnan(live[0][1]) and live[0][0] <= covered:
                live.pop(0)
            first = live[0][0] if live else math.inf
            old = [(t, NAN if v is None else float(v)) for t, v in zip(times, values, strict=True) if t < first]
            merged = (old + live)[-self.capacity:]
            fresh = Ring(self.capacity)
            fresh.extend([t for t, _ in merged], [v for _, v in merged])
            self._rings[key] = fresh

    def values(self, key: Hashable, last: int | None = None) -> list[float]:
        with self._lock:
            ring = self._rings.get(key)
            return ring.values(last) if ring is not None else []

    def points(self, key: Hashable, last: int | None = None) -> list[tuple[float, float]]:
        with self._lock:
            ring = self._rings.get(key)
            return ring.points(last) if ring is not None else []

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._rings)

    def memory_bytes(self) -> int:
        with self._lock:
            return sum(r.nbytes for r in self._rings.values())
