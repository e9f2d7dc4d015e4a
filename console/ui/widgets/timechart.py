"""A time-series chart widget: axes, units, a time window, one series or two overlaid (console.ui.widgets.plot).

At a terminal 60 columns wide or less (or a chart under 30) it draws a sparkline with its min and max.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.containers import Grid, VerticalScroll
from textual.widget import Widget

from console.ui import format as fmt
from console.ui.widgets.plot import DEFAULT_WINDOW, Series, Unit, draw, label, sparkline, window_label

SPARK_TERMINAL_W = 60  # at or below this terminal width, charts are sparklines
SPARK_CHART_W = 30
CHART_MIN_H = 6  # a chart's lowest height in a grid: title, 4 plot rows (3 y labels), time axis
SPARK_H = 2  # a sparkline chart's lines: its title, the sparkline with its min and max


def fit_grid_rows(grid: Grid, scroll: VerticalScroll, shown: int) -> None:
    """Size ``grid``'s rows so its ``shown`` charts share the height ``scroll`` gives them (they grow
    with the terminal), never lower than CHART_MIN_H: below that, they scroll. At SPARK_TERMINAL_W
    columns or less the charts are sparklines: one a row, the whole width, a blank line between them
    where the height allows."""
    avail = scroll.size.height or (grid.app.size.height - 8)
    # Called on mount, resize and when a chart appears: rare enough to set without comparing.
    if grid.app.size.width <= SPARK_TERMINAL_W:
        grid.styles.grid_size_columns = 1
        per_chart = SPARK_H + 1 if avail >= (SPARK_H + 1) * shown else SPARK_H
        grid.styles.grid_rows = str(per_chart)
        grid.styles.height = per_chart * max(1, shown)
        return
    grid.styles.grid_size_columns = None  # the layout's own (tcss): 2, or 3 when wide
    per_row = grid.styles.grid_size_columns or 2
    rows = max(1, -(-shown // per_row))
    if avail // rows >= CHART_MIN_H:  # the rows share all of it (no blank band below them)
        grid.styles.grid_rows = "1fr"
        grid.styles.height = avail
    else:
        grid.styles.grid_rows = str(CHART_MIN_H)
        grid.styles.height = CHART_MIN_H * rows


class TimeChart(Widget):
    DEFAULT_CSS = """
    TimeChart { height: 6; }
    """

    def __init__(self, title: str, unit: Unit, *, use_max: bool = False, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.unit = unit
        self.use_max = use_max
        self.metric = ""  # explain key, set by the owner
        self._series: tuple[Series, ...] = ()
        self._end = 0.0
        self._window = DEFAULT_WINDOW
        self._top: float | None = None

    def set_data(self, series: Sequence[Series], *, end: float, window: float, unit: Unit | None = None,
                 top: float | None = None) -> None:
        """Show ``series`` over the ``window`` seconds up to ``end``; ``unit``/``top`` change the scale (the
        selected GPU's memory size, its power limit)."""
        # A series' name is an engine's (compare's legend): inert before the legend is measured.
        series = [s if s.name == fmt.shown(s.name) else Series(fmt.shown(s.name), s.rows) for s in series]
        new = (tuple(series), end, window, unit or self.unit, top)
        if new != (self._series, self._end, self._window, self.unit, self._top):
            self._series, self._end, self._window, self.unit, self._top = new
            self.refresh()

    @property
    def window(self) -> float:
        return self._window

    def render(self) -> Text:
        width = max(8, self.size.width)
        height = max(1, self.size.height)
        narrow = (self.app.size.width or width) <= SPARK_TERMINAL_W or width < SPARK_CHART_W
        if narrow or height < 4:
            return self._spark(width)
        d = draw(self.title, self._series, self.unit, end=self._end, window=self._window, width=width,
                 height=height, top=self._top, use_max=self.use_max)
        head = Text(d.title, style="bold")
        legend = d.legend
        if len(d.title) + sum(len(t) for t, _ in legend) > width and len(self._series) > 1:
            # Too long with the names: glyphs and values only (the screen's header names the glyphs).
            legend = [(t, st) if st else (t.removeprefix(s.name + " "), st)
                      for (t, st), s in zip(legend, [x for x in self._series for _ in (0, 1)], strict=False)]
        for text, style in legend:
            head.append(text, style=style)
        head.truncate(width, overflow="ellipsis")
        out = Text(no_wrap=True)
        out.append_text(head)
        for row, spans in zip(d.rows, d.styles, strict=True):
            line = Text(row)
            for a, b, style in spans:
                line.stylize(style, a, b)
            out.append("\n")
            out.append_text(line)
        out.append("\n")
        out.append(d.axis, style="dim")
        return out

    def _spark(self, width: int) -> Text:
        """Title, window and last value; then the first series as a sparkline with its min and max."""
        rows = self._series[0].rows if self._series else []
        last = rows[-1][3] if rows else float("nan")
        head = Text(f"{self.title} · {window_label(self._window)}", style="bold")
        head.append(f"  now {label(last, self.unit)}")
        head.truncate(width, overflow="ellipsis")
        out = Text(no_wrap=True)
        out.append_text(head)
        if self.size.height >= 2:
            _, lo, hi = sparkline(rows, self._end, self._window, width)
            tail = "" if lo is None or hi is None else f" {label(lo, self.unit)}..{label(hi, self.unit)}"
            line, _, _ = sparkline(rows, self._end, self._window, max(4, width - len(tail)))
            out.append("\n")
            out.append(line, style="cyan")
            out.append(tail, style="dim")
        return out
