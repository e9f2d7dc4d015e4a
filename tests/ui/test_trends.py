"""The overview's trends as text (console/ui/trends.py): time aggregated per column as the detail
charts do, a flat series flat, a step a step, one scale per metric or one per engine, scales and
values with their units, gaps blank, any finite value drawn."""

from __future__ import annotations

import math
import re

import pytest

from console.telemetry.metrics.history import History
from console.ui.trends import (
    TREND_METRICS,
    SeriesColumns,
    TrendMetric,
    Trends,
    as_plain,
    levels,
    plan,
    scale_text,
    trend_scale,
    value_text,
)
from console.ui.widgets.plot import columns

END = 1_700_000_000.0
METRIC = {m.key: m for m in TREND_METRICS}
TTFT99, GEN, KV, WAITING = METRIC["ttft_p99"], METRIC["generation_tps"], METRIC["kv_usage"], METRIC["waiting"]


def _history(series: dict[tuple[str, str], list[float]], end: float = END) -> History:
    """``series``: per key, one value a second up to ``end`` (NaN: a gap)."""
    h = History()
    for key, values in series.items():
        n = len(values)
        for i, v in enumerate(values):
            h.append(key, end - (n - 1 - i), None if v != v else v)
    return h


def _draw(h: History, engines: list[str], *, width: int = 78, height: int = 6, shared: bool = True,
          metrics: tuple[TrendMetric, ...] = (TTFT99,), trends: Trends | None = None) -> tuple[Trends, list[str]]:
    """The trends' lines, and the width of their charts as the first line (for ``_chart``)."""
    t = trends or Trends(metrics)
    t.shared = shared
    drawn = t.draw(h, [(e, e) for e in engines], end=END, width=width, height=height, name_w=10)
    return t, [str(drawn.plan.chart_w), *as_plain(drawn.lines).split("\n")]


def _chart(lines: list[str], engine: str, title: str, row: int = 0) -> str:
    """The chart of ``engine`` (its ``row``-th line) under the header cell that starts with ``title``."""
    header = next(line for line in lines[1:] if title in line)
    x = header.index(title)
    at = next(i for i, line in enumerate(lines) if line.startswith(engine + " "))
    return lines[at + row][x: x + int(lines[0])]


def test_columns_fold_as_the_detail_charts_aggregate() -> None:
    """Point by point, the same min, max and mean per column as ``plot.columns`` over the window."""
    values = [50 + 10 * math.sin(i / 7) for i in range(400)]
    values[100:130] = [math.nan] * 30  # a gap
    rows = [(1000.0 + i, v, v, v) for i, v in enumerate(values)]
    dt, ncols = 20.0, 20
    s = SeriesColumns(dt)
    for row in rows:
        s.add(*row)
    last = math.floor(rows[-1][0] / dt)
    ours = [None if (a := s.cols.get(c)) is None else (a[0], a[1], a[2] / a[3])
            for c in range(last - ncols + 1, last)]
    theirs = columns(rows, (last - 1) * dt, (ncols - 1) * dt, ncols - 1)
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs, strict=True):
        assert (mine is None) == (other is None)
        if mine is not None and other is not None:
            assert mine == pytest.approx(other)
    assert ours.count(None) == 1  # 1100-1120 s: within the gap
    # The newest column, still open: what came in it so far (1380-1399 s).
    assert s.values(last, last, False) == [pytest.approx(sum(values[380:]) / 20)]


def test_a_series_read_point_by_point_draws_as_one_read_at_once() -> None:
    """Caught up a point a refresh, the trend draws what a fresh read of the same history draws."""
    steady = [0.08] * 200 + [0.4] * 160
    h = _history({("a", "ttft_p99"): steady[:300]}, end=END - 60)
    live = Trends((TTFT99,))
    live.draw(h, [("a", "a")], end=END - 60, width=78, height=6, name_w=10)
    for k, v in enumerate(steady[300:]):
        h.append(("a", "ttft_p99"), END - 59 + k, v)
        drawn = live.draw(h, [("a", "a")], end=END - 59 + k, width=78, height=6, name_w=10)
    fresh = Trends((TTFT99,)).draw(h, [("a", "a")], end=END, width=78, height=6, name_w=10)
    assert as_plain(drawn.lines) == as_plain(fresh.lines)


def test_a_flat_series_is_drawn_flat_and_a_1_percent_wobble_too() -> None:
    flat = [0.080] * 360
    wobble = [0.080 * (1 + 0.01 * math.sin(i / 5)) for i in range(360)]
    h = _history({("flat", "ttft_p99"): flat, ("wobble", "ttft_p99"): wobble})
    for shared in (True, False):
        for height in (3, 5):  # a line an engine, and two
            _, lines = _draw(h, ["flat", "wobble"], shared=shared, height=height)
            chart = _chart(lines, "flat", "TTFT p99")
            assert len(set(chart)) == 1 and chart[0] != "█", (shared, height, lines)
            assert "80 ms" in next(line for line in lines if line.startswith("flat")), lines
    # The wobble takes at most one eighth of a cell either way: never the height.
    s = SeriesColumns(300 / 68)
    for i, v in enumerate(wobble):
        s.add(END - 359 + i, v, v, v)
    last = math.floor(END / s.dt)
    drawn = [v for v in s.values(last - 67, last, True) if v is not None]
    for rows in (1, 2):
        lv = [v for v in levels(drawn, trend_scale(min(drawn), max(drawn), TTFT99), rows) if v is not None]
        assert max(lv) - min(lv) <= 1, (rows, lv)


def test_a_step_from_80_to_400_ms_is_a_step() -> None:
    h = _history({("a", "ttft_p99"): [0.080] * 200 + [0.400] * 160, ("b", "ttft_p99"): [0.080] * 360})
    _, lines = _draw(h, ["a", "b"], height=3)
    step = _chart(lines, "a", "TTFT p99")
    assert re.fullmatch(r"▁+[▁-█]?█+", step), step
    assert step.index("█") >= len(step) // 3  # the step happened 160 s ago: in the right half of 5 m
    assert set(_chart(lines, "b", "TTFT p99")) == {"▁"}  # on the shared scale b stays at the bottom
    header = lines[1]
    assert header.startswith("5m shared") and re.search(r"TTFT p99 \d+\.\.4\d0 ms", header), header
    assert lines[2].endswith("400 ms") and lines[3].endswith(" 80 ms"), lines


def test_shared_and_per_engine_scales() -> None:
    h = _history({("small", "generation_tps"): [100.0] * 120, ("big", "generation_tps"): [1000.0] * 120})
    _, shared = _draw(h, ["small", "big"], metrics=(GEN,), height=3)
    assert shared[1].startswith("5m shared") and re.search(r"gen \d+\.\.1\d{3} t/s", shared[1]), shared[1]
    small, big = (_chart(shared, e, "gen").strip() for e in ("small", "big"))
    assert set(small) == {"▁"} and set(big) in ({"█"}, {"▇"}), (small, big)  # 100 t/s low, 1000 high
    _, own = _draw(h, ["small", "big"], metrics=(GEN,), shared=False, height=3)
    assert own[1].startswith("5m own") and re.search(r"gen \(t/s\) *$", own[1])  # no one scale: its unit
    small, big = (_chart(own, e, "gen").strip() for e in ("small", "big"))
    assert set(small) == set(big) and len(set(small)) == 1, (small, big)  # each at the middle of its own
    # Each engine's line names its own scale, in the header's unit.
    assert re.search(r" 100 t/s +\d+\.\.1\d\d$", own[2]) and re.search(r" 1000 t/s +\d+\.\.1\d+$", own[3]), own


def test_scales_and_values_name_their_units() -> None:
    assert scale_text(trend_scale(0.080, 0.400, TTFT99)) == "60..420 ms"
    assert scale_text(trend_scale(1.5, 4.0, TTFT99)).endswith(" s")
    assert scale_text(trend_scale(0.2, 0.6, KV)) == "0..100%"  # a fraction of a capacity: from zero
    gen = trend_scale(800.0, 950.0, GEN)
    assert gen.lo > 0 and scale_text(gen).endswith(" t/s")  # not from zero
    assert scale_text(trend_scale(0.0, 0.0, WAITING)) == "0..2"  # a count: whole ends, one request not a full height
    assert [value_text(v, m) for v, m in ((0.388, TTFT99), (2.5, TTFT99), (812.3, GEN), (0.54, KV), (6.0, WAITING))] \
        == ["388 ms", "2.50 s", "812 t/s", "54%", "6"]
    assert value_text(math.nan, GEN) == "--" and value_text(None, GEN) == "n/a"
    # A +-1% wobble does not fill the scale: it takes at most a tenth of it.
    s = trend_scale(0.0792, 0.0808, TTFT99)
    assert (0.0808 - 0.0792) / (s.hi - s.lo) <= 0.1


def test_gaps_are_blank() -> None:
    values = [0.1] * 360
    values[120:240] = [math.nan] * 120  # two minutes without data (stale, stopped)
    _, lines = _draw(_history({("a", "ttft_p99"): values}), ["a"], height=2)
    chart = _chart(lines, "a", "TTFT p99")
    assert re.fullmatch(r"[▁-█]+ {4,}[▁-█]+", chart), chart


@pytest.mark.parametrize("extreme", [1e308, -1e308, math.inf, -math.inf, 5e-324, 2.0**63])
def test_any_finite_value_or_infinity_draws(extreme: float) -> None:
    values = [1.0, extreme, math.nan, 0.0, extreme] * 72
    h = _history({("a", m.key): values for m in TREND_METRICS})
    t = Trends()
    for shared in (True, False):
        t.shared = shared
        drawn = t.draw(h, [("a", "a")], end=END, width=198, height=30, name_w=10)
        lines = as_plain(drawn.lines).split("\n")
        assert drawn.metrics and all(len(line) <= 198 for line in lines), lines
        assert "nan" not in "".join(lines) and "inf" not in "".join(lines)
    for m in TREND_METRICS:
        assert len(value_text(extreme, m)) <= 12 and scale_text(trend_scale(0.0, extreme, m))


def test_the_window_is_named_and_stepped() -> None:
    h = _history({("a", "ttft_p99"): [0.1] * 360})
    t, lines = _draw(h, ["a"])
    assert lines[1].startswith("5m shared")
    t.step_window(1)
    _, lines = _draw(h, ["a"], trends=t)
    assert lines[1].startswith("15m shared")
    t.step_window(-2)
    _, lines = _draw(h, ["a"], trends=t)
    assert lines[1].startswith("1m shared")


def test_never_taller_than_their_information() -> None:
    # 80 columns, rows for a band: three metrics, a line an engine.
    p = plan(78, 6, 4, 14, 10, True)
    assert (p.engines, p.rows, p.per_band, p.bands) == (4, 1, 3, 1) and p.chart_w >= 10
    # 200x50: 2-row charts and more bands of metrics, never taller charts.
    p = plan(198, 28, 4, 14, 10, True)
    assert p.rows == 2 and p.bands * p.per_band >= 12 and p.bands * (1 + 4 * p.rows) <= 28
    # One engine with 40 rows: every metric, each in 2 rows; the rest of the rows left unused.
    p = plan(158, 40, 1, 14, 10, True)
    assert p.rows == 2 and p.bands * p.per_band >= 14 and p.bands * 3 < 40
    # More engines than rows: a line says how many are not shown.
    p = plan(118, 8, 48, 14, 10, True)
    assert p.engines == 6 and p.more_line and p.rows == 1
