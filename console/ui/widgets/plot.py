"""Time-series charts as text: a y-axis in the metric's unit, a time axis, gaps, one or two series.

Plain string work, no Textual: ``draw`` turns history rows into the lines a ``TimeChart`` shows.

- Columns are time: the right edge is ``end`` ("now"), each column ``window / columns`` seconds; a
  column takes the min, max and mean of every point or summary bucket whose span touches it, so a
  short spike survives a wide window. A column nothing touches, or only gaps (NaN), stays blank:
  stale, stopped and not-yet-collected spans are never drawn as a flat line.
- Bounded quantities (``Unit.lo``/``Unit.hi``) keep their fixed scale; the rest get a "nice" range
  (1-2-2.5-5 steps) around their data that shows its lower bound, so a 5% wobble is seen as one.
- One series is an area (eighth blocks to the column's mean, a thin bar up to its max); two series
  are lines told apart by their glyphs as well as colour (half blocks and braille dots), for
  NO_COLOR terminals.
- Any finite value draws, 1e308 and 2**63 included: values are clamped to +-1e300 (and below 1e-300
  to 0) before any arithmetic, so no range or level computation overflows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from console.telemetry.metrics.history import BUCKET_S, Row

# The time windows a chart offers, seconds -> label.
WINDOWS: tuple[tuple[float, str], ...] = ((60.0, "1m"), (300.0, "5m"), (900.0, "15m"), (3600.0, "1h"))
DEFAULT_WINDOW = 300.0
_LIMIT = 1e300
_BLOCKS = " ▁▂▃▄▅▆▇█"
_SPARK = "▁▂▃▄▅▆▇█"
# Glyphs of a two-series chart, lowest sub-level first: the first series in half blocks, the
# second in braille dots; a cell both reach shows _BOTH.
LINE_GLYPHS = ("▄▀", "⣀⠤⠒⠉")
LEGEND_GLYPHS = ("▀", "⠉")
_BOTH = "▓"
SERIES_STYLES = ("cyan", "magenta")


def window_label(seconds: float) -> str:
    return next((label for s, label in WINDOWS if s == seconds), _duration(seconds))


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600 and s % 3600 == 0:
        return f"{s // 3600}h"
    if s >= 60:
        m, r = divmod(s, 60)
        return f"{m}m{r:02d}s" if r else f"{m}m"
    return f"{s}s"


def clamp(v: float) -> float:
    """A finite value no arithmetic here can overflow with (NaN stays NaN, infinities clamp)."""
    if v != v:
        return v
    if v > _LIMIT:
        return _LIMIT
    if v < -_LIMIT:
        return -_LIMIT
    return 0.0 if -1e-300 < v < 1e-300 else float(v)


@dataclass(frozen=True, slots=True)
class Unit:
    """How a metric reads: ``suffix`` after each label, ``factor`` from stored to shown values, and a
    fixed scale (``lo``..``hi``, shown units) for bounded quantities. ``seconds``: a latency, shown in
    ms while the chart's top is under a second."""

    suffix: str
    factor: float = 1.0
    lo: float | None = None
    hi: float | None = None
    seconds: bool = False


SECONDS = Unit("s", seconds=True)
TOKENS_PER_S = Unit("t/s")
PER_S = Unit("/s")
COUNT = Unit("")
FRACTION_PCT = Unit("%", factor=100.0, lo=0.0, hi=100.0)
PERCENT = Unit("%", lo=0.0, hi=100.0)
CELSIUS = Unit("°C")


def nice_step(raw: float) -> float:
    """The 1-2-2.5-5 x 10^k step at or above ``raw`` (> 0)."""
    exp = math.floor(math.log10(raw))
    base = 10.0**exp
    if base <= 0.0 or not math.isfinite(base):
        return raw
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if raw <= m * base * (1 + 1e-9):
            return m * base
    return 10.0 * base


@dataclass(frozen=True, slots=True)
class Scale:
    lo: float
    hi: float
    ticks: tuple[float, ...]
    step: float


def nice_scale(lo: float, hi: float, *, intervals: int = 2) -> Scale:
    """A range covering ``lo``..``hi`` on 1-2-2.5-5 steps, with 2-4 tick values (lo and hi among them).
    A range of data all >= 0 does not reach below 0; a flat series gets a band around its value."""
    lo, hi = clamp(lo), clamp(hi)
    if hi < lo:
        lo, hi = hi, lo
    non_negative = lo >= 0
    if hi == lo:
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
        if non_negative and lo < 0:
            lo = 0.0
    step = nice_step((hi - lo) / intervals)
    if not (step > 0 and math.isfinite(step)):
        return Scale(lo, hi, (lo, hi), hi - lo)
    # A hair past a step (200.000003 ms: a float32 summary of 0.2 s) does not take the next step.
    nlo = math.floor(lo / step + 1e-6) * step
    nhi = math.ceil(hi / step - 1e-6) * step
    if non_negative and nlo < 0:
        nlo = 0.0
    if nhi <= nlo or not math.isfinite(nhi - nlo):
        return Scale(lo, hi, (lo, hi), hi - lo)
    n = round((nhi - nlo) / step)
    if n > 3:  # more than 4 ticks: the ends and the middle
        ticks: tuple[float, ...] = (nlo, nlo / 2 + nhi / 2, nhi)
    else:
        ticks = tuple(nlo + i * step for i in range(n + 1))
    return Scale(nlo, nhi, ticks, step)


def fmt_value(v: float, step: float = 0.0) -> str:
    """A number for an axis or legend: as many decimals as ``step`` needs (3 at most), and
    scientific notation for the huge and the tiny."""
    a = abs(v)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{v:.2g}"
    ref = step if step > 0 else a
    decimals = 0 if ref == 0 or ref >= 1 else min(3, -math.floor(math.log10(ref) + 1e-9))
    if step > 0 and decimals < 3 and round(step, decimals) != step:
        decimals += 1
    return f"{v:.{decimals}f}"


def columns(rows: Sequence[Row], end: float, window: float, ncols: int) -> list[tuple[float, float, float] | None]:
    """(min, max, mean) per column of the ``window`` seconds up to ``end``, None where nothing was
    collected. A row spans to the next one (at most three of its usual steps, or one bucket)."""
    out: list[list[float] | None] = [None] * ncols
    if ncols <= 0 or not rows:
        return []
    dt = window / ncols
    start = end + dt - window  # the last column starts at ``end``: the newest point is drawn
    n = len(rows)
    diffs = [rows[i + 1][0] - rows[i][0] for i in range(max(0, n - 9), n - 1)]
    usual = sorted(diffs)[len(diffs) // 2] if diffs else min(dt, BUCKET_S)
    usual = usual if usual > 0 else dt
    cap = max(3 * usual, BUCKET_S)
    for i, (t, lo, hi, mean) in enumerate(rows):
        if lo != lo:
            continue
        span = rows[i + 1][0] - t if i + 1 < n else usual
        if span <= 0 or span > cap:
            span = usual
        c0 = math.floor((t - start) / dt)
        c1 = math.ceil((t + span - start) / dt) - 1
        if c1 < 0 or c0 >= ncols:
            continue
        lo, hi, mean = clamp(lo), clamp(hi), clamp(mean)
        for c in range(max(0, c0), min(ncols - 1, max(c0, c1)) + 1):
            acc = out[c]
            if acc is None:
                out[c] = [lo, hi, mean, 1.0]
            else:
                acc[0] = min(acc[0], lo)
                acc[1] = max(acc[1], hi)
                acc[2] += mean
                acc[3] += 1.0
    return [None if a is None else (a[0], a[1], clamp(a[2] / a[3]) if math.isfinite(a[2]) else a[0] / 2 + a[1] / 2)
            for a in out]


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    rows: Sequence[Row]


@dataclass(frozen=True, slots=True)
class Drawn:
    """A chart's lines: the title and legend, the plot rows (y labels included), the time axis.
    ``styles``: per plot row, the (start, end, style) spans of its series' glyphs."""

    title: str
    legend: list[tuple[str, str]]  # (text, style)
    rows: list[str]
    styles: list[list[tuple[int, int, str]]]
    axis: str


def _display_unit(unit: Unit, top: float) -> tuple[str, float]:
    """(suffix, factor) for a chart whose largest value is ``top`` in stored units."""
    if unit.seconds:
        return ("ms", 1000.0) if abs(top) < 1 else ("s", 1.0)
    return unit.suffix, unit.factor


def label(v: float, unit: Unit, *, step: float = 0.0) -> str:
    """``v`` (stored units) with its unit, e.g. 0.074 s -> "74 ms"."""
    if v != v:
        return "--"
    suffix, factor = _display_unit(unit, v)
    text = fmt_value(clamp(clamp(v) * factor), step)
    return f"{text} {suffix}".rstrip() if suffix not in ("%", "") else text + suffix


def time_axis(width: int, window: float) -> str:
    """"-5m ... -2m30s ... now" over ``width`` cells."""
    left, mid, right = "-" + _duration(window), "-" + _duration(window / 2), "now"
    if width < len(left) + len(right) + 1:
        return right.rjust(width)[:width]
    line = [" "] * width
    line[: len(left)] = left
    line[width - len(right):] = right
    m0 = width // 2 - len(mid) // 2
    if width >= len(left) + len(mid) + len(right) + 6 and m0 > len(left) + 1:
        line[m0: m0 + len(mid)] = mid
    return "".join(line)


def draw(title: str, series: Sequence[Series], unit: Unit, *, end: float, window: float, width: int, height: int,
         top: float | None = None, use_max: bool = False) -> Drawn:
    """A chart of ``series`` (one or two) ``width`` x ``height`` cells: a title line with the window and
    the legend, ``height - 2`` plot rows with y labels, and a time axis. ``top``: a fixed top of the
    scale in stored units (a power limit), over the unit's own. ``use_max``: two-series lines follow
    each column's max (latency: a bad moment is not averaged away), else its mean."""
    plot_h = max(1, height - 2)
    # Rows are read several times below: as tuples once (a chart keeps them packed, History.Rows).
    series = [s if isinstance(s.rows, list) else Series(s.name, list(s.rows)) for s in series]
    # The y labels first (their width sets the plot's), from the window's data.
    since = end - window
    lows = [clamp(r[1]) for s in series for r in s.rows if r[0] >= since and r[1] == r[1]]
    highs = [clamp(r[2]) for s in series for r in s.rows if r[0] >= since and r[2] == r[2]]
    finite = bool(highs)
    top_stored = max(highs, default=0.0)
    suffix, factor = _display_unit(unit, top if top is not None else top_stored)
    if unit.lo is not None and unit.hi is not None:
        hi = top * factor if top is not None else unit.hi
        scale = nice_scale(unit.lo, hi)
        scale = Scale(unit.lo, hi, scale.ticks if scale.hi == hi else (unit.lo, hi / 2, hi), scale.step)
    elif top is not None:
        fixed = clamp(top * factor)
        scale = Scale(0.0, fixed, (0.0, fixed / 2, fixed), fixed / 2)
    elif finite:
        scale = nice_scale(clamp(min(lows) * factor), clamp(top_stored * factor))
    else:
        scale = nice_scale(0.0, 1.0)
    ticks = scale.ticks if plot_h >= 3 else (scale.lo, scale.hi)
    shown_unit = Unit(suffix)
    tick_labels = {t: label(t, shown_unit, step=scale.step) for t in ticks}
    lab_w = max(len(s) for s in tick_labels.values())
    plot_w = max(1, width - lab_w - 1)
    cols = [columns(s.rows, end, window, plot_w) for s in series]
    span = scale.hi - scale.lo if scale.hi > scale.lo else 1.0

    def frac(v: float) -> float:
        return min(1.0, max(0.0, (clamp(v * factor) - scale.lo) / span))

    grid = [[" "] * plot_w for _ in range(plot_h)]
    owner = [[-1] * plot_w for _ in range(plot_h)]
    if len(series) == 1:
        for x, c in enumerate(cols[0]):
            if c is None:
                continue
            lv = max(1, round(frac(c[2]) * plot_h * 8))
            lv_max = round(frac(c[1]) * plot_h * 8)
            mean_row = (lv - 1) // 8
            for r in range(plot_h):
                fill = lv - 8 * r
                if fill > 0:
                    grid[r][x] = _BLOCKS[min(8, fill)]
                    owner[r][x] = 0
                elif r > mean_row and r <= (lv_max - 1) // 8:
                    grid[r][x] = "│"
                    owner[r][x] = 0
    else:
        for k, s_cols in enumerate(cols[:2]):
            glyphs = LINE_GLYPHS[k]
            sub = len(glyphs)
            for x, c in enumerate(s_cols):
                if c is None:
                    continue
                lv = min(plot_h * sub - 1, int(frac(c[1] if use_max else c[2]) * plot_h * sub))
                r = lv // sub
                if owner[r][x] not in (-1, k):
                    grid[r][x] = _BOTH
                    owner[r][x] = 2
                else:
                    grid[r][x] = glyphs[lv % sub]
                    owner[r][x] = k
    # Labels on the rows their ticks fall on (top row = highest).
    row_label: dict[int, str] = {}
    for t in ticks:
        r = round((t - scale.lo) / span * (plot_h - 1)) if plot_h > 1 else 0
        row_label.setdefault(r, tick_labels[t])
    lines, styles = [], []
    for r in range(plot_h - 1, -1, -1):
        lab = row_label.get(r)
        prefix = (lab.rjust(lab_w) + "┤") if lab is not None else " " * lab_w + "│"
        lines.append(prefix + "".join(grid[r]))
        spans: list[tuple[int, int, str]] = []
        for x, who in enumerate(owner[r]):
            if who < 0:
                continue
            style = SERIES_STYLES[who] if who < 2 else "bold"
            at = lab_w + 1 + x
            if spans and spans[-1][1] == at and spans[-1][2] == style:
                spans[-1] = (spans[-1][0], at + 1, style)
            else:
                spans.append((at, at + 1, style))
        styles.append(spans)
    axis = " " * lab_w + "└" + time_axis(plot_w, window)[: plot_w]
    legend: list[tuple[str, str]] = []
    head = f"{title} · {window_label(window)}"
    if len(series) == 1:
        now = _now(series[0].rows, end)
        seen = any(r[1] == r[1] for r in series[0].rows)
        legend.append((f"  now {label(now, unit) if now is not None else ('--' if seen else 'n/a')}", ""))
        if finite:
            legend.append((f"  max {label(top_stored, unit)}", "dim"))
        if not series[0].rows:
            legend.append(("  (no history yet)", "dim"))
    else:
        for k, s in enumerate(series[:2]):
            now = _now(s.rows, end)
            legend.append((f"  {LEGEND_GLYPHS[k]} ", SERIES_STYLES[k]))
            legend.append((f"{s.name} {label(now, unit) if now is not None else '--'}", ""))
    return Drawn(head, legend, lines, styles, axis)


def _now(rows: Sequence[Row], end: float) -> float | None:
    """The newest value, None when the newest row is a gap (or there is none)."""
    if not rows:
        return None
    v = rows[-1][3]
    return None if v != v else v


def sparkline(rows: Sequence[Row], end: float, window: float, width: int) -> tuple[str, float | None, float | None]:
    """One line over the window (column means, scaled min..max of the window) and that min and max."""
    cols = columns(rows, end, window, width)
    fin = [c for c in cols if c is not None]
    if not fin:
        return " " * width, None, None
    lo, hi = min(c[0] for c in fin), max(c[1] for c in fin)
    span = hi - lo
    chars = []
    for c in cols:
        if c is None:
            chars.append(" ")
        else:
            f = 0.0 if span <= 0 else min(1.0, max(0.0, (c[2] - lo) / span))
            chars.append(_SPARK[min(7, int(f * 8))])
    return "".join(chars), lo, hi
