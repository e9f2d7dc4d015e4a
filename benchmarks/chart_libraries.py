"""Chart drawing cost: the console's TimeChart against textual-plot and textual-plotext, in Textual.

    python benchmarks/chart_libraries.py [--updates 40] [--size 200x50]

Each candidate draws what the engine detail screen shows at a 1 s refresh: 9 charts, 3 a row
(two of them with two series, p50 and p99), fed the series of one engine, then updated
``--updates`` times (one new point each, as each refresh adds), each update followed by a full
Textual refresh (``pilot.pause``). Printed: CPU seconds per refresh (the process's own CPU time,
``time.process_time``), for the 5-minute window (300 points a series) and for the 1-hour window
(the rows ``History.window`` gives: 400 points and the 5 s summaries before them; the libraries
get every point of the hour, as they have no per-column min/max of their own). The libraries are
optional: a missing one is reported and skipped (install them in a separate directory on
PYTHONPATH to measure; they are not dependencies of the console).

At 1 Hz, CPU seconds per refresh is also the share of one core the charts take.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.containers import Grid
from textual.widget import Widget

from console.telemetry.metrics.history import History
from console.ui.widgets.plot import SECONDS, Series
from console.ui.widgets.timechart import TimeChart

CHARTS = 9
T0 = 1_700_000_000.0


def series(seconds: int, k: int) -> list[float]:
    return [0.070 * (1 + 0.05 * math.sin((s + 7 * k) / 20)) + (0.1 if s % 900 == 450 else 0.0)
            for s in range(seconds)]


class Bench(App[None]):
    CSS = "Grid { grid-size: 3; grid-rows: 1fr; } Grid > * { height: 1fr; }"

    def __init__(self, make: Callable[[int], Widget]) -> None:
        super().__init__()
        self.make = make

    def compose(self) -> ComposeResult:
        with Grid():
            for k in range(CHARTS):
                yield self.make(k)


def feed_ours(app: Bench, seconds: int, history: History, end: float, window: float) -> None:
    for k, w in enumerate(app.query(TimeChart)):
        rows = history.window(("e", f"m{k}"), end, window)
        w.set_data([Series("p50", rows), Series("p99", rows)] if k < 2 else [Series("v", rows)], end=end,
                   window=window)


def feed_textual_plot(app: Bench, seconds: int, history: History, end: float, window: float) -> None:
    from textual_plot import PlotWidget

    for k, w in enumerate(app.query(PlotWidget)):
        pts = [(t, v) for t, v in history_points(history, k) if t > end - window]
        xs = [t - end for t, _ in pts]
        ys = [v * 1000 for _, v in pts]
        w.clear()
        w.plot(xs, ys, label="p99")
        if k < 2:
            w.plot(xs, [y * 0.5 for y in ys], label="p50")
        w.set_xlimits(-window, 0)
        w.set_ylabel("ms")


def feed_plotext(app: Bench, seconds: int, history: History, end: float, window: float) -> None:
    from textual_plotext import PlotextPlot

    for k, w in enumerate(app.query(PlotextPlot)):
        pts = [(t, v) for t, v in history_points(history, k) if t > end - window]
        plt = w.plt
        plt.clear_data()
        plt.plot([t - end for t, _ in pts], [v * 1000 for _, v in pts], label="p99")
        if k < 2:
            plt.plot([t - end for t, _ in pts], [v * 500 for _, v in pts], label="p50")
        plt.xlim(-window, 0)
        plt.ylabel("ms")
        w.refresh()


_FULL: dict[int, list[tuple[float, float]]] = {}


def history_points(history: History, k: int) -> list[tuple[float, float]]:
    """Every point of series ``k`` (what a library without per-column summaries must be given)."""
    return _FULL[k]


def feed_old(app: Bench, seconds: int, history: History, end: float, window: float) -> None:
    from console.ui.widgets.chart import Chart

    for k, w in enumerate(app.query(Chart)):
        w.set_values(history.values(("e", f"m{k}"), last=Chart.POINTS))


def make_old(k: int) -> Widget:
    """The chart before issue 29: no axes, no window (its last 400 points, one a column)."""
    from console.ui.widgets.chart import Chart

    return Chart(f"chart {k}", lambda v: f"{v}")


def make_ours(k: int) -> Widget:
    return TimeChart(f"chart {k}", SECONDS)


def make_textual_plot(k: int) -> Widget:
    from textual_plot import PlotWidget

    return PlotWidget()


def make_plotext(k: int) -> Widget:
    from textual_plotext import PlotextPlot

    return PlotextPlot()


async def measure(make: Callable[[int], Widget], feed: Callable[..., None], window: float, updates: int,
                  size: tuple[int, int]) -> float:
    seconds = int(window) + updates
    history = History()
    _FULL.clear()
    for k in range(CHARTS):
        vals = series(seconds, k)
        _FULL[k] = [(T0 + s, v) for s, v in enumerate(vals)]
        for s, v in enumerate(vals[: int(window)]):
            history.append(("e", f"m{k}"), T0 + s, v)
    app = Bench(make)
    per: list[float] = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for u in range(updates):
            end = T0 + window + u
            for k in range(CHARTS):
                history.append(("e", f"m{k}"), end, _FULL[k][int(window) + u][1])
            start = time.process_time()
            feed(app, seconds, history, end, window)
            await pilot.pause()
            per.append(time.process_time() - start)
    return statistics.median(per[2:]) if len(per) > 4 else statistics.mean(per)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--size", default="200x50")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    candidates: list[tuple[str, Callable[[int], Widget], Callable[..., None]]] = [
        ("enginedeck TimeChart", make_ours, feed_ours),
        ("old block Chart", make_old, feed_old),
        ("textual-plot 0.10", make_textual_plot, feed_textual_plot),
        ("textual-plotext 1.0", make_plotext, feed_plotext),
    ]
    results: dict[str, dict[str, Any]] = {}
    for name, make, feed in candidates:
        try:
            make(0)
        except ImportError as exc:
            print(f"{name}: not installed ({exc.name}), skipped")
            continue
        row = {}
        for label, window in (("5m", 300.0), ("1h", 3600.0)):
            row[label] = asyncio.run(measure(make, feed, window, a.updates, (w, h)))
        results[name] = row
        print(f"{name:24s} CPU per refresh (9 charts, {a.size}): 5m {1000 * row['5m']:.1f} ms, "
              f"1h {1000 * row['1h']:.1f} ms")
    base = results.get("enginedeck TimeChart")
    if base:
        for name, row in results.items():
            print(f"{name:24s} ratio to TimeChart: 5m {row['5m'] / base['5m']:.2f}x, 1h {row['1h'] / base['1h']:.2f}x")


if __name__ == "__main__":
    main()
