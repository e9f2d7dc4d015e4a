"""Two engines' series on one chart, as text: the A/B compare view (console.ui.widgets.pairchart shows it).

Plain string work, no Textual. What sets it apart from ``plot.draw`` (the engine detail charts):

- Two connected lines, told apart in monochrome as well as by colour: the first engine in half blocks
  (a solid line), the second in braille dots (a dotted one); a column's vertical run reaches halfway
  to each neighbour's level, so a step reads as a line, not as two loose cells. A cell both lines
  reach shows ``BOTH_GLYPH``. A gap (nothing collected) breaks the line.
- A y-range from the bulk of each engine's column values over the window (20th to 80th percentile,
  widened by a fence of 1.5 times their spread), the newest values always inside it: one spike
  does not squash the rest into a row. A point outside the range is drawn at the edge with an arrow
  (``CLIP_UP``, ``CLIP_DOWN``) and named in a note ("↑ vllm-sim max 400 ms"). The range spans at
  least +-10% of its level (or a floor by unit near zero): a 1 ms wobble on 50 ms does not fill
  the height.
- A verdict: the second engine's median over the window against the first's, over the columns both
  have data in ("sglang-sim TTFT p99 23% lower than vllm-sim over 5m"), with whether that is better
  (per metric: lower latency and queue, higher throughput; none for KV use) as a mark (▲ better,
  ▼ worse, = about the same) and a colour.
- Both engine names and their current values in the legend at every width: names are cut in their
  middle (``format.fit_name``) before they are dropped, and never are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from console.ui import format as fmt
from console.ui.widgets.plot import (
    FRACTION_PCT,
    SERIES_STYLES,
    Scale,
    Series,
    Unit,
    columns,
    label,
    nice_scale,
    time_axis,
    window_label,
)

Better = Literal["lower", "higher"] | None
Segment = tuple[str, str]  # (text, Rich style)

LEGEND_GLYPHS = ("▀", "⠒")  # what each engine's line looks like, for the legend
BOTH_GLYPH = "▓"
BOTH_STYLE = "bold"
CLIP_UP = "↑"
CLIP_DOWN = "↓"
_HALF = {1: "▄", 2: "▀", 3: "█"}  # bit 1: the cell's lower half, bit 2: its upper half
# Braille dots of a cell, [dot column][dot row from the bottom].
_DOTS = ((0x40, 0x04, 0x02, 0x01), (0x80, 0x20, 0x10, 0x08))
_HALVES = 2  # levels of a cell in half blocks
_DOT_ROWS = 4  # levels of a cell in braille
_EDGE = 1e-6  # a value on the scale's edge, give or take a float's rounding, is on the chart

# The bulk of a series over the window: its column values between these percentiles; a value
# further than FENCE times their spread beyond them is clipped. A spike up to a fifth of the window
# (a startup's minute of five) is clipped; a longer level is the series' own and drawn.
BULK = (0.2, 0.8)
FENCE = 1.5
MIN_HALF_SPAN = 0.1  # the range reaches at least +-10% of its level
# Near zero, the smallest span by unit (stored units): a 0.1 ms ITL wobble or one waiting request
# does not fill the height.
SPAN_FLOOR = {"s": 0.002, "t/s": 10.0, "/s": 1.0, "": 4.0}
SAME_BAND = 0.05  # within 5% (or 2 points of a fraction), the verdict says "about the same"
SAME_POINTS = 2.0
SAME_OF_FLOOR = 0.125  # and near zero, within an eighth of the unit's span floor (half a waiting request)
MIN_NAME = 5  # a name cut shorter than this reads as no name

# A verdict's (mark, words) styles; without colour the mark says it.
BETTER_STYLES = ("bold", "") if fmt.MONO else ("bold green", "green")
WORSE_STYLES = ("bold", "") if fmt.MONO else ("bold red", "red")
SAME_STYLES = ("bold", "")
NEUTRAL_STYLES = ("", "")
NO_VERDICT_STYLES = ("dim", "dim")


@dataclass(frozen=True, slots=True)
class PairDrawn:
    """A compare chart's lines, each as (text, style) segments: the title (and legend) line(s), the
    plot rows with their y labels, the time axis (left out when the height is short), the verdict."""

    lines: list[list[Segment]]
    verdict: Verdict
    clipped: tuple[str, ...]  # the notes of clipped series ("↑ vllm-sim max 400 ms")

    @property
    def plain(self) -> list[str]:
        return ["".join(t for t, _ in line) for line in self.lines]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The second engine against the first over the window: ``mark`` ▲ better, ▼ worse, = about the
    same, · a difference without a better side, blank when it cannot say; ``forms``: its text from the
    longest to the shortest, each with ``{a}`` and ``{b}`` for the names."""

    mark: str
    styles: tuple[str, str]  # the mark's, the words'
    forms: tuple[str, ...]


def _display(unit: Unit, top: float) -> tuple[str, float]:
    if unit.seconds:
        return ("ms", 1000.0) if abs(top) < 1 else ("s", 1.0)
    return unit.suffix, unit.factor


def _quantile(ordered: Sequence[float], q: float) -> float:
    pos = q * (len(ordered) - 1)
    i = math.floor(pos)
    j = min(i + 1, len(ordered) - 1)
    return ordered[i] + (ordered[j] - ordered[i]) * (pos - i)


def _span_floor(unit: Unit) -> float:
    return SPAN_FLOOR["s"] if unit.seconds else SPAN_FLOOR.get(unit.suffix, 0.0)


def robust_range(per_series: Sequence[Sequence[float]], latest: Sequence[float], unit: Unit) -> tuple[float, float]:
    """The range (stored units) a compare chart scales to: each series' bulk and the fence around it
    (so one engine's level never makes the other's an outlier), ``latest`` (each engine's newest
    column) always inside, at least +-10% of its level (or the unit's floor) wide."""
    kept = list(latest)
    everything: list[float] = []
    for values in per_series:
        if not values:
            continue
        ordered = sorted(values)
        everything.extend(ordered)
        q_lo, q_hi = _quantile(ordered, BULK[0]), _quantile(ordered, BULK[1])
        min_span = max(2 * MIN_HALF_SPAN * abs(_quantile(ordered, 0.5)), _span_floor(unit))
        reach = FENCE * max(q_hi - q_lo, min_span)
        kept.extend(v for v in ordered if q_lo - reach <= v <= q_hi + reach)
    lo, hi = min(kept), max(kept)
    min_span = max(2 * MIN_HALF_SPAN * abs(_quantile(sorted(everything), 0.5)), _span_floor(unit))
    if hi - lo < min_span:
        mid = lo / 2 + hi / 2
        lo, hi = mid - min_span / 2, mid + min_span / 2
        if min(everything) >= 0 and lo < 0:  # a non-negative series keeps a non-negative axis
            lo, hi = 0.0, min_span
    return lo, hi


def _connected_runs(levels: Sequence[int | None]) -> list[tuple[int, int, int] | None]:
    """Per column: its level, and the levels halfway to the previous column's and to the next's
    (rounded toward its own: the neighbour draws the rest), so successive columns join up."""
    out: list[tuple[int, int, int] | None] = []
    for x, v in enumerate(levels):
        if v is None:
            out.append(None)
            continue
        prev = levels[x - 1] if x > 0 else None
        nxt = levels[x + 1] if x + 1 < len(levels) else None
        out.append((v, _halfway(v, prev), _halfway(v, nxt)))
    return out


def _halfway(v: int, other: int | None) -> int:
    if other is None:
        return v
    return math.floor((other + v) / 2) if other > v else math.ceil((other + v) / 2)


def _level(frac: float, levels: int) -> int:
    return min(levels - 1, max(0, int(frac * levels)))


def draw_pair(title: str, series: Sequence[Series], unit: Unit, better: Better, *, end: float, window: float,
              width: int, height: int) -> PairDrawn:
    """The compare chart of two series (the first engine's, the second's) in ``width`` x ``height``
    cells."""
    a, b = series[0], series[1]
    width = max(8, width)
    wlabel = window_label(window)
    names = (a.name, b.name)
    nows = (newest(a.rows), newest(b.rows))
    # The header: title and legend on one line when both names fit whole, else the legend below it.
    seen = (has_data(a.rows), has_data(b.rows))
    legend_one = legend(names, nows, seen, unit, width - len(title) - len(wlabel) - 5, whole=True)
    header: list[list[Segment]]
    if legend_one:
        header = [[(f"{title} · {wlabel}", "bold"), ("  ", ""), *legend_one]]
    else:
        header = [[(_fit(f"{title} · {wlabel}", width), "bold")],
                  legend(names, nows, seen, unit, width)]
    plot_h = height - len(header) - 2  # the axis and the verdict
    with_axis = plot_h >= 4  # a short chart gives its time axis to the plot (the title names the window)
    if not with_axis:
        plot_h += 1
    plot_h = max(1, plot_h)

    # The y labels' width depends on the scale, the plot's width on the labels, the scale on the
    # columns at that width: a first guess at the labels' width, then the scale of the plot's columns.
    guess_w = max(1, width - 9)
    scale, suffix, factor = _scale([columns(s.rows, end, window, guess_w) for s in (a, b)], unit, plot_h)
    lab_w = _labels_width(scale, suffix, plot_h)
    plot_w = max(1, width - lab_w - 1)
    cols = [columns(s.rows, end, window, plot_w) for s in (a, b)]
    scale, suffix, factor = _scale(cols, unit, plot_h)
    if _labels_width(scale, suffix, plot_h) > lab_w:  # rare: a wider label; the columns follow it
        lab_w = _labels_width(scale, suffix, plot_h)
        plot_w = max(1, width - lab_w - 1)
        cols = [columns(s.rows, end, window, plot_w) for s in (a, b)]
    shown_unit = Unit(suffix)
    ticks = scale.ticks if plot_h >= 3 else (scale.lo, scale.hi)
    tick_labels = {t: label(t, shown_unit, step=scale.step) for t in ticks}
    span = scale.hi - scale.lo if scale.hi > scale.lo else 1.0

    def frac(v: float) -> float:
        return (v * factor - scale.lo) / span

    means = [[None if c is None else c[2] for c in s_cols] for s_cols in cols]
    highs = [[None if c is None else c[1] for c in s_cols] for s_cols in cols]
    lows = [[None if c is None else c[0] for c in s_cols] for s_cols in cols]
    half_bits = [[0] * plot_w for _ in range(plot_h)]
    dot_bits = [[0] * plot_w for _ in range(plot_h)]
    clip_marks: dict[tuple[int, int], Segment] = {}  # (row, column) -> its arrow
    clips: list[tuple[str, int, str]] = []  # (arrow, series, "max 400 ms")
    for k, vals in enumerate(means):
        sub = _HALVES if k == 0 else _DOT_ROWS
        levels = [None if v is None else _level(frac(v), plot_h * sub) for v in vals]
        # What the clipped columns reached (a column's max or min: its mean is what the line follows).
        over = [hi for v, hi in zip(vals, highs[k], strict=True) if v is not None and hi is not None
                and frac(v) > 1.0 + _EDGE]
        under = [lo for v, lo in zip(vals, lows[k], strict=True) if v is not None and lo is not None
                 and frac(v) < -_EDGE]
        for x, v in enumerate(vals):
            if v is not None and frac(v) > 1.0 + _EDGE:
                clip_marks[(plot_h - 1, x)] = (CLIP_UP, "bold " + SERIES_STYLES[k])
            elif v is not None and frac(v) < -_EDGE:
                clip_marks[(0, x)] = (CLIP_DOWN, "bold " + SERIES_STYLES[k])
        if over:
            clips.append((CLIP_UP, k, f"max {label(max(over), unit)}"))
        if under:
            clips.append((CLIP_DOWN, k, f"min {label(min(under), unit)}"))
        for x, run in enumerate(_connected_runs(levels)):
            if run is None:
                continue
            v, to_prev, to_next = run
            if k == 0:  # half blocks: the whole run in the column
                for lv in range(min(v, to_prev, to_next), max(v, to_prev, to_next) + 1):
                    half_bits[lv // sub][x] |= 1 << (lv % sub)
            else:  # braille: the run to the previous column in the left dots, to the next in the right
                for dot_col, toward in ((0, to_prev), (1, to_next)):
                    for lv in range(min(v, toward), max(v, toward) + 1):
                        dot_bits[lv // sub][x] |= _DOTS[dot_col][lv % sub]

    row_label: dict[int, str] = {}
    for t in ticks:
        r = round((t - scale.lo) / span * (plot_h - 1)) if plot_h > 1 else 0
        row_label.setdefault(r, tick_labels[t])
    lines: list[list[Segment]] = list(header)
    for r in range(plot_h - 1, -1, -1):
        lab = row_label.get(r)
        line: list[Segment] = [((lab.rjust(lab_w) + "┤") if lab is not None else " " * lab_w + "│", "")]
        for x in range(plot_w):
            cell: Segment
            if (r, x) in clip_marks:
                cell = clip_marks[(r, x)]
            elif half_bits[r][x] and dot_bits[r][x]:
                cell = (BOTH_GLYPH, BOTH_STYLE)
            elif half_bits[r][x]:
                cell = (_HALF[half_bits[r][x]], SERIES_STYLES[0])
            elif dot_bits[r][x]:
                cell = (chr(0x2800 + dot_bits[r][x]), SERIES_STYLES[1])
            else:
                cell = (" ", "")
            if line[-1][1] == cell[1]:
                line[-1] = (line[-1][0] + cell[0], cell[1])
            else:
                line.append(cell)
        lines.append(line)
    if with_axis:
        lines.append([(" " * lab_w + "└" + time_axis(plot_w, window)[:plot_w], "dim")])
    verdict = compare_verdict(title, names, cols, unit, better, wlabel)
    notes = _clip_notes(clips, names, with_names=True)
    if len(header) == 2 and notes:  # the title line has room beside it: the notes go there
        room = width - _length(lines[0])
        fitting = notes if _length(notes) <= room else _clip_notes(clips, names, with_names=False)
        if _length(fitting) <= room:
            lines[0] = [*lines[0], *fitting]
            notes = []
    lines.append(_verdict_line(verdict, names, notes, width))
    return PairDrawn(lines, verdict, tuple(f"{arrow} {names[k]} {what}" for arrow, k, what in clips))


def _length(segments: Sequence[Segment]) -> int:
    return sum(len(t) for t, _ in segments)


def _clip_notes(clips: Sequence[tuple[str, int, str]], names: tuple[str, str], *, with_names: bool
                ) -> list[Segment]:
    """Each clipped series as "  ↑ vllm-sim max 400 ms": its arrow in its colour, its name (unless not
    ``with_names``: the arrow's colour tells) and its extreme."""
    out: list[Segment] = []
    for arrow, k, what in clips:
        out.append(("  ", ""))
        out.append((arrow, "bold " + SERIES_STYLES[k]))
        out.append((f" {names[k]} {what}" if with_names else f" {what}", "dim"))
    return out


def _labels_width(scale: Scale, suffix: str, plot_h: int) -> int:
    ticks = scale.ticks if plot_h >= 3 else (scale.lo, scale.hi)
    return max(len(label(t, Unit(suffix), step=scale.step)) for t in ticks)


def _scale(cols: Sequence[Sequence[tuple[float, float, float] | None]], unit: Unit, plot_h: int
           ) -> tuple[Scale, str, float]:
    """The chart's scale in shown units, with the unit's suffix and factor."""
    per_series = [[c[2] for c in s if c is not None] for s in cols]
    values = [v for s in per_series for v in s]
    latest = [next((c[2] for c in reversed(s) if c is not None), None) for s in cols]
    if unit.lo is not None and unit.hi is not None:  # a fraction of a capacity: its whole range
        lo, hi = unit.lo, unit.hi
        s = nice_scale(lo, hi)
        return Scale(lo, hi, s.ticks if s.hi == hi else (lo, hi / 2, hi), s.step), unit.suffix, unit.factor
    if not values:
        suffix, factor = _display(unit, 0.0)
        return nice_scale(0.0, 1.0), suffix, factor
    lo, hi = robust_range(per_series, [v for v in latest if v is not None], unit)
    suffix, factor = _display(unit, max(abs(lo), abs(hi)))
    return _tightest(lo * factor, hi * factor, plot_h), suffix, factor


def _tightest(lo: float, hi: float, plot_h: int) -> Scale:
    """Of the nice scales over ``lo``..``hi`` (2 to 5 steps), the one that wastes the least height,
    among those whose ticks are all on a step (a round number) and each have a row."""
    best: Scale | None = None
    for intervals in (2, 3, 4, 5):
        s = nice_scale(lo, hi, intervals=intervals)
        # Past 3 steps nice_scale labels the ends and the middle: the middle on a step too.
        on_step = s.step > 0 and all(abs(t / s.step - round(t / s.step)) < 1e-6 for t in s.ticks)
        if not on_step or len(s.ticks) > max(2, plot_h):
            continue
        if best is None or s.hi - s.lo < best.hi - best.lo - 1e-12:
            best = s
    return best if best is not None else nice_scale(lo, hi)


def newest(rows: Sequence[tuple[float, float, float, float]]) -> float | None:
    """The latest value, None when the latest row is a gap or there is none."""
    if not rows:
        return None
    v = rows[-1][3]
    return None if v != v else v


def has_data(rows: Sequence[tuple[float, float, float, float]]) -> bool:
    """Whether any row holds a value (not only gaps): its legend then says "--" for a gap now, else n/a."""
    return any(r[3] == r[3] for r in rows)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _value(v: float | None, seen: bool, unit: Unit) -> str:
    return label(v, unit) if v is not None else ("--" if seen else "n/a")


def legend(names: tuple[str, str], nows: tuple[float | None, float | None], seen: tuple[bool, bool], unit: Unit,
           room: int, *, whole: bool = False) -> list[Segment]:
    """Both engines with their glyph and current value in ``room`` cells; names cut in their middle
    (longest first) when they do not fit, unless ``whole`` (then none: an empty list)."""
    values = [_value(v, s, unit) for v, s in zip(nows, seen, strict=True)]
    fixed = sum(2 + 1 + len(v) for v in values)  # "▀ " and " value", twice
    gap = "  " if fixed + 2 + len(names[0]) + len(names[1]) <= room else " "
    cut = list(names)
    while fixed + len(gap) + len(cut[0]) + len(cut[1]) > room:
        if whole:
            return []
        k = 0 if len(cut[0]) >= len(cut[1]) else 1
        if len(cut[k]) <= MIN_NAME:
            break
        cut[k] = fmt.fit_name(names[k], len(cut[k]) - 1)
    out: list[Segment] = []
    for k in (0, 1):
        if k:
            out.append((gap, ""))
        out.append((LEGEND_GLYPHS[k] + " ", SERIES_STYLES[k]))
        out.append((f"{cut[k]} {values[k]}", ""))
    return out


def _median(values: Sequence[float]) -> float:
    return _quantile(sorted(values), 0.5)


def compare_verdict(title: str, names: tuple[str, str], cols: Sequence[Sequence[tuple[float, float, float] | None]],
                    unit: Unit, better: Better, wlabel: str) -> Verdict:
    """The second engine against the first: medians of their column means over the columns both have
    data in (each one's own columns when they share none)."""
    a_cols, b_cols = cols[0], cols[1]
    a_all = [c[2] for c in a_cols if c is not None]
    b_all = [c[2] for c in b_cols if c is not None]
    over = f" over {wlabel}"
    if not a_all and not b_all:
        return Verdict("", NO_VERDICT_STYLES, (f"no data from either engine{over}",))
    if not a_all or not b_all:
        only = "{a}" if a_all else "{b}"
        return Verdict("", NO_VERDICT_STYLES, (f"only {only} has {title} data{over}", f"only {only} has data"))
    both = [(x[2], y[2]) for x, y in zip(a_cols, b_cols, strict=True) if x is not None and y is not None]
    a_med = _median([p for p, _ in both]) if both else _median(a_all)
    b_med = _median([q for _, q in both]) if both else _median(b_all)
    if unit == FRACTION_PCT:  # a fraction of a capacity: the difference in points of it
        diff = (b_med - a_med) * unit.factor
        same, times = abs(diff) < SAME_POINTS, False
        amount = f"{abs(diff):.0f} pts"
    elif abs(b_med - a_med) < _span_floor(unit) * SAME_OF_FLOOR:  # 0.05 waiting against 0: nothing waits
        same, times, amount = True, False, ""
    elif a_med == 0.0:
        same, times = False, False
        amount = label(abs(b_med), unit)
    else:
        rel = (b_med - a_med) / abs(a_med)
        same = abs(rel) < SAME_BAND
        ratio = b_med / a_med
        times = ratio >= 2  # "2.5x vllm-sim": a percentage past 100 reads badly
        amount = f"{ratio:.1f}x" if times else f"{abs(rel) * 100:.0f}%"
    if same:
        return Verdict("=", SAME_STYLES, (f"{{b}} {title} about the same as {{a}}{over} (within "
                                         f"{SAME_POINTS:.0f} pts)" if unit == FRACTION_PCT else
                                         f"{{b}} {title} about the same as {{a}}{over} (within {SAME_BAND:.0%})",
                                         f"{{b}} {title} about the same as {{a}}{over}",
                                         "{b} about the same as {a}", "{b} about the same"))
    higher = b_med > a_med
    direction = "higher" if higher else "lower"
    compared = amount if times else f"{amount} {direction} than"
    if better is None:
        mark, styles, judged, rule = "·", NEUTRAL_STYLES, "", ""
    elif (better == "higher") == higher:
        mark, styles, judged, rule = "▲", BETTER_STYLES, ", better", f" ({better} is better)"
    else:
        mark, styles, judged, rule = "▼", WORSE_STYLES, ", worse", f" ({better} is better)"
    return Verdict(mark, styles, (f"{{b}} {title} {compared} {{a}}{over}{judged}{rule}",
                                 f"{{b}} {title} {compared} {{a}}{over}{judged}",
                                 f"{{b}} {compared} {{a}}{judged}", f"{{b}} {amount} {direction}{judged}"))


def _verdict_line(verdict: Verdict, names: tuple[str, str], notes: list[Segment], width: int) -> list[Segment]:
    """The verdict in ``width`` cells: its longest form that fits with the clip notes, then without
    them, then its shortest with the names cut in their middle."""
    mark = verdict.mark + " " if verdict.mark else ""
    for with_notes in ((notes, []) if notes else ([],)):
        for form in verdict.forms:
            text = mark + form.format(a=names[0], b=names[1])
            if len(text) + _length(with_notes) <= width:
                return [*_verdict_segments(mark, text[len(mark):], verdict.styles), *with_notes]
    form = verdict.forms[-1]
    room = width - len(mark) - len(form.format(a="", b=""))
    cut = [fmt.fit_name(n, max(MIN_NAME, room // max(1, form.count("{")))) for n in names]
    return _verdict_segments(mark, _fit(form.format(a=cut[0], b=cut[1]), width - len(mark)), verdict.styles)


def _verdict_segments(mark: str, text: str, styles: tuple[str, str]) -> list[Segment]:
    return [(mark, styles[0]), (text, styles[1])] if mark else [(text, styles[1])]
