"""The compare view's chart: two engines' series of one metric on the same axes (console.ui.widgets.pairplot),
with both names, their current values and a verdict. A ``TimeChart`` (the window, explain and grid
sizing are the same); at a terminal 60 columns wide or less, both engines as sparklines on one line."""

from __future__ import annotations

from rich.text import Text

from console.ui.widgets.pairplot import LEGEND_GLYPHS, Better, draw_pair, has_data, legend, newest
from console.ui.widgets.plot import SERIES_STYLES, Unit, label, sparkline, window_label
from console.ui.widgets.timechart import SPARK_CHART_W, SPARK_TERMINAL_W, TimeChart


class PairChart(TimeChart):
    def __init__(self, title: str, unit: Unit, better: Better, *, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(title, unit, id=id, classes=classes)
        self.better = better

    def render(self) -> Text:
        width = max(8, self.size.width)
        height = max(1, self.size.height)
        narrow = (self.app.size.width or width) <= SPARK_TERMINAL_W or width < SPARK_CHART_W
        if narrow or height < 4 or len(self._series) < 2:
            return self._spark(width)
        drawn = draw_pair(self.title, self._series, self.unit, self.better, end=self._end, window=self._window,
                          width=width, height=height)
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, line in enumerate(drawn.lines):
            if i:
                out.append("\n")
            row = Text()
            for text, style in line:
                row.append(text, style=style)
            row.truncate(width, overflow="ellipsis")
            out.append_text(row)
        return out

    def _spark(self, width: int) -> Text:
        """The title, window and legend (both names), then each engine's sparkline with its min and max,
        side by side."""
        head = Text(f"{self.title} · {window_label(self._window)}", style="bold")
        if len(self._series) >= 2:
            a, b = self._series[0], self._series[1]
            shown = legend((a.name, b.name), (newest(a.rows), newest(b.rows)), (has_data(a.rows), has_data(b.rows)),
                           self.unit, width - head.cell_len - 2)
            head.append("  ")
            for text, style in shown:
                head.append(text, style=style)
        head.truncate(width, overflow="ellipsis")
        out = Text(no_wrap=True)
        out.append_text(head)
        if self.size.height < 2 or len(self._series) < 2:
            return out
        out.append("\n")
        half = (width - 1) // 2
        for k, s in enumerate(self._series[:2]):
            if k:
                out.append(" ")
            _, lo, hi = sparkline(s.rows, self._end, self._window, half)
            tail = "" if lo is None or hi is None else f" {label(lo, self.unit)}..{label(hi, self.unit)}"
            glyph = LEGEND_GLYPHS[k]
            line, _, _ = sparkline(s.rows, self._end, self._window, max(2, half - len(tail) - 2))
            piece = Text()
            piece.append(glyph + " ", style=SERIES_STYLES[k])
            piece.append(line, style=SERIES_STYLES[k])
            piece.append(tail, style="dim")
            piece.truncate(half, overflow="ellipsis", pad=True)
            out.append_text(piece)
        return out
