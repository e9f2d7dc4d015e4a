"""The overview's trends answer what changed, how much and since when (issue 38): after 6 minutes of
history at 80x24 a TTFT p99 that steps from 80 ms to 400 ms reads as a step on a scale in ms, the
flat parts flat, over a window of 5 minutes named on screen; w/W step the window, y the scales."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from textual.pilot import Pilot

from console.telemetry.metrics.history import History
from console.telemetry.source import ENGINE_SERIES
from console.ui.app import DeckApp
from console.ui.screens.overview import OverviewScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet

STEP_AT = 180  # seconds into the 6 minutes


def _six_minutes() -> FrozenSource:
    """The frozen fleet with 6 minutes of points at 1 s in the real history store: vllm-a's TTFT p99
    steps from 80 ms to 400 ms after 3 minutes, every other series is flat."""
    fleet = frozen_fleet()
    history = History()
    for k in range(360):
        t = T0 - 359 + k
        for e in fleet.engines:
            for metric in ENGINE_SERIES:
                v = 0.08 if metric.startswith(("ttft", "itl", "e2e", "queue")) else 0.5 if metric in (
                    "kv_usage", "prefix_hit_rate") else 100.0
                if e.name == "vllm-a" and metric == "ttft_p99" and k >= STEP_AT:
                    v = 0.4
                history.append((e.name, metric), t, v)
    return FrozenSource(fleet, history)


def _screen_lines(app: DeckApp) -> list[str]:
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def _settle(pilot: Pilot[Any]) -> None:
    for _ in range(3):
        await pilot.pause()


def _trend(lines: list[str], engine: str, title: str) -> tuple[str, str]:
    """(the header over it, the chart) of ``engine``'s trend under the header cell ``title``."""
    for i, line in enumerate(lines):
        x = line.find(" " + title + " ")
        if x < 0 or not re.match(r"\s*1?\d+m ", line):
            continue
        for row in lines[i + 1:]:
            if row.strip().startswith(engine):
                m = re.match(r"[ ▁▂▃▄▅▆▇█]+", row[x + 1:])
                assert m is not None, row
                return line, m.group(0).rstrip()  # the value follows, after a blank
    raise AssertionError(f"no {title} trend of {engine}:\n" + "\n".join(lines))


async def test_a_step_from_80_to_400_ms_reads_as_a_step_over_5_minutes_at_80x24(make_app: AppFactory) -> None:
    app = make_app(_six_minutes())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        lines = _screen_lines(app)
    header, step = _trend(lines, "vllm-a", "TTFT p99")
    # The window, at least 5 minutes, named; the scale in ms from the data, not from zero.
    window = re.match(r"\s*(\d+)m ", header)
    assert window is not None and int(window.group(1)) >= 5, header
    scale = re.search(r"TTFT p99 (\d+)\.\.(\d+) ms", header)
    assert scale is not None and 0 < int(scale.group(1)) <= 80 and 400 <= int(scale.group(2)) <= 450, header
    # The step: flat low, then flat high, in the right place (3 minutes of the 5 before now).
    assert re.fullmatch(r"▁+[▁-█]?█+", step), step
    low = step.count("▁")
    assert 0.3 <= low / len(step) <= 0.5, step
    # The flat series of the other engines are flat (at the bottom of the shared scale).
    _, flat = _trend(lines, "sglang-b", "TTFT p99")
    assert set(flat) == {"▁"} and len(flat) == len(step), flat
    # And each trend has its value now, with its unit.
    row = next(line for line in lines if line.strip().startswith("vllm-a") and "▁" in line)
    assert "400 ms" in row, row


async def test_the_window_and_scale_keys(make_app: AppFactory) -> None:
    app = make_app(_six_minutes())
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        await pilot.press("w")
        await _settle(pilot)
        header, _ = _trend(_screen_lines(app), "vllm-a", "TTFT p99")
        assert header.lstrip().startswith("15m shared"), header
        await pilot.press("W", "W")
        await _settle(pilot)
        header, step = _trend(_screen_lines(app), "vllm-a", "TTFT p99")
        assert header.lstrip().startswith("1m shared"), header
        assert set(step) == {"█"}, step  # the last minute: all after the step
        await pilot.press("w", "y")
        await _settle(pilot)
        lines = _screen_lines(app)
        header, _ = _trend(lines, "vllm-a", "TTFT p99")
        assert header.lstrip().startswith("5m own") and " ms" not in header, header
        _, flat = _trend(lines, "sglang-b", "TTFT p99")
        assert len(set(flat)) == 1 and flat[0] != "▁", flat  # on its own scale: mid-height, still flat
    assert screen.trends.window == 300.0 and not screen.trends.shared


async def test_trends_at_200x50_give_free_rows_to_more_metrics(make_app: AppFactory) -> None:
    src = _six_minutes()
    app = make_app(src)
    async with app.run_test(size=(200, 50)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        lines = _screen_lines(app)
        shown, rows = screen.trend_layout(4)
        plan = screen._trend_plan
    assert plan is not None and shown == 4 and rows <= 2
    assert plan.bands * plan.per_band > 3  # more metrics than at 80 columns, not taller blocks
    text = "\n".join(lines)
    for title in ("gen", "TTFT p99", "KV", "waiting", "running", "prompt"):
        assert re.search(rf"\s{re.escape(title)} \S", text), title
    # One engine alone: its trends in a few rows, the rest of the screen left as it is.
    one = replace(src.latest(), engines=src.latest().engines[:1])
    app = make_app(FrozenSource(one, src.history))
    async with app.run_test(size=(160, 45)) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        plan = screen._trend_plan
    assert plan is not None and plan.rows <= 2 and plan.bands * (1 + plan.rows) <= 20
