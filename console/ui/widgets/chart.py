"""Text charts from history: a one-line sparkline and a small multi-row block chart.

NaN (no data at that time) is drawn as a gap, never as 0. Rendering is plain string work, cheap
enough to redo every refresh for the few charts on screen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widget import Widget

from console.telemetry.metrics.history import CHART_POINTS

_BLOCKS = " ▁▂▃▄▅▆▇█"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _share(v: float, top: float) -> float:
    """``v / top`` clamped to 0..1. Divided before scaling: ``8 * v`` of a huge finite value is
    inf, and ``round(inf)`` raises."""
    share = v / top
    return 0.0 if share <= 0 else min(1.0, share)  # NaN (inf / inf) compares False: 1.0


def spark(values: Sequence[float], width: int, *, hi: float | None = None) -> str:
    """One-line sparkline of the last ``width`` values, scaled 0..max (or 0..hi)."""
    vals = list(values)[-width:]
    fin = _finite(vals)
    top = hi if hi is not None else (max(fin) if fin else 0.0)
    chars = []
    for v in vals:
        if math.isnan(v):
            chars.append(" ")
        elif top <= 0:
            chars.append("▁")
        else:
            chars.append(_BLOCKS[max(1, round(8 * _share(v, top)))])
    return "".join(chars).rjust(width)


def _block_column(level: int | None, height: int) -> str:
    """One column of a block chart, its top row first: ``level`` eighths of a cell filled from the
    bottom (None: a gap, a dot on the baseline; 0: a zero, the lowest eighth)."""
    if level is None:
        return " " * (height - 1) + "·"
    if level <= 0:
        return " " * (height - 1) + "▁"
    full, part = divmod(min(level, 8 * height), 8)
    tip = _BLOCKS[part] if part else ""
    return " " * (height - full - len(tip)) + tip + "█" * full


def block_chart(values: Sequence[float], width: int, height: int, *, hi: float | None = None) -> list[str]:
    """``height`` rows of eighth-blocks, newest value at the right edge."""
    vals = list(values)[-width:]
    fin = _finite(vals)
    top = hi if hi is not None else (max(fin) if fin else 0.0)
    # Built a column at a time (few distinct levels: each drawn once) and turned into rows by zip, in
    # C: the overview draws 16 of these every second, as tall as the terminal allows.
    drawn: dict[int | None, str] = {}
    columns = []
    for v in vals:
        level: int | None
        if math.isnan(v):
            level = None
        elif top <= 0:
            level = 0
        else:
            level = max(1 if v > 0 else 0, round(8 * height * _share(v, top)))
        column = drawn.get(level)
        if column is None:
            column = drawn[level] = _block_column(level, height)
        columns.append(column)
    if not columns:
        return [" " * width] * height
    return ["".join(row).rjust(width) for row in zip(*columns, strict=True)]


class Chart(Widget):
    """A titled history chart: 'title  now X  max Y' over a block chart filling the widget."""

    DEFAULT_CSS = """
    Chart { height: 4; }
    """

    def __init__(
        self,
        title: str,
        formatter: Callable[[float | None], str],
        *,
        hi: float | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.title = title
        self.formatter = formatter
        self.hi = hi
        self._values: list[float] = []
        self.metric = ""  # explain key, set by the owner

    # Owners pass this many points; render() shows as many as the current width allows.
    POINTS = CHART_POINTS

    def set_values(self, values: list[float]) -> None:
        if values != self._values:
            self._values = values
            self.refresh()

    def render(self) -> Text:
        width = max(4, self.size.width)
        height = max(1, self.size.height - 1)
        vals = self._values[-width:]
        fin = _finite(vals)
        now = None if not vals or math.isnan(vals[-1]) else vals[-1]
        head = Text(self.title, style="bold")
        # A gap after data means "no current value" (stale, stopped, loading), not "n/a".
        seen = bool(fin) or any(not math.isnan(v) for v in self._values)
        head.append(f"  now {'--' if now is None and seen else self.formatter(now)}")
        if fin:
            head.append(f"  max {self.formatter(max(fin))}", style="dim")
        if not vals:
            head.append("  (no history yet)", style="dim")
        head.truncate(width)
        out = Text()
        out.append_text(head)
        for row in block_chart(vals, width, height, hi=self.hi):
            out.append("\n")
            out.append(row, style="cyan")
        return out
