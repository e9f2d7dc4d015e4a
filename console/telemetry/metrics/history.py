"""Bounded per-metric history: fixed-size ring buffers of (time, value), and per-bucket summaries.

A ring holds ``CHART_POINTS`` by default, what the widest chart draws at one point a column: points
no chart shows would only cost memory (an hour at 1 s, 3,600 points, made the rings a large part of
the console's memory: docs/performance.md). Each point is two float64 in ``array('d')`` storage,
allocated up front, so a series costs the same whatever its age.

The wider time windows (15 minutes, an hour) read ``Buckets``: each ``BUCKET_S`` seconds of a
series kept as its min, max and mean, an hour of them (720 buckets of a float64 time and three
float32, grown as the series ages; their memory is in docs/performance.md). A chart column at the
hour window spans several buckets and takes their min and max, so a five-second spike stays visible
where a plain average would flatten it.
"""

from __future__ import annotations

import itertools
import math
import threading
from array import array
from collections.abc import Hashable, Iterator, Sequence
from typing import cast, overload

NAN = math.nan
# The most points a chart draws: one a column, the newest first, at most this many columns wide
# (console.ui.widgets.chart). Older points are kept, but no chart shows them.
CHART_POINTS = 400
# The widest time window a chart offers, and the span of one summary bucket of it.
WIDEST_WINDOW_S = 3600.0
BUCKET_S = 5.0


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
        """``append`` of each (time, value); into an empty ring, as two slice copies (of the newest
        ``capacity``: the ones appending them all would keep)."""
        n = len(times)
        if n > self.capacity and not self._n:
            times, values = times[-self.capacity:], values[-self.capacity:]
            n = self.capacity
        if self._n or not n:
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

    def columns(self) -> tuple[array[float], array[float]]:
        """Times and values, oldest first (copies)."""
        return self._slices(self._t, None), self._slices(self._v, None)

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


class Buckets:
    """Per ``BUCKET_S`` seconds of a series: (start, min, max, mean) of its finite values, the
    newest ``capacity`` buckets. A bucket that only saw gaps holds NaN (drawn as a gap). The open
    (newest) bucket is summed in place and written out when a point falls past it."""

    __slots__ = ("_hi", "_lo", "_mean", "_n", "_start", "_t", "capacity", "cur", "cur_hi", "cur_lo", "cur_n",
                 "cur_sum")

    def __init__(self, capacity: int = int(WIDEST_WINDOW_S / BUCKET_S)) -> None:
        self.capacity = capacity
        # Grown as buckets close (a new series costs nothing), a ring once ``capacity`` are held.
        self._t = array("d")
        # Summaries as float32: an hour of them for 4 engines and 8 GPUs is 1.4 MB, not 2.3 (beyond
        # float32's range a value reads as +-inf, which the charts clamp like any extreme).
        self._lo = array("f")
        self._hi = array("f")
        self._mean = array("f")
        self._start = 0
        self._n = 0
        self.cur = -math.inf  # start time of the open bucket
        self.cur_lo = self.cur_hi = NAN
        self.cur_sum = 0.0
        self.cur_n = 0

    def add(self, t: float, value: float) -> None:
        start = math.floor(t / BUCKET_S) * BUCKET_S
        if start != self.cur:
            if start < self.cur:
                return  # older than the open bucket: those are summarised already
            self._close()
            self.cur, self.cur_lo, self.cur_hi, self.cur_sum, self.cur_n = start, NAN, NAN, 0.0, 0
        if value == value:  # not NaN
            if self.cur_n:
                self.cur_lo = min(self.cur_lo, value)
                self.cur_hi = max(self.cur_hi, value)
            else:
                self.cur_lo = self.cur_hi = value
            self.cur_sum += value
            self.cur_n += 1

    def add_many(self, times: Sequence[float], values: Sequence[float | None]) -> None:
        """``add`` of each point (``None``: a gap), ascending times: a replay's hour rebuilt at a seek,
        summed a bucket at a time in one loop rather than a call a point."""
        k, n = 0, len(times)
        while k < n:
            start = math.floor(times[k] / BUCKET_S) * BUCKET_S
            end = start + BUCKET_S
            j = k
            while j < n and times[j] < end:
                j += 1
            if start < self.cur:  # older than the open bucket: those are summarised already
                k = j
                continue
            if start != self.cur:
                self._close()
                self.cur, self.cur_lo, self.cur_hi, self.cur_sum, self.cur_n = start, NAN, NAN, 0.0, 0
            finite = [float(v) for v in values[k:j] if v is not None and v == v]
            if finite:
                lo, hi = min(finite), max(finite)
                self.cur_lo = min(self.cur_lo, lo) if self.cur_n else lo
                self.cur_hi = max(self.cur_hi, hi) if self.cur_n else hi
                total = self.cur_sum
                for v in finite:  # in order, as ``add`` sums (sum() compensates: another last bit)
                    total += v
                self.cur_sum = total
                self.cur_n += len(finite)
            k = j

    def put(self, start: float, lo: float, hi: float, mean: float) -> None:
        """A whole bucket's summary (one copied from another store), after what this one holds."""
        if start <= self.cur:
            return
        self._close()
        self.cur, self.cur_lo, self.cur_hi = start, lo, hi
        self.cur_n = 0 if lo != lo else 1
        self.cur_sum = mean if self.cur_n else 0.0

    def _close(self) -> None:
        if self.cur == -math.inf:
            return
        # The sum of huge finite values can overflow: their mean is then the midpoint of min and max.
        mean = self.cur_sum / self.cur_n if self.cur_n else NAN
        if self.cur_n and not math.isfinite(mean):
            mean = self.cur_lo / 2 + self.cur_hi / 2
        row = (self.cur, self.cur_lo, self.cur_hi, mean)
        if self._n < self.capacity:
            for col, v in zip((self._t, self._lo, self._hi, self._mean), row, strict=True):
                col.append(v)
            self._n += 1
            return
        i = self._start
        self._t[i], self._lo[i], self._hi[i], self._mean[i] = row
        self._start = (self._start + 1) % self.capacity

    def rows(self, since: float = -math.inf, until: float = math.inf) -> list[tuple[float, float, float, float]]:
        """(start, min, max, mean) of the buckets starting in [since, until), oldest first, the open one
        included."""
        order = list(range(self._start, self._n)) + list(range(0, self._start))
        out = [(self._t[i], self._lo[i], self._hi[i], self._mean[i]) for i in order if since <= self._t[i] < until]
        if self.cur != -math.inf and since <= self.cur < until:
            mean = self.cur_sum / self.cur_n if self.cur_n else NAN
            if self.cur_n and not math.isfinite(mean):
                mean = self.cur_lo / 2 + self.cur_hi / 2
            out.append((self.cur, self.cur_lo, self.cur_hi, mean))
        return out

    def oldest(self) -> float | None:
        if self._n:
            return self._t[self._start]
        return None if self.cur == -math.inf else self.cur

    @property
    def nbytes(self) -> int:
        return sum(c.buffer_info()[1] * c.itemsize for c in (self._t, self._lo, self._hi, self._mean))


# One row of what a chart draws: (time, min, max, mean) of a point (all three its value) or a bucket.
Row = tuple[float, float, float, float]


class Rows(Sequence[Row]):
    """A chart's rows (``History.window``), column-wise in packed doubles.

    A chart keeps its rows to redraw at any size; as tuples of floats the engine detail's charts
    at the 1h window held 2.2 MB, packed about a fifth of that (docs/performance.md, "History
    memory"). Indexing and iteration give ``Row`` tuples."""

    __slots__ = ("hi", "lo", "mean", "t")

    def __init__(self, t: array[float] | None = None, lo: array[float] | None = None,
                 hi: array[float] | None = None, mean: array[float] | None = None) -> None:
        self.t = array("d") if t is None else t
        self.lo = array("d") if lo is None else lo
        self.hi = array("d") if hi is None else hi
        self.mean = array("d") if mean is None else mean

    def __len__(self) -> int:
        return len(self.t)

    @overload
    def __getitem__(self, k: int) -> Row: ...
    @overload
    def __getitem__(self, k: slice) -> Rows: ...

    def __getitem__(self, k: int | slice) -> Row | Rows:
        if isinstance(k, slice):
            return Rows(self.t[k], self.lo[k], self.hi[k], self.mean[k])
        return self.t[k], self.lo[k], self.hi[k], self.mean[k]

    def __iter__(self) -> Iterator[Row]:
        return zip(self.t, self.lo, self.hi, self.mean, strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):  # bytes: a gap (NaN) equals a gap
            return all(a.tobytes() == b.tobytes() for a, b in
                       zip((self.t, self.lo, self.hi, self.mean), (other.t, other.lo, other.hi, other.mean),
                           strict=True))
        if isinstance(other, Sequence):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Rows({list(self)!r})"


class History:
    """Thread-safe store of rings keyed by (entity, metric), e.g. ("vllm-a", "generation_tps")."""

    def __init__(self, capacity: int = CHART_POINTS, max_series: int = 4096) -> None:
        self.capacity = capacity
        self.max_series = max_series
        self._rings: dict[Hashable, Ring] = {}
        self._buckets: dict[Hashable, Buckets] = {}
        self._lock = threading.Lock()
        # Bumped when a series' past changes (a backfill): a reader that keeps aggregates of what it
        # read (the overview's trends) reads again.
        self.rewrites = 0

    def append(self, key: Hashable, t: float, value: float | None) -> None:
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            ring.append(t, value)
            self._buckets[key].add(t, NAN if value is None else float(value))

    def _ring(self, key: Hashable) -> Ring | None:
        """The series' ring, made on first use; None once ``max_series`` are held (bounded: a runaway
        label set cannot grow memory without limit). Called under the lock."""
        ring = self._rings.get(key)
        if ring is None and len(self._rings) < self.max_series:
            ring = self._rings[key] = Ring(self.capacity)
            self._buckets[key] = Buckets()
        return ring

    def extend(self, key: Hashable, times: Sequence[float], values: Sequence[float | None], *,
               ring_from: int = 0) -> None:
        """``append`` of many points (``times[i]``, ``values[i]``, ascending) under one lock (a replay
        rebuilding its charts); the ring takes those from index ``ring_from`` on, the summaries all of
        them (a replay's seek rebuilds the hour's summaries and the ring's last points)."""
        if len(times) != len(values):
            raise ValueError("as many values as times")
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            ring.extend(times[ring_from:], values[ring_from:])
            self._buckets[key].add_many(times, values)

    def backfill(self, key: Hashable, times: Sequence[float], values: Sequence[float | None]) -> None:
        """Put older points (``times`` ascending) before what the series holds: those at or after its
        first point are dropped (the live ones win; leading gaps within their span give way), and the
        newest ``capacity`` are kept (a chart's
        history from a Prometheus source, fetched when the chart opens)."""
        with self._lock:
            ring = self._ring(key)
            if ring is None:
                return
            self.rewrites += 1
            live = ring.points()
            if not live:  # nothing live yet (a chart opened with its history): the points as they are
                ring.extend(times[-self.capacity:], values[-self.capacity:])
                buckets = self._buckets[key] = Buckets()
                for t, v in zip(times, values, strict=True):
                    buckets.add(t, NAN if v is None else float(v))
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
            # The summaries: the older points, then what the series summarised itself after them.
            kept = self._buckets[key]
            buckets = self._buckets[key] = Buckets()
            for t, v in old:
                buckets.add(t, v)
            for row in kept.rows(since=buckets.cur + BUCKET_S):
                buckets.put(*row)

    def values(self, key: Hashable, last: int | None = None) -> list[float]:
        with self._lock:
            ring = self._rings.get(key)
            return ring.values(last) if ring is not None else []

    def points(self, key: Hashable, last: int | None = None) -> list[tuple[float, float]]:
        with self._lock:
            ring = self._rings.get(key)
            return ring.points(last) if ring is not None else []

    def window(self, key: Hashable, end: float, seconds: float) -> Rows:
        """What a chart of the ``seconds`` before ``end`` draws, oldest first: the ring's points where
        it reaches back that far, the buckets' summaries before the ring's oldest point."""
        since = end - seconds
        out = Rows()
        with self._lock:
            ring = self._rings.get(key)
            if ring is None:
                return out
            ts, vs = ring.columns()
            first = ts[0] if ts else math.inf
            if (first > since and len(ts) == ring.capacity) or not ts:
                for t, lo, hi, mean in self._buckets[key].rows(since, min(first, end + BUCKET_S)):
                    # The last bucket may overlap the ring's first point: that span is the ring's.
                    if ts and t + BUCKET_S > first:
                        continue
                    out.t.append(t)
                    out.lo.append(lo)
                    out.hi.append(hi)
                    out.mean.append(mean)
        keep = [since <= t <= end for t in ts]
        out.t.extend(itertools.compress(ts, keep))
        v = array("d", itertools.compress(vs, keep))  # a point's min, max and mean are its value
        out.lo.extend(v)
        out.hi.extend(v)
        out.mean.extend(v)
        return out

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._rings)

    def memory_bytes(self) -> int:
        with self._lock:
            return sum(r.nbytes for r in self._rings.values()) + sum(b.nbytes for b in self._buckets.values())
