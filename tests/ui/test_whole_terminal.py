"""The whole terminal used (issue 29 item 4): at 200x50 the overview's trends and the GPU charts grow
into the rows the tables leave (no band of blank rows); at 80x24 nothing is cut without an ellipsis
and a name or URL never reads as another one; the top bar never runs past the width; at 60 columns
every chart screen draws sparklines with their min and max."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from console.model import Alert, AlertState
from console.ui import format as fmt
from console.ui.app import DeckApp
from console.ui.screens.base import TopBar
from console.ui.screens.compare import compare_target
from console.ui.screens.overview import OverviewScreen
from console.ui.trends import TREND_METRICS
from console.ui.widgets.line import Line
from console.ui.widgets.timechart import TimeChart
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet, frozen_history

# An attached engine's name is PROFILE@HOST:PORT; cut at its end it would read as another port.
ATTACHED = "sglang@10.255.255.1:30000"
LONG = "vllm@inference-node-17.example.internal:8000"


def _screen_lines(app: DeckApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def _longest_blank_run(lines: list[str]) -> int:
    run = best = 0
    for line in lines:
        run = run + 1 if not line.strip() else 0
        best = max(best, run)
    return best


async def _settle(pilot: Pilot[Any]) -> None:
    for _ in range(3):
        await pilot.pause()


def _renamed(names: dict[str, str], **changes: Any) -> FrozenSource:
    fleet = frozen_fleet()
    fleet = replace(fleet, engines=tuple(replace(e, name=names.get(e.name, e.name)) for e in fleet.engines), **changes)
    return FrozenSource(fleet, frozen_history(fleet))


@pytest.mark.parametrize("size", [(200, 50), (120, 40), (80, 24)])
async def test_overview_trends_give_the_free_rows_to_more_metrics(make_app: AppFactory, size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        lines = _screen_lines(app)
        plan = screen._trend_plan
        sparks = screen.query_one("#sparks", Line)
        drawn = str(sparks.content).count("\n") + 1
        height = sparks.size.height
        _, room = screen.trend_room()
    assert plan is not None
    # Issue 29: the rows the tables leave are used, no band of blank rows. Issue 38: not by taller
    # blocks (a chart is 1 or 2 rows) but by more metrics, in more bands.
    assert 1 <= plan.rows <= 2
    assert plan.engines == {(200, 50): 4, (120, 40): 4, (80, 24): 3}[size]  # 80x24: the stale one's row goes
    assert plan.bands * plan.per_band >= {(200, 50): 10, (120, 40): 10, (80, 24): 3}[size]
    assert drawn == height == plan.bands * (1 + plan.engines * plan.rows) <= room
    assert _longest_blank_run(lines) <= 2, "\n".join(lines)
    # Each band names its window and its metrics' scales; each engine shown is named.
    assert sum(line.lstrip().startswith("5m shared") for line in lines) == plan.bands
    for e in ("vllm-a", "sglang-b", "tgi-d"):
        assert any(line.lstrip().startswith(e) and re.search("[▁-█]", line) for line in lines), e


async def test_overview_trends_grow_in_width_with_the_terminal(make_app: AppFactory) -> None:
    columns = []
    for size in ((120, 40), (200, 50)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await _settle(pilot)
            screen = app.screen
            assert isinstance(screen, OverviewScreen)
            plan = screen._trend_plan
            # vllm-a's charts under each band's header, every metric's.
            rows = [line for line in _screen_lines(app)
                    if line.lstrip().startswith("vllm-a") and re.search("[▁-█]", line) and " ms" in line]
        assert plan is not None and len(rows) == plan.bands
        shown = min(len(TREND_METRICS), plan.bands * plan.per_band)
        assert shown == len(TREND_METRICS)
        columns.append(shown * plan.chart_w)  # the time columns an engine's trends show
    assert columns[1] > columns[0] + 100, columns


async def test_many_engines_say_how_many_trends_are_not_shown(make_app: AppFactory) -> None:
    fleet = frozen_fleet()
    many = tuple(replace(e, name=f"{e.name}-{k}") for k in range(12) for e in fleet.engines)
    big = replace(fleet, engines=many)
    app = make_app(FrozenSource(big, frozen_history(big)))
    async with app.run_test(size=(120, 50)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        shown, rows = screen.trend_layout(len(many))
        text = "\n".join(_screen_lines(app))
    assert rows == 1 and 0 < shown < len(many)
    assert f"… trends of {len(many) - shown} more engines not shown" in text


@pytest.mark.parametrize("size", [(200, 50), (120, 40), (80, 24)])
async def test_gpu_charts_grow_with_the_terminal(make_app: AppFactory, size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _settle(pilot)
        await pilot.press("g")
        await _settle(pilot)
        height = app.screen.query_one("#gchart-util", TimeChart).size.height
        lines = _screen_lines(app)
    # Before: 6 rows at 120x40 and 12 at 200x50 (21 blank rows under the processes), 3 at 80x24.
    assert height >= {(200, 50): 24, (120, 40): 10, (80, 24): 4}[size]
    assert _longest_blank_run(lines) <= 2, "\n".join(lines)


def _cut_silently(lines: list[str], names: list[str]) -> list[str]:
    """Every place on screen where one of ``names`` shows as something else than itself or a cut
    marked with "…"."""
    bad = []
    for line in lines:
        for name in names:
            for m in re.finditer(re.escape(name[:6]), line):
                token = re.match(r"\S+", line[m.start():])
                assert token is not None
                shown = token.group(0).rstrip(",")
                if shown != name and "…" not in shown and name.startswith(shown):  # cut at its end, unmarked
                    bad.append(f"{shown!r} for {name!r} in {line!r}")
    return bad


async def test_names_and_urls_are_never_cut_silently_at_80x24(make_app: AppFactory) -> None:
    src = _renamed({"sglang-b": ATTACHED, "vllm-a": LONG})
    names = [ATTACHED, LONG]
    seen: dict[str, list[str]] = {}
    app = make_app(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        seen["overview"] = _screen_lines(app)
        await pilot.press("g")
        await _settle(pilot)
        seen["gpus"] = _screen_lines(app)
        await app.show_screen("engine", ATTACHED)
        await _settle(pilot)
        seen["engine"] = _screen_lines(app)
        await app.show_screen("compare", compare_target(LONG, ATTACHED))
        await _settle(pilot)
        seen["compare"] = _screen_lines(app)
    for screen, lines in seen.items():
        text = "\n".join(lines)
        assert not re.search(r":3000(?!0)", text), f"{screen}: {ATTACHED} reads as port 3000\n{text}"
        assert not _cut_silently(lines, names), (screen, _cut_silently(lines, names))
    # The overview's name column shows the attached engine whole, and the longer one cut in its middle.
    overview = "\n".join(seen["overview"])
    assert ATTACHED in overview
    assert fmt.fit_name(LONG, 28) in overview and fmt.fit_name(LONG, 28).endswith(":8000")


def test_fit_name_keeps_head_and_tail() -> None:
    assert fmt.fit_name(ATTACHED, 40) == ATTACHED
    for width in range(2, len(ATTACHED)):
        cut = fmt.fit_name(ATTACHED, width)
        assert len(cut) == width and "…" in cut
        head, _, tail = cut.partition("…")
        assert ATTACHED.startswith(head) and ATTACHED.endswith(tail)
    assert fmt.fit_name(ATTACHED, 14).endswith("1:30000")


def _alerts(engines: list[str]) -> tuple[Alert, ...]:
    return (
        Alert("kv_saturated_queue_growing", engines[0], "critical", AlertState.FIRING, "KV full", since=T0 - 300),
        Alert("queue_buildup", engines[1], "warning", AlertState.FIRING, "Queue building up", since=T0 - 400),
        Alert("preempting", engines[1], "warning", AlertState.FIRING, "Preempting", since=T0 - 100),
    )


@pytest.mark.parametrize("width", [80, 60])
async def test_the_top_bar_collapses_to_counts_and_never_overflows(make_app: AppFactory, width: int) -> None:
    names = {"sglang-b": ATTACHED, "vllm-a": LONG}
    src = _renamed(names, alerts=_alerts([LONG, ATTACHED]))
    app = make_app(src, read_only=True)
    bars: dict[str, str] = {}
    async with app.run_test(size=(width, 24)) as pilot:
        await _settle(pilot)
        bars["overview"] = str(app.screen.query_one(TopBar).content)
        await app.show_screen("compare", compare_target(LONG, ATTACHED))
        await _settle(pilot)
        bars["compare"] = str(app.screen.query_one(TopBar).content)
    for screen, bar in bars.items():
        assert len(bar) <= width, (screen, bar)
        # The badges as counts: simulated, read-only, engines and the sick ones, alerts by severity.
        assert "SIM" in bar and "RO" in bar and "4 eng 2 sick" in bar and "▲ 1c 2w" in bar, (screen, bar)
    # The compare title keeps both ends (the second engine's port) around its cut.
    assert "…" in bars["compare"] and (width < 80 or ":30000" in bars["compare"])


async def test_the_top_bar_says_it_in_words_when_there_is_room(make_app: AppFactory) -> None:
    src = _renamed({}, alerts=_alerts(["vllm-a", "sglang-b"]))
    app = make_app(src)
    async with app.run_test(size=(160, 40)) as pilot:
        await _settle(pilot)
        bar = str(app.screen.query_one(TopBar).content)
    assert "SIMULATED" in bar and "4 engines 2 need attention" in bar and "▲ 1 critical 2 warning (a)" in bar


async def _charts_on(app: DeckApp, pilot: Pilot[Any], screen: str, target: str | None) -> list[TimeChart]:
    await app.show_screen(screen, target)
    await _settle(pilot)
    return [c for c in app.screen.query(TimeChart) if c.display and c.size.height > 0]


@pytest.mark.parametrize("screen,target", [("engine", "vllm-a"), ("gpus", None),
                                           ("compare", compare_target("vllm-a", "sglang-b"))])
async def test_at_60_columns_every_chart_is_a_sparkline_with_min_and_max(
        make_app: AppFactory, screen: str, target: str | None) -> None:
    app = make_app()
    async with app.run_test(size=(60, 24)) as pilot:
        await _settle(pilot)
        charts = await _charts_on(app, pilot, screen, target)
        drawn = [c.render().plain.splitlines() for c in charts]
    assert charts
    for lines in drawn:
        assert len(lines) == 2 and "┤" not in "\n".join(lines), lines  # a title and a sparkline, no axes
        assert ".." in lines[1], lines  # the window's min..max, in the unit
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await _settle(pilot)
        charts = await _charts_on(app, pilot, screen, target)
        assert all("┤" in c.render().plain for c in charts)

