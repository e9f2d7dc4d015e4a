"""Charts a person reads at a glance: axes in the unit, a time axis, a visible 5% wobble, spikes kept
at the hour window, gaps, extremes, and the A/B compare view one key away from the overview."""

from __future__ import annotations

import math
from typing import Any

import pytest
from textual.app import App, ComposeResult

from console.telemetry.metrics.history import History
from console.ui.screens.compare import CompareScreen
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.pairplot import LEGEND_GLYPHS
from console.ui.widgets.plot import FRACTION_PCT, SECONDS, TOKENS_PER_S, Series, draw, nice_scale
from console.ui.widgets.timechart import TimeChart
from tests.ui.conftest import AppFactory

T_END = 10_000.0


def _rows(values: list[float], end: float = T_END) -> list[tuple[float, float, float, float]]:
    n = len(values)
    return [(end - (n - 1 - i), v, v, v) for i, v in enumerate(values)]


class _Charts(App[None]):
    def compose(self) -> ComposeResult:
        yield TimeChart("TTFT p99", SECONDS, id="moving")
        yield TimeChart("TTFT p99", SECONDS, id="flat")

    CSS = "TimeChart { height: 10; }"


async def test_a_5_percent_wobble_around_70_ms_is_drawn_with_axes_and_window() -> None:
    moving = [0.070 * (1 + 0.05 * math.sin(i / 10)) for i in range(300)]
    flat = [0.070] * 300
    app = _Charts()
    async with app.run_test(size=(80, 24)) as pilot:
        m, f = app.query_one("#moving", TimeChart), app.query_one("#flat", TimeChart)
        m.set_data([Series("p99", _rows(moving))], end=T_END, window=300.0)
        f.set_data([Series("p99", _rows(flat))], end=T_END, window=300.0)
        await pilot.pause()
        m_lines, f_lines = m.render().plain.splitlines(), f.render().plain.splitlines()
    assert len(m_lines) == 10
    # The plot rows (between the title and the time axis) differ: the wobble is visible.
    m_plot, f_plot = m_lines[1:-1], f_lines[1:-1]
    assert m_plot != f_plot
    # Not a solid block: the moving chart's rows hold different glyphs across the width.
    assert len({line[-60:] for line in m_plot}) > 2
    labels = [line.split("┤")[0].strip() for line in m_plot if "┤" in line]
    assert 2 <= len(labels) <= 4 and all(lab.endswith(" ms") for lab in labels)
    # The lower bound shows, near the data (not 0): a "nice" range around 70 ms.
    assert float(labels[-1].removesuffix(" ms")) > 50
    assert m_lines[-1].strip().startswith("└-5m") and m_lines[-1].rstrip().endswith("now")
    assert "· 5m" in m_lines[0]


async def test_a_5_s_spike_stays_visible_at_the_1_hour_window() -> None:
    """An hour of simulated-time history at 1 s (ring of 400 points): the spike lives only in the
    5 s summaries, and the hour chart still reaches it."""
    h = History(capacity=400)
    for s in range(3600):
        h.append(("e", "ttft_p99"), T_END - 3599 + s, 0.200 if 1800 <= s < 1805 else 0.070)
    rows = h.window(("e", "ttft_p99"), T_END, 3600.0)
    with_spike = draw("TTFT p99", [Series("p99", rows)], SECONDS, end=T_END, window=3600.0, width=70, height=10)
    flat_rows = [(t, 0.07, 0.07, 0.07) for t, *_ in rows]
    flat = draw("TTFT p99", [Series("p99", flat_rows)], SECONDS, end=T_END, window=3600.0, width=70, height=10)
    assert any("max 200 ms" in text for text, _ in with_spike.legend)
    top_row = with_spike.rows[0][with_spike.axis.index("└") + 1:]  # the plot, after the y labels
    spike_cols = [x for x, ch in enumerate(top_row) if ch != " "]
    # The spike reaches the top row in a column or two, near the middle of the hour; nothing else does.
    assert spike_cols and len(spike_cols) <= 2
    assert abs(spike_cols[0] - len(top_row) / 2) <= 2
    assert with_spike.axis.strip().startswith("└-1h") and "· 1h" in with_spike.title
    assert flat.rows != with_spike.rows


def test_gaps_are_blank_and_bounded_scales_fixed() -> None:
    values = [0.5] * 100 + [math.nan] * 100 + [0.5] * 100
    d = draw("KV cache", [Series("kv", _rows(values))], FRACTION_PCT, end=T_END, window=300.0, width=62, height=6)
    labels = [line.split("┤")[0].strip() for line in d.rows if "┤" in line]
    assert labels[0] == "100%" and labels[-1] == "0%"
    bottom = d.rows[-1][d.axis.index("└") + 1:]
    third = len(bottom) // 3
    assert bottom[third + 3: 2 * third - 3].strip() == ""  # the gap: blank, not a flat line
    assert bottom[:third - 1].strip() and bottom[-third + 1:].strip()


@pytest.mark.parametrize("extreme", [1e308, -1e308, 1e-308, float(2**63), -float(2**63)])
def test_finite_extremes_never_crash(extreme: float) -> None:
    values = [extreme] * 30 + [0.0, 1.0, extreme]
    for unit in (SECONDS, FRACTION_PCT, TOKENS_PER_S):
        for series in ([Series("a", _rows(values))], [Series("a", _rows(values)), Series("b", _rows([0.0] * 5))]):
            d = draw("x", series, unit, end=T_END, window=60.0, width=40, height=6)
            assert len(d.rows) == 4 and all(len(r) == 40 for r in d.rows)
    s = nice_scale(-1e308, 1e308)
    assert math.isfinite(s.lo) and math.isfinite(s.hi) and s.lo < s.hi


async def test_extremes_render_in_a_chart_widget() -> None:
    app = _Charts()
    async with app.run_test(size=(80, 24)) as pilot:
        c = app.query_one("#moving", TimeChart)
        for v in (1e308, -1e308, 1e-308, float(2**63)):
            c.set_data([Series("a", _rows([v, 1.0, v]))], end=T_END, window=60.0)
            await pilot.pause()
            assert "┤" in c.render().plain


async def _overview(pilot: Any) -> None:
    await pilot.pause()
    await pilot.pause()


async def test_compare_is_one_key_from_the_overview_and_overlays_both_engines(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _overview(pilot)
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("c")
        await _overview(pilot)
        assert isinstance(app.screen, CompareScreen)
        a, b = app.screen.engines
        assert a != b
        chart = app.screen.query_one("#cmp-ttft_p99", TimeChart)
        text = chart.render().plain
        head = text.splitlines()[0]
        assert a in head and b in head and LEGEND_GLYPHS[0] in head and LEGEND_GLYPHS[1] in head
        plot = "".join(text.splitlines()[1:-2])
        # Both engines drawn on the one chart: half blocks (the first) and braille dots (the second).
        assert any(ch in plot for ch in "▄▀█▓") and any(0x2800 < ord(ch) <= 0x28FF or ch == "▓" for ch in plot)


async def test_mark_then_compare_takes_the_marked_and_the_cursor(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _overview(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        first = screen.selected_engine()
        await pilot.press("m", "down", "down")
        third = screen.selected_engine()
        await pilot.press("c")
        await _overview(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert app.screen.engines == (first, third)


async def test_window_key_steps_the_engine_charts(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await _overview(pilot)
        await pilot.press("enter")
        await _overview(pilot)
        chart = app.screen.query_one("#chart-ttft", TimeChart)
        assert "· 5m" in chart.render().plain.splitlines()[0]
        await pilot.press("w")
        await _overview(pilot)
        assert "· 15m" in chart.render().plain.splitlines()[0]
        assert chart.render().plain.splitlines()[-1].strip().startswith("└-15m")
