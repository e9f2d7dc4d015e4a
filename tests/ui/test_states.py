"""Engine states on screen (issue 10): no frozen numbers while stopping, loading or stale; crashes
and deliberate stops told apart; restart phases; unmanaged engines say how to manage them."""

from __future__ import annotations

import math
from dataclasses import replace

from textual.widgets import DataTable, Static

from console.model import EngineSnapshot, FleetSnapshot, Phase
from console.telemetry.history import History
from console.telemetry.hub import record
from console.telemetry.source import ENGINE_SERIES
from console.ui.screens.engine import EngineScreen
from console.ui.screens.overview import IDENTITY_COLS
from console.ui.widgets.chart import Chart
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet


def _with(fleet: FleetSnapshot, **changes: dict[str, object]) -> FleetSnapshot:
    """``fleet`` with per-engine field changes: _with(fleet, vllm_a={"phase": ...})."""
    engines = []
    for e in fleet.engines:
        kw = changes.get(e.name.replace("-", "_"), {})
        engines.append(replace(e, **kw) if kw else e)  # type: ignore[arg-type]
    return replace(fleet, engines=tuple(engines))


def _row(app: object, name: str) -> dict[str, str]:
    table = app.screen.query_one("#engines", DataTable)  # type: ignore[attr-defined]
    keys = [c.value for c in table.columns]
    return dict(zip(keys, (str(c) for c in table.get_row(name)), strict=True))


async def test_rows_show_no_numbers_while_stopping_loading_or_stale(make_app: AppFactory) -> None:
    # vllm-a is stopping and sglang-b loading, both still answering with fresh-looking data (the
    # lifecycle knows better); trtllm-c's metrics are stale; tgi-d is unreachable. None shows a number.
    fleet = _with(frozen_fleet(), vllm_a={"phase": Phase.STOPPING}, sglang_b={"phase": Phase.LOADING})
    app = make_app(FrozenSource(fleet))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        for name in ("vllm-a", "sglang-b", "trtllm-c", "tgi-d"):
            row = _row(app, name)
            numbers = {k: v for k, v in row.items() if k not in IDENTITY_COLS}
            assert numbers and set(numbers.values()) == {"--"}, (name, numbers)


def test_history_records_gaps_not_the_last_values() -> None:
    fleet = _with(frozen_fleet(), vllm_a={"phase": Phase.STOPPING})
    h = History(capacity=10)
    for k in range(3):
        record(h, replace(fleet, taken_at=T0 + k))
    by: dict[str, EngineSnapshot] = {e.name: e for e in fleet.engines}
    for metric in ENGINE_SERIES:
        for name in ("vllm-a", "trtllm-c", "tgi-d"):  # stopping, stale, unreachable
            vals = h.values((name, metric))
            assert len(vals) == 3 and all(math.isnan(v) for v in vals), (name, metric, vals)
    assert by["sglang-b"].live
    assert h.values(("sglang-b", "running")) == [by["sglang-b"].total.running] * 3  # type: ignore[union-attr]


async def test_chart_says_no_current_value_after_a_gap(make_app: AppFactory) -> None:
    app = make_app()  # tgi-d's frozen history ends in a gap (it went away 30 s ago)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.show_screen("engine", "tgi-d")
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen)
        chart = app.screen.query_one("#chart-generation_tps", Chart)
        head = chart.render().plain.splitlines()[0]
        assert "now --" in head and "max" in head


async def test_raw_series_of_a_stale_engine_say_how_old_they_are(make_app: AppFactory) -> None:
    app = make_app()  # trtllm-c: metrics stale, last good sample 12 s ago
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.show_screen("engine", "trtllm-c")
        await pilot.pause()
        app.screen.step_tab(1)  # type: ignore[attr-defined]
        await pilot.pause()
        app.screen.show_fleet(app.fleet)  # type: ignore[attr-defined,arg-type]
        await pilot.pause()
        text = str(app.screen.query_one("#raw-count", Static).content)
        assert "last seen 12 s ago, not current" in text
