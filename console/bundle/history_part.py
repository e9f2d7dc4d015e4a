"""The console's chart history inside the bundle: ``history.csv``, what every chart of the window
draws (each series' points, and before its oldest point the five-second summaries of the hour the
console keeps), so a bundle made without a recording still shows how the engines, GPUs and host
moved over the window, not only the last snapshot.

One row a point: the series (an engine, ``gpu:N`` or ``host``, and its metric), the time (unix and
UTC), and min, max, mean (all three the value for a point; a summary's for a bucket). An empty value
is a gap: the engine was not live then (stopped, unreachable, starting), as the charts draw it.
"""

from __future__ import annotations

import csv
import io
import math
import time
from dataclasses import dataclass

from console.bundle.window import Window
from console.telemetry.metrics.history import History

FILE = "history.csv"
COLUMNS = ("entity", "metric", "time", "time_utc", "min", "max", "mean")


@dataclass(frozen=True, slots=True)
class HistoryPart:
    text: str
    series: int
    rows: int
    span: tuple[float, float] | None

    def doc(self) -> dict[str, object]:
        return {"path": FILE, "series": self.series, "rows": self.rows,
                "span": [round(t, 3) for t in self.span] if self.span else None,
                "columns": list(COLUMNS), "note": "the console's chart history of the window"}  # fmt: skip

    def note(self) -> str:
        if self.span is None:
            return f"{FILE}: the console held no history in the window"
        return (f"{FILE}: the console's chart history, {self.rows} rows of {self.series} series "
                f"from {_utc(self.span[0])} to {_utc(self.span[1])}")  # fmt: skip


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


def _cell(v: float) -> str:
    return repr(v) if math.isfinite(v) else ""


def history_part(history: History, window: Window) -> HistoryPart:
    """Every series' rows in the window, oldest first, series in name order (reads under the
    history's lock, one series at a time: the hub goes on appending meanwhile)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    series = rows = 0
    first, last = math.inf, -math.inf
    for key in sorted(history.keys(), key=str):
        entity, metric = (key[0], key[1]) if isinstance(key, tuple) and len(key) == 2 else (str(key), "")
        points = [r for r in history.window(key, window.end, window.seconds) if r[0] >= window.start]
        if not points:
            continue
        series += 1
        for t, lo, hi, mean in points:
            w.writerow((entity, metric, f"{t:.3f}", _utc(t), _cell(lo), _cell(hi), _cell(mean)))
        rows += len(points)
        first, last = min(first, points[0][0]), max(last, points[-1][0])
    return HistoryPart(out.getvalue(), series, rows, (first, last) if rows else None)
