"""A snapshot that arrives while a screen is being pushed (not composed yet) is not drawn on it,
and the screen shows the newest snapshot once it is up. With many engines the hub publishes while
keys open screens; drawing on a screen without children raised NoMatches and ended the console."""

from __future__ import annotations

from console.ui.messages import FleetUpdated
from console.ui.screens.engine import EngineScreen
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import frozen_fleet


async def test_snapshot_during_a_push_waits_for_the_screen(make_app: AppFactory) -> None:
    app = make_app()
    fleet = frozen_fleet()
    name = fleet.engines[0].name
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        mounting = app.specs["engine"].factory(app, name)
        assert isinstance(mounting, EngineScreen)
        waiting = app.push_screen(mounting)
        assert app.screen is mounting and not mounting.is_mounted
        app._on_fleet(FleetUpdated(fleet))  # the hub's snapshot, handled before the screen is up
        await waiting
        await pilot.pause()
        assert app.screen is mounting and mounting.is_mounted
        assert name.split("/")[-1][:8] in str(mounting.query_one("#engine-head").render())


async def test_snapshot_after_the_screens_are_gone_is_dropped(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
    # The hub's last snapshot may be handled while the app closes, after its screens are removed.
    app._on_fleet(FleetUpdated(frozen_fleet()))
    assert app.fleet is not None


async def test_numbers_around_a_pop_up_keep_moving(make_app: AppFactory) -> None:
    """A pop-up (the stop/start question, help) covers part of the screen; the rows that show
    around it must follow new snapshots, not freeze while the user reads the question."""
    from dataclasses import replace

    from console.ui.screens.modals import HelpScreen
    from console.ui.screens.overview import OverviewScreen

    app = make_app()
    fleet = frozen_fleet()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        first = fleet.engines[0]
        assert first.total is not None
        busier = replace(first, total=replace(first.total, running=987.0))
        app._on_fleet(FleetUpdated(replace(fleet, engines=(busier, *fleet.engines[1:]))))
        await pilot.pause()
        table = overview.query_one("#engines", RowTable)
        cells = [str(c) for row in range(table.row_count) for c in table.get_row_at(row)]
        assert any("987" in c for c in cells), cells
