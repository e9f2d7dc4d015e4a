"""The A/B compare view read at a glance (issue 38): two connected lines told apart by glyph as well as
colour, both engine names in every legend at 80 columns, a y-range that a 1 ms wobble does not fill
and one spike does not set (the spike marked), a verdict per chart that says which way is better,
and ``c`` passing over an engine without the compared metrics."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from console.model import FleetSnapshot
from console.telemetry.metrics.history import History
from console.telemetry.source import ENGINE_SERIES
from console.ui.screens.compare import COMPARE_CHARTS, CompareScreen, compare_target
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.pairchart import PairChart
from console.ui.widgets.pairplot import BOTH_GLYPH, CLIP_UP, Better, PairDrawn, draw_pair, robust_range
from console.ui.widgets.plot import COUNT, FRACTION_PCT, SECONDS, SERIES_STYLES, TOKENS_PER_S, Series, Unit
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet

T_END = 10_000.0
HALF_BLOCKS = "▀▄█"


def _rows(values: list[float], end: float = T_END) -> list[tuple[float, float, float, float]]:
    n = len(values)
    return [(end - (n - 1 - i), v, v, v) for i, v in enumerate(values)]


def _wobble(level: float, n: int = 300, amplitude: float = 0.02) -> list[float]:
    return [level * (1 + amplitude * math.sin(i / 7.0)) for i in range(n)]


def _plot_rows(d: PairDrawn, with_axis: bool = True) -> list[str]:
    """The plot rows of a drawn chart without their y labels (after the axis' "┤" or "│")."""
    body = d.plain[d.plain.index(next(x for x in d.plain if "┤" in x)):]
    body = body[:-2] if with_axis else body[:-1]
    return [row[max(row.find("┤"), row.find("│")) + 1:] for row in body]


def _cells(rows: list[str], glyphs: str) -> list[set[int]]:
    """Per column, the rows (0 = top) holding one of ``glyphs``."""
    width = max(len(r) for r in rows)
    return [{y for y, r in enumerate(rows) if x < len(r) and r[x] in glyphs} for x in range(width)]


def _is_braille(ch: str) -> bool:
    return 0x2801 <= ord(ch) <= 0x28FF


def _draw(a: list[float], b: list[float], unit: Unit = SECONDS, better: Better = "lower", *, width: int = 60,
          height: int = 14, title: str = "TTFT p99") -> PairDrawn:
    return draw_pair(title, [Series("vllm-sim", _rows(a)), Series("sglang-sim", _rows(b))], unit, better,
                     end=T_END, window=300.0, width=width, height=height)


def test_a_step_is_one_connected_line_and_the_second_engine_another_glyph() -> None:
    step = [0.050] * 150 + [0.080] * 150
    d = _draw(step, [0.065] * 300)
    rows = _plot_rows(d)
    first = _cells(rows, HALF_BLOCKS + BOTH_GLYPH)
    drawn = [x for x, ys in enumerate(first) if ys]
    assert len(drawn) >= len(rows[0]) - 1  # a line across the whole window
    for x in drawn:  # each column's cells are one vertical run ...
        assert max(first[x]) - min(first[x]) + 1 == len(first[x]), (x, first[x], "\n".join(rows))
    for x, y in itertools.pairwise(drawn):  # ... that touches the next column's
        assert min(first[y]) <= max(first[x]) + 1 and min(first[x]) <= max(first[y]) + 1, "\n".join(rows)
    # The step joins its two levels: some column's run spans rows, the low level to the high one.
    assert any(len(ys) >= 2 for ys in first), "\n".join(rows)
    # The second engine: braille only, its own rows; the first: half blocks only.
    second = [ch for r in rows for ch in r if _is_braille(ch)]
    assert second and all(ch in HALF_BLOCKS + BOTH_GLYPH + " " or _is_braille(ch) for r in rows for ch in r)
    # Each its own colour, no faint style anywhere in the plot.
    styles = {style for line in d.lines[1:-2] for _, style in line}
    assert SERIES_STYLES[0] in styles and SERIES_STYLES[1] in styles
    assert not any("dim" in style for line in d.lines[1:-2] for _, style in line)


def test_two_lines_10_percent_apart_are_drawn_apart() -> None:
    d = _draw(_wobble(0.050), _wobble(0.055), height=7, width=38)
    rows = _plot_rows(d, with_axis=False)
    a_rows = _cells(rows, HALF_BLOCKS)
    b_rows = [{y for y, r in enumerate(rows) if x < len(r) and _is_braille(r[x])} for x in range(len(rows[0]))]
    both = sum(r.count(BOTH_GLYPH) for r in rows)
    apart = sum(1 for ra, rb in zip(a_rows, b_rows, strict=True) if ra and rb and max(ra) > max(rb))
    assert apart >= 0.8 * len(rows[0]) and both <= 0.1 * len(rows[0]), "\n".join(d.plain)


def test_a_1_ms_wobble_on_50_ms_does_not_fill_the_height() -> None:
    lo, hi = robust_range([[0.0495, 0.0505], [0.050]], [0.050], SECONDS)
    assert hi - lo >= 0.2 * 0.050 - 1e-12  # at least +-10% of the level
    d = _draw([0.0495 + 0.001 * (i % 2) for i in range(300)], [0.050] * 300, height=14)
    rows = _plot_rows(d)
    a_rows = set().union(*_cells(rows, HALF_BLOCKS + BOTH_GLYPH))
    assert len(a_rows) <= 3, "\n".join(d.plain)  # of 10 plot rows
    # Near zero, a floor by unit: one waiting request is not the whole height either.
    lo, hi = robust_range([[0.0, 1.0], [0.0]], [0.0], COUNT)
    assert (lo, hi) == (0.0, 4.0)


def test_one_spike_is_clipped_and_marked_and_the_rest_keeps_the_height() -> None:
    a = _wobble(0.050)
    a[100] = 0.400  # a startup-like spike, one second of the five minutes
    d = _draw(a, _wobble(0.055), height=14)
    top_label = d.plain[1].split("┤")[0].strip()
    assert top_label.endswith("ms") and float(top_label.split()[0]) < 100, "\n".join(d.plain)
    rows = _plot_rows(d)
    assert CLIP_UP in rows[0] and all(CLIP_UP not in r for r in rows[1:]), "\n".join(d.plain)
    assert d.clipped == (f"{CLIP_UP} vllm-sim max 400 ms",)
    assert f"{CLIP_UP} vllm-sim max 400 ms" in d.plain[-1]
    # The 50 ms and 55 ms lines are still apart, the first below the second: not squashed into a row.
    a_cells = _cells(rows, HALF_BLOCKS)
    b_cells = [{y for y, r in enumerate(rows) if x < len(r) and _is_braille(r[x])} for x in range(len(rows[0]))]
    below = sum(1 for ra, rb in zip(a_cells, b_cells, strict=True) if ra and rb and min(ra) > max(rb))
    assert below >= 0.8 * len(rows[0]), "\n".join(d.plain)


def test_a_startup_minute_is_clipped_but_a_level_held_two_minutes_is_drawn() -> None:
    startup = [0.380] * 60 + _wobble(0.050, 240)
    d = _draw(startup, _wobble(0.055))
    assert d.clipped == (f"{CLIP_UP} vllm-sim max 380 ms",), "\n".join(d.plain)
    held = [0.080] * 120 + _wobble(0.050, 180)  # two minutes at 80 ms, then 50 ms: a level, not a spike
    d = _draw(held, _wobble(0.055))
    assert d.clipped == () and "80 ms" in d.plain[1], "\n".join(d.plain)


def test_the_axis_is_the_tightest_round_one() -> None:
    # A level held a third of the window up to 760 ms: 0-800 ms (ticks 0, 400, 800), not 0-1000 ms.
    d = _draw([0.760] * 100 + _wobble(0.100, 200), _wobble(0.090), height=23)
    assert d.plain[1].split("┤")[0].strip() == "800 ms" and d.clipped == (), "\n".join(d.plain)


def test_the_newest_value_is_never_clipped() -> None:
    a = _wobble(0.050)
    a[-5:] = [0.400] * 5  # a regression now, not a spike long gone
    d = _draw(a, _wobble(0.055))
    assert d.clipped == () and "400" in d.plain[1].split("┤")[0], "\n".join(d.plain)


def test_verdict_says_how_much_which_way_and_whether_it_is_better() -> None:
    lower = _draw(_wobble(0.100), _wobble(0.077), width=100)
    assert lower.plain[-1] == "▲ sglang-sim TTFT p99 23% lower than vllm-sim over 5m, better (lower is better)"
    assert lower.verdict.styles[0].endswith("green") or lower.verdict.styles[0] == "bold"
    slower = _draw(_wobble(800.0), _wobble(720.0), TOKENS_PER_S, "higher", width=100, title="generation")
    assert slower.plain[-1] == "▼ sglang-sim generation 10% lower than vllm-sim over 5m, worse (higher is better)"
    same = _draw(_wobble(0.050), _wobble(0.051), width=100)
    assert same.plain[-1].startswith("= sglang-sim TTFT p99 about the same as vllm-sim over 5m")
    kv = _draw(_wobble(0.40), _wobble(0.52), FRACTION_PCT, None, width=100, title="KV cache")
    assert kv.plain[-1] == "· sglang-sim KV cache 12 pts higher than vllm-sim over 5m"
    twice = _draw(_wobble(2.0), _wobble(5.0), COUNT, "lower", width=100, title="queue")
    assert twice.plain[-1] == "▼ sglang-sim queue 2.5x vllm-sim over 5m, worse (lower is better)"
    mid = _draw(_wobble(0.100), _wobble(0.077), width=64)  # a chart at 200 columns: better said, the rule left out
    assert mid.plain[-1] == "▲ sglang-sim TTFT p99 23% lower than vllm-sim over 5m, better"
    idle = _draw([0.05] * 300, [0.0] * 300, COUNT, "lower", width=100, title="queue")  # not "100% lower"
    assert idle.plain[-1].startswith("= sglang-sim queue about the same as vllm-sim"), idle.plain[-1]
    only = draw_pair("TTFT p99", [Series("vllm-sim", _rows(_wobble(0.05))), Series("tgi-sim", [])], SECONDS,
                     "lower", end=T_END, window=300.0, width=100, height=10)
    assert only.plain[-1] == "only vllm-sim has TTFT p99 data over 5m"
    assert "tgi-sim n/a" in only.plain[0]
    # Narrow: a shorter form, the names and the direction kept.
    narrow = _draw(_wobble(0.100), _wobble(0.077), width=38)
    assert narrow.plain[-1].startswith("▲ sglang-sim 23% lower") and "better" in narrow.plain[-1]


def test_both_names_and_values_in_a_legend_38_cells_wide() -> None:
    long_a, long_b = "vllm@inference-node-17.example.internal:8000", "sglang@10.255.255.1:30000"
    for a, b in (("vllm-sim", "sglang-sim"), (long_a, long_b)):
        d = draw_pair("generation", [Series(a, _rows(_wobble(800.0))), Series(b, _rows(_wobble(880.0)))],
                      TOKENS_PER_S, "higher", end=T_END, window=300.0, width=38, height=7)
        head = "\n".join(d.plain[:2])
        assert all(len(x) <= 38 for x in d.plain), d.plain
        for name in (a, b):
            assert name in head or ("…" in head and name[-4:] in head), (name, head)
        assert head.count("t/s") == 2, head  # each with its current value and unit


def _history(fleet: FleetSnapshot, factors: dict[str, float], missing: dict[str, set[str]] | None = None,
             seconds: int = 360) -> History:
    """Six minutes at 1 s of every engine series: engine ``name``'s at ``factors[name]`` times a shared
    gentle wave (so two engines 10% apart stay 10% apart); ``missing``: series an engine never exports."""
    h = History()
    for k in range(seconds):
        t = T0 - (seconds - 1 - k)
        wave = 1 + 0.02 * math.sin(k / 11.0)
        for e in fleet.engines:
            for metric in ENGINE_SERIES:
                if metric in (missing or {}).get(e.name, set()):
                    continue
                base = 0.5 if metric in ("kv_usage", "prefix_hit_rate") else 0.05 if "_p" in metric else 100.0
                h.append((e.name, metric), t, base * wave * factors[e.name])
    return h


def _healthy_fleet() -> FleetSnapshot:
    fleet = frozen_fleet()
    return replace(fleet, engines=tuple(replace(e, metrics_freshness=fleet.engines[0].metrics_freshness,
                                                health_freshness=fleet.engines[0].health_freshness,
                                                phase=fleet.engines[0].phase, reachable=True)
                                        for e in fleet.engines))


async def _settle(pilot: object) -> None:
    for _ in range(3):
        await pilot.pause()  # type: ignore[attr-defined]


async def test_pilot_a_compare_chart_of_two_series_10_percent_apart_draws_two_lines_and_both_names(
        make_app: AppFactory) -> None:
    fleet = _healthy_fleet()
    factors = {e.name: 1.1**i for i, e in enumerate(fleet.engines)}
    app = make_app(FrozenSource(fleet, _history(fleet, factors)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await app.show_screen("compare", compare_target("vllm-a", "sglang-b"))
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        head = screen.query_one("#compare-head")
        assert head.size.height == 1 and "vllm-a" in str(head.render()) and "sglang-b" in str(head.render())
        for key, *_ in COMPARE_CHARTS:
            chart = screen.query_one(f"#cmp-{key}", PairChart)
            text = chart.render().plain
            assert "vllm-a" in text and "sglang-b" in text, text  # every chart names both engines
        chart = screen.query_one("#cmp-ttft_p99", PairChart)
        lines = chart.render().plain.splitlines()
        assert lines[-1].startswith("▼ sglang-b") and "10% higher" in lines[-1], lines
        rows = [r[max(r.find("┤"), r.find("│")) + 1:] for r in lines if "┤" in r or "│" in r]
        a_cells, b_cells = _cells(rows, HALF_BLOCKS), [
            {y for y, r in enumerate(rows) if x < len(r) and _is_braille(r[x])} for x in range(len(rows[0]))]
        apart = sum(1 for ra, rb in zip(a_cells, b_cells, strict=True) if ra and rb and not ra & rb)
        assert apart >= 0.8 * len(rows[0]), "\n".join(lines)  # two lines, in different rows
        assert sum(r.count(BOTH_GLYPH) for r in rows) <= 0.1 * len(rows[0]), "\n".join(lines)


async def test_c_passes_over_an_engine_without_the_compared_metrics(make_app: AppFactory) -> None:
    fleet = _healthy_fleet()
    factors = {e.name: 1.0 for e in fleet.engines}
    without = {"ttft_p50", "ttft_p99", "itl_p50", "kv_usage"}
    order = sorted(e.name for e in fleet.engines)  # all ready: the overview lists them by name
    # The engine after the cursor has only generation and queue: c takes the one after it.
    app = make_app(FrozenSource(fleet, _history(fleet, factors, {order[1]: without})))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen) and screen._row_order == order
        await pilot.press("c")
        await _settle(pilot)
        assert isinstance(app.screen, CompareScreen) and app.screen.engines == (order[0], order[2])
    # No other engine has them: c says so and stays.
    app = make_app(FrozenSource(fleet, _history(fleet, factors, {n: without for n in order[1:]})))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await pilot.press("c")
        await _settle(pilot)
        assert isinstance(app.screen, OverviewScreen)
        assert any("no engine besides" in str(n.message) for n in app._notifications)
