"""The overview's trends: for each engine and metric, what changed, how much and since when.

Plain string work, no Textual: ``Trends.draw`` turns the history into lines of (text, style) pieces
that the overview shows (console/ui/screens/overview.py).

- **Bands.** A band is a header line (the window and whether the scales are shared, then each
  metric's name and scale) over a line or two per engine: the chart and the value now, with its unit.
  A band holds as many metrics as the width gives charts of at least ``MIN_CHART_W`` columns; the
  rows left give more bands (more metrics: prompt tok/s, running, ITL, errors...), and 2-row charts
  when those show as many metrics. Never taller: the rows nobody needs are left to the screen.
- **Columns are time**, as on the detail charts (``plot.columns``): ``window / width`` seconds each,
  the min, max and mean of every point or 5-s summary whose span touches it; latencies draw each
  column's max (a bad moment is not averaged away), the rest its mean; a column with nothing, or
  only gaps, stays blank. Columns are aligned to the clock (column k spans [k*dt, (k+1)*dt)), so
  only the newest column changes between two refreshes.
- **Incremental.** The overview redraws every second: ``SeriesColumns`` folds each new point into
  its columns once, the way ``plot.columns`` aggregates a whole window (a test checks they agree),
  instead of aggregating five minutes of every series again each second (docs/performance.md,
  "Overview trends").
- **Scales** come from the drawn values, padded a little and rounded, never narrower than
  ``MIN_REL_SPAN`` of the values' size (a +-1% wobble is drawn flat) nor than the metric's own
  floor (a request, a millisecond); a fraction of a capacity (KV cache) is 0-100%. A metric shares
  one scale across the engines (``shared``), or each engine has its own.
- Any finite value draws, 1e308 included (``plot.clamp``); NaN is a gap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from console.telemetry.metrics.history import BUCKET_S, History
from console.ui.widgets.plot import (
    COUNT,
    DEFAULT_WINDOW,
    FRACTION_PCT,
    PER_S,
    SECONDS,
    TOKENS_PER_S,
    WINDOWS,
    Unit,
    clamp,
    fmt_value,
    nice_step,
    window_label,
)

_BLOCKS = " ▁▂▃▄▅▆▇█"
MIN_CHART_W = 10  # a chart narrower than this shows too little: fewer metrics a band instead
VALUE_W = 8  # "1234 t/s", "388 ms", "0.25/s"
RANGE_W = 9  # a per-engine scale, in the unit its header names: "60..420", "880..1120"
GAP = 2  # between two metrics of a band
NAME_MIN = 10  # the name column holds the header's "15m shared"
# The narrowest scale, relative to the values' size: a +-1% wobble stays within an eighth of a cell
# on 2 rows (flat), a +-5% one takes a third of the height, a +-15% swing of generation all of it.
MIN_REL_SPAN = 0.3
PAD = 0.04  # each side of the data, before rounding the ends
CATCH_UP = 8  # the newest points read each refresh; more new ones than that: the series is read again
CHART_STYLE = "cyan"


@dataclass(frozen=True, slots=True)
class TrendMetric:
    """One trend: its history key, its title, its unit, and how its scale is made. ``min_span``: the
    narrowest scale (stored units), so that a series of zeros or a tiny wobble is not stretched over
    the height; ``capacity``: a fraction of a capacity, always 0-100%; ``whole``: a count (whole-number
    scale ends); ``use_max``: draw each column's max (latencies), else its mean."""

    key: str
    title: str
    unit: Unit
    min_span: float
    use_max: bool = False
    capacity: bool = False
    whole: bool = False


# In the order they take the bands' places (a metric no engine has in the window gives its place up).
# Three fit 80 columns.
TREND_METRICS: tuple[TrendMetric, ...] = (
    TrendMetric("generation_tps", "gen", TOKENS_PER_S, 1.0),
    TrendMetric("ttft_p99", "TTFT p99", SECONDS, 1e-3, use_max=True),
    TrendMetric("kv_usage", "KV", FRACTION_PCT, 0.01, capacity=True),
    TrendMetric("waiting", "waiting", COUNT, 1.0, whole=True),
    TrendMetric("running", "running", COUNT, 1.0, whole=True),
    TrendMetric("prompt_tps", "prompt", TOKENS_PER_S, 1.0),
    TrendMetric("itl_p50", "ITL p50", SECONDS, 1e-3, use_max=True),
    TrendMetric("error_rate", "errors", PER_S, 0.1),
    TrendMetric("ttft_p50", "TTFT p50", SECONDS, 1e-3, use_max=True),
    TrendMetric("request_rate", "requests", PER_S, 0.1),
)
# Not here: ITL p99, prefix hits, E2E and queue time (the engine detail has them). Each trend costs
# its drawing every second (docs/performance.md, "Overview trends"): ten fill 200x50 with 4 engines.


class SeriesColumns:
    """One series' column aggregates, column k spanning [k*dt, (k+1)*dt), fed rows (time, min, max,
    mean) in time order. As in ``plot.columns``: a row spans to the next row's time (at most three
    usual steps, or a bucket), a gap row (NaN) draws nothing, and each column a row touches takes its
    min, max and mean. A row's span is known when the next row comes: until then it is in its own
    column only (the newest point shows at once)."""

    __slots__ = ("cols", "diffs", "dt", "last", "memo")

    def __init__(self, dt: float) -> None:
        self.dt = dt
        self.cols: dict[int, list[float]] = {}  # column -> [min, max, sum of means, rows]
        self.diffs: list[float] = []  # the last 8 steps between rows: the usual step is their median
        self.last: tuple[float, float, float, float] | None = None
        # What ``values`` and the levels last gave: (key, first column, list, first column that could
        # still change then); a column before the newest row's is final, so a refresh computes the
        # newest one or two (docs/performance.md, "Overview trends").
        self.memo: dict[str, tuple[object, int, list[Any], int]] = {}

    def open_column(self) -> int:
        """The first column a later row can still change: the newest row's (its span reaches on)."""
        return math.floor(self.last[0] / self.dt) if self.last is not None else -(2**62)

    def memoized(self, name: str, key: object, first: int, last: int,
                 compute: Callable[[int, int], list[Any]]) -> list[Any]:
        """``compute(first, last)`` (one item a column), reusing the items of final columns that the
        same ``key`` gave last time."""
        open_c = self.open_column()
        memo = self.memo.get(name)
        if memo is not None and memo[0] == key and memo[1] <= first:
            _, m_first, items, m_open = memo
            keep = items[first - m_first: max(first, min(m_open, last + 1)) - m_first]
            out = keep + compute(first + len(keep), last) if first + len(keep) <= last else keep
        else:
            out = compute(first, last)
        self.memo[name] = (key, first, out, open_c)
        return out

    def _usual(self) -> float:
        d = self.diffs
        if not d:
            return min(self.dt, BUCKET_S)
        usual = sorted(d)[len(d) // 2]
        return usual if usual > 0 else self.dt

    def _put(self, c: int, lo: float, hi: float, mean: float) -> None:
        acc = self.cols.get(c)
        if acc is None:
            self.cols[c] = [lo, hi, mean, 1.0]
        else:
            if lo < acc[0]:
                acc[0] = lo
            if hi > acc[1]:
                acc[1] = hi
            acc[2] += mean
            acc[3] += 1.0

    def add(self, t: float, lo: float, hi: float, mean: float) -> None:
        prev = self.last
        dt = self.dt
        if prev is not None:
            step = t - prev[0]
            self.diffs.append(step)
            if len(self.diffs) > 8:
                del self.diffs[0]
            p_lo = prev[1]
            if p_lo == p_lo:  # the previous row was data: the columns its span reaches past its own
                if 0 < step <= BUCKET_S:  # within any cap (3 usual steps, at least a bucket)
                    span = step
                else:
                    usual = self._usual()
                    span = step if 0 < step <= 3 * usual else usual
                c0 = math.floor(prev[0] / dt)
                for c in range(c0 + 1, math.ceil((prev[0] + span) / dt)):
                    self._put(c, p_lo, prev[2], prev[3])
        if lo == lo:
            lo, hi, mean = clamp(lo), clamp(hi), clamp(mean)
            self._put(math.floor(t / dt), lo, hi, mean)
        self.last = (t, lo, hi, mean)

    def values(self, first: int, last: int, use_max: bool) -> list[float | None]:
        """Per column ``first``..``last``: its max (``use_max``) or mean; None where nothing was."""
        return self.memoized("values", use_max, first, last, lambda a, b: self._values(a, b, use_max))

    def _values(self, first: int, last: int, use_max: bool) -> list[float | None]:
        get = self.cols.get
        if use_max:
            return [None if (a := get(c)) is None else a[1] for c in range(first, last + 1)]
        # A sum of clamped values overflows only to an infinity: the mean is then the middle of min and max.
        return [None if (a := get(c)) is None else a[2] / a[3] if -math.inf < a[2] < math.inf else a[0] / 2 + a[1] / 2
                for c in range(first, last + 1)]

    def has_data(self, first: int, last: int) -> bool:
        return last in self.cols or any(first <= c <= last for c in self.cols)

    def drop_before(self, first: int) -> None:
        for c in [c for c in self.cols if c < first]:
            del self.cols[c]

    def now(self) -> float | None:
        """The newest row's value (NaN: a gap now), None before any row."""
        return None if self.last is None else self.last[3]


# -- scales and text ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TrendScale:
    """A chart's range in stored units, and the step its ends were rounded to (shown units)."""

    lo: float
    hi: float
    step: float
    factor: float = 1.0
    suffix: str = ""


def _factor(m: TrendMetric, top: float) -> tuple[float, str]:
    """(factor, suffix) from stored to shown units at a scale whose largest value is ``top``."""
    if m.unit.seconds:
        return (1000.0, " ms") if abs(top) < 1 else (1.0, " s")
    suffix = m.unit.suffix
    if suffix and suffix != "%" and not suffix.startswith("/"):
        suffix = " " + suffix  # "812 t/s"; "54%", "0.25/s" and a count keep theirs close
    return m.unit.factor, suffix


def trend_scale(lo: float, hi: float, m: TrendMetric) -> TrendScale:
    """The range a chart of values ``lo``..``hi`` (stored units) draws over: the data's with a little
    padding, rounded to a step, at least ``MIN_REL_SPAN`` of their size and ``m.min_span`` wide, not
    below zero for data that is not; 0-100% for a fraction of a capacity."""
    if m.capacity:
        return TrendScale(0.0, 1.0, 10.0, *_factor(m, 1.0))
    lo, hi = clamp(lo), clamp(hi)
    if hi < lo:
        lo, hi = hi, lo
    non_negative = lo >= 0
    data_hi = hi
    floor_span = max(MIN_REL_SPAN * max(abs(lo), abs(hi)), m.min_span)
    if hi - lo < floor_span:
        mid = lo / 2 + hi / 2
        lo, hi = mid - floor_span / 2, mid + floor_span / 2
        if non_negative and lo < 0:
            lo, hi = 0.0, floor_span
    pad = PAD * (hi - lo)
    lo, hi = lo - pad, hi + pad
    if non_negative and lo < 0:
        lo = 0.0
    factor, suffix = _factor(m, max(abs(lo), abs(hi)))
    step = nice_step((hi - lo) * factor / 20)  # ends within a twentieth of the span
    if m.whole:
        step = max(1.0, step)
    a = math.floor(lo * factor / step + 1e-9) * step
    b = math.ceil(hi * factor / step - 1e-9) * step
    if non_negative and a < 0:
        a = 0.0
    if m.unit.hi is not None and data_hi * m.unit.factor <= m.unit.hi:  # a percentage: not past 100%
        b = min(b, m.unit.hi)
    if not (b > a and math.isfinite(b - a)):
        return TrendScale(lo, hi, (hi - lo) * factor if hi > lo else 1.0, factor, suffix)
    return TrendScale(a / factor, b / factor, step, factor, suffix)


def _number(v: float, step: float = 0.0) -> str:
    """A number in 6 cells at most: 388, 12.5, 1234, 34k, 2.5e+06."""
    v = clamp(v)
    a = abs(v)
    if a >= 1e6 or 0 < a < 1e-2:
        return f"{v:.2g}"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if step:
        return fmt_value(v, step)
    return f"{v:.0f}" if a >= 100 or v == int(v) else f"{v:.1f}" if a >= 1 else f"{v:.2f}"


def value_text(v: float | None, m: TrendMetric) -> str:
    """The value now with its unit ("388 ms", "812 t/s", "54%"); "--" for a gap now, "n/a" for none."""
    if v is None:
        return "n/a"
    if v != v:
        return "--"
    v = clamp(v)
    if m.unit.seconds:
        if abs(v) < 1:
            return f"{_number(v * 1000)} ms"
        return f"{v:.2f} s" if abs(v) < 10 else f"{_number(v)} s"
    factor, suffix = _factor(m, v)
    shown = clamp(v * factor)
    if suffix == "%":  # "54%": a percentage's tenths are noise here
        return (f"{shown:.0f}" if abs(shown) < 1e4 else _number(shown)) + suffix
    return _number(shown) + suffix


def scale_text(s: TrendScale, factor: float | None = None, *, unit: bool = True) -> str:
    """"60..420 ms", "700..950 t/s", "0..100%": the ends in one unit, written once; ``factor``: in
    another unit than the scale's own (the one a metric's header names when each engine has its
    scale), without it when not ``unit``."""
    f = s.factor if factor is None else factor
    step = s.step * f / s.factor
    lo, hi = clamp(s.lo * f), clamp(s.hi * f)
    suffix = s.suffix if unit else ""
    if max(abs(lo), abs(hi)) >= 1e4:  # 12k..15k: the step as read, not 12000..15000
        return f"{_number(lo)}..{_number(hi)}{suffix}"
    return f"{fmt_value(lo, step)}..{fmt_value(hi, step)}{suffix}"


def levels(values: Sequence[float | None], scale: TrendScale, rows: int) -> list[int]:
    """Each value's height in eighths of a cell, 1..8*rows (a value at the scale's bottom still draws
    its lowest eighth, so a zero is never read as a gap); 0 for a gap."""
    top = 8 * rows
    lo = scale.lo
    span = scale.hi - lo
    span = span if span > 0 and math.isfinite(span) else 1.0
    hi = lo + span
    k = top / span
    return [0 if v is None else 1 if v <= lo else top if v >= hi else (round((v - lo) * k) or 1) for v in values]


def _glyphs(rows: int) -> tuple[tuple[str, ...], ...]:
    """Per line of a ``rows``-line chart, the top one first: its glyph for each level (0: a gap)."""
    out = []
    for j in range(rows):
        base = 8 * (rows - 1 - j)
        out.append(tuple(" " if v <= base else _BLOCKS[min(8, v - base)] for v in range(8 * rows + 1)))
    return tuple(out)


_GLYPHS = {rows: _glyphs(rows) for rows in (1, 2)}


def chart_rows(lv: Sequence[int], rows: int) -> list[str]:
    """``rows`` lines of eighth blocks, the top one first."""
    tables = _GLYPHS.get(rows) or _glyphs(rows)
    return ["".join(map(t.__getitem__, lv)) for t in tables]


# -- layout ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Plan:
    """How the trends use their rows: engines shown, rows a chart, metrics a band, bands, and the
    width of each chart and of its text (value, and a per-engine scale)."""

    engines: int
    rows: int
    per_band: int
    bands: int
    chart_w: int
    text_w: int
    more_line: bool = False


def text_width(shared: bool, rows: int) -> int:
    """The text after a chart: the value; with per-engine scales, the scale too (under it on 2 rows)."""
    if shared:
        return VALUE_W
    return max(VALUE_W, RANGE_W) if rows > 1 else VALUE_W + 1 + RANGE_W


def band_fit(width: int, name_w: int, text_w: int) -> int:
    """How many metrics a band of ``width`` holds with charts of ``MIN_CHART_W`` columns (1 at least)."""
    room = width - name_w - 1 + GAP
    return max(1, room // (MIN_CHART_W + 1 + text_w + GAP))


def chart_width(width: int, name_w: int, text_w: int, per_band: int) -> int:
    room = width - name_w - 1 + GAP
    return max(1, room // max(1, per_band) - GAP - 1 - text_w)


def plan(width: int, height: int, engines: int, metrics: int, name_w: int, shared: bool, quiet: int = 0) -> Plan:
    """The layout of ``metrics`` trends (those with data; 0: none yet) of ``engines`` engines in
    ``width`` x ``height`` cells; the last ``quiet`` engines may go unsaid when there is no row for
    them (what became of them is said elsewhere)."""
    if engines <= 0 or height < 2:
        return Plan(0, 1, 0, 0, 0, 0)
    if height < 1 + engines:  # not every engine has a line: a last line says how many are not shown
        shown = height - 1
        more = engines - shown > quiet and height >= 3
        tw = text_width(shared, 1)
        k = band_fit(width, name_w, tw)
        return Plan(shown - more, 1, k, 1, chart_width(width, name_w, tw, k), tw, more_line=more)
    best: Plan | None = None
    for rows in (2, 1):
        tw = text_width(shared, rows)
        k_max = band_fit(width, name_w, tw)
        fit = height // (1 + engines * rows)
        if fit < 1:
            continue
        wanted = metrics if metrics > 0 else 3  # none has data yet: the first metrics, each n/a
        k = min(k_max, max(min(k_max, 3, wanted), math.ceil(wanted / fit)))
        bands = min(fit, math.ceil(wanted / k))
        p = Plan(engines, rows, k, bands, chart_width(width, name_w, tw, k), tw)
        # 2-row charts when they show as many metrics as 1-row ones would.
        if best is None or min(wanted, p.bands * p.per_band) > min(wanted, best.bands * best.per_band):
            best = p
    assert best is not None
    return best


def capacity(width: int, height: int, engines: int, name_w: int, shared: bool) -> int:
    """The most metrics the trends could show: those with data are looked for up to this many."""
    if engines <= 0 or height < 2:
        return 0
    if height < 1 + engines:
        return band_fit(width, name_w, text_width(shared, 1))
    return max(band_fit(width, name_w, text_width(shared, rows)) * (height // (1 + engines * rows))
               for rows in (1, 2))


# -- drawing -----------------------------------------------------------------------------------

Piece = tuple[str, str]  # (text, style)


@dataclass(frozen=True, slots=True)
class Drawn:
    lines: list[list[Piece]]
    plan: Plan
    metrics: tuple[TrendMetric, ...]


class Trends:
    """The overview's trends: the window, shared or per-engine scales, and each series' columns."""

    def __init__(self, metrics: Sequence[TrendMetric] = TREND_METRICS) -> None:
        self.metrics = tuple(metrics)
        self.window = DEFAULT_WINDOW
        self.shared = True
        self._series: dict[Hashable, SeriesColumns] = {}
        self._history: History | None = None
        self._rewrites = 0
        # The last layout, by what it was made for: the next refresh starts from it (a layout's
        # column width is part of each series' state, so a guess that changes it reads them again).
        self._last_plan: tuple[tuple[object, ...], Plan] | None = None

    def step_window(self, step: int) -> None:
        spans = [s for s, _ in WINDOWS]
        i = spans.index(self.window) if self.window in spans else 1
        self.window = spans[(i + step) % len(spans)]

    def _columns(self, history: History, key: Hashable, dt: float, end: float, ncols: int) -> SeriesColumns:
        """The series' columns, caught up with its newest points; read again from the history when the
        column width changed, more points came than ``CATCH_UP`` since the last time, or time went back."""
        s = self._series.get(key)
        if s is not None and s.dt == dt:
            pts = history.points(key, last=2)  # a refresh brings one point
            if len(pts) == 2 and s.last is not None and pts[0][0] > s.last[0]:
                pts = history.points(key, last=CATCH_UP)
            last_t = s.last[0] if s.last is not None else -math.inf
            if not pts:
                return s
            if pts[-1][0] >= last_t and (pts[0][0] <= last_t or len(pts) < CATCH_UP):
                for t, v in pts:
                    if t > last_t:
                        s.add(t, v, v, v)
                return s
        s = self._series[key] = SeriesColumns(dt)
        for row in history.window(key, end, dt * (ncols + 1)):
            s.add(*row)
        return s

    def _choose(self, history: History, p: Plan, engines: Sequence[tuple[str, str]], end: float, most: int,
                touched: set[Hashable]) -> list[tuple[TrendMetric, list[SeriesColumns]]]:
        """Up to ``most`` metrics, in order, that an engine has in the window, with their columns."""
        dt = self.window / max(1, p.chart_w - 1)  # the newest column is open: the others hold the window
        last = math.floor(end / dt)
        first = last - p.chart_w + 1
        chosen: list[tuple[TrendMetric, list[SeriesColumns]]] = []
        for m in self.metrics:
            if len(chosen) >= most:
                break
            cols = []
            for name, _ in engines:
                key = (name, m.key)
                cols.append(self._columns(history, key, dt, end, p.chart_w))
                touched.add(key)
            if any(c.has_data(first, last) for c in cols):
                chosen.append((m, cols))
        return chosen

    def draw(self, history: History, engines: Sequence[tuple[str, str]], *, end: float, width: int,
             height: int, name_w: int, quiet: int = 0) -> Drawn:
        """The trends of ``engines`` ((history name, name shown)) up to ``end``, in ``width`` x
        ``height`` cells at most; the last ``quiet`` engines give their rows up first, unsaid (the
        screen says elsewhere that they are stale, stopped or gone)."""
        rewrites = history.rewrites
        if history is not self._history or rewrites != self._rewrites:
            self._series.clear()  # another store (a replay's seek), or a series' past rewritten (a backfill)
            self._history, self._rewrites = history, rewrites
        name_w = max(NAME_MIN, name_w)
        most = capacity(width, height, len(engines), name_w, self.shared)
        if not most:
            self._series.clear()
            return Drawn([], plan(width, height, 0, 0, name_w, self.shared), ())
        made_for = (width, height, len(engines), quiet, name_w, self.shared, self.window)
        if self._last_plan is not None and self._last_plan[0] == made_for:
            p = self._last_plan[1]
        else:
            p = plan(width, height, len(engines), most, name_w, self.shared, quiet)
        shown = engines[: p.engines]
        touched: set[Hashable] = set()
        # Which metrics have data depends on the columns, whose width depends on how many have data:
        # from the last layout (or the widest guess), again only when the count changed.
        chosen: list[tuple[TrendMetric, list[SeriesColumns]]] = []
        for _ in range(3):
            chosen = self._choose(history, p, shown, end, most, touched)
            final = plan(width, height, len(engines), len(chosen), name_w, self.shared, quiet)
            if final == p:
                break
            p = final
        else:
            chosen = self._choose(history, p, shown, end, most, touched)
        self._last_plan = (made_for, p)
        if not chosen:  # no history yet: the first band's metrics, each n/a
            dt = self.window / max(1, p.chart_w - 1)  # the newest column is open: the others hold the window
            chosen = [(m, [self._columns(history, (n, m.key), dt, end, p.chart_w) for n, _ in shown])
                      for m in self.metrics[: p.per_band]]
            touched.update((n, m.key) for m in self.metrics[: p.per_band] for n, _ in shown)
        for key in [k for k in self._series if k not in touched]:
            del self._series[key]  # an engine gone, filtered out or not shown: read again if it comes back
        chosen = chosen[: p.per_band * p.bands]
        lines = self._lines(p, chosen, shown, end, name_w)
        if p.more_line:
            more = len(engines) - p.engines
            lines.append([(f"… trends of {more} more engine{'s' if more != 1 else ''} not shown: "
                           "open one (⏎) for its charts", "dim")])
        return Drawn(lines, p, tuple(m for m, _ in chosen))

    def _lines(self, p: Plan, chosen: list[tuple[TrendMetric, list[SeriesColumns]]],
               engines: Sequence[tuple[str, str]], end: float, name_w: int) -> list[list[Piece]]:
        dt = self.window / max(1, p.chart_w - 1)  # the newest column is open: the others hold the window
        last = math.floor(end / dt)
        first = last - p.chart_w + 1
        cell_w = p.chart_w + 1 + p.text_w
        lines: list[list[Piece]] = []
        head = f"{window_label(self.window)} {'shared' if self.shared else 'own'}"
        for b in range(p.bands):
            band = chosen[b * p.per_band:(b + 1) * p.per_band]
            if not band:
                break
            header: list[Piece] = [(head[:name_w].ljust(name_w + 1), "dim")]
            body: list[list[list[Piece]]] = [[[((shown if j == 0 else "").ljust(name_w + 1), "bold")]
                                              for j in range(p.rows)] for _, shown in engines]
            for i, (m, cols) in enumerate(band):
                sep = " " * GAP if i < len(band) - 1 else ""
                vals = [c.values(first, last, m.use_max) for c in cols]
                for c in cols:
                    if len(c.cols) > p.chart_w + 4:
                        c.drop_before(first)
                finite = [[v for v in vs if v is not None] for vs in vals]
                if self.shared:
                    every = [v for vs in finite for v in vs]
                    one = trend_scale(min(every), max(every), m) if every else None
                    scales = [one] * len(vals)
                else:
                    scales = [trend_scale(min(vs), max(vs), m) if vs else None for vs in finite]
                # The header: the metric, and its scale when the engines share it, else the unit of
                # each engine's (the largest one's: ms for all, or s for all).
                title = m.title
                top = max((max(abs(sc.lo), abs(sc.hi)) for sc in scales if sc is not None), default=1.0)
                factor, suffix = _factor(m, top) if not m.capacity else (m.unit.factor, "%")
                if self.shared:
                    scale = " " + scale_text(scales[0]) if scales and scales[0] is not None else ""
                else:
                    scale = f" ({suffix.strip()})" if suffix.strip() else ""
                if len(title) + len(scale) > cell_w:
                    title = title[: max(1, cell_w - len(scale) - 1)] + "…"
                header.append((title, "bold"))
                header.append((scale[: max(0, cell_w - len(title))].ljust(cell_w - len(title)) + sep, "dim"))
                for n, rows in enumerate(body):
                    sc = scales[n]
                    latest = cols[n].now()
                    # Nothing in the window and nothing now: not exported (TGI's KV), not a gap.
                    now = value_text(None if not finite[n] and latest is not None and latest != latest else latest, m)
                    if sc is None:
                        charts = [" " * p.chart_w] * p.rows
                    else:
                        vs = vals[n]
                        def of(a: int, b: int, vs: list[float | None] = vs, sc: TrendScale = sc) -> list[int]:
                            return levels(vs[a - first: b + 1 - first], sc, p.rows)

                        lv = cols[n].memoized("levels", (sc, p.rows, m.use_max), first, last, of)
                        charts = chart_rows(lv, p.rows)
                    own = scale_text(sc, factor, unit=False) if sc is not None and not self.shared else ""
                    if len(own) > RANGE_W:
                        own = own[: RANGE_W - 1] + "…"
                    quiet = now in ("--", "n/a")
                    for j, row in enumerate(rows):
                        row.append((charts[j], CHART_STYLE))
                        if j == 0:
                            text = f"{now:>{VALUE_W}} {own:>{RANGE_W}}" if not self.shared and p.rows == 1 else now
                            row.append((" " + text.rjust(p.text_w)[: p.text_w] + sep, "dim" if quiet else ""))
                        else:
                            row.append((" " + (own if j == 1 else "").rjust(p.text_w) + sep, "dim"))
            lines.append(header)
            for rows in body:
                lines.extend(rows)
        return lines


def as_plain(lines: Sequence[Sequence[Piece]]) -> str:
    """The lines' text (tests; the overview's key for an unchanged drawing)."""
    return "\n".join("".join(t for t, _ in line) for line in lines)
