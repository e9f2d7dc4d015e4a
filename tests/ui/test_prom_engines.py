"""Engines read from a Prometheus source in the console: control is refused with the reason,
opening an engine's charts asks the source for its history (without waiting for it), and a single
source shows its host column, the engines' roles and (engine screen) where they come from."""

from __future__ import annotations

import re
import time
from dataclasses import replace

from rich.console import Console
from textual.coordinate import Coordinate

from console.model import FleetSnapshot, Freshness, HostView, SourceState
from console.ui.app import DeckApp
from console.ui.screens.engine import EngineScreen, identity_table
from console.ui.screens.modals import ConfirmScreen
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet


class PromFrozenSource(FrozenSource):
    """Every engine from source "prom"; ``request_backfill`` calls are recorded."""

    def __init__(self, roles: tuple[str, ...] = ()) -> None:
        fleet = frozen_fleet()
        engines = tuple(replace(e, source="prom", host="prom", name=f"prom/{e.name}",
                                role=roles[i] if i < len(roles) else "") for i, e in enumerate(fleet.engines))
        view = HostView("prom", "http://127.0.0.1:9090", Freshness(SourceState.OK, updated_at=fleet.taken_at),
                        last_doc_at=fleet.taken_at, engines=len(engines), kind="prometheus")
        fleet = replace(fleet, engines=engines, hosts=(view,))
        super().__init__(fleet)
        self.asked: list[str] = []

    def request_backfill(self, engine: str) -> bool:
        self.asked.append(engine)
        return True


def src_fleet(app: DeckApp) -> FleetSnapshot:
    fleet = app.fleet
    assert fleet is not None
    return fleet


def _notes(app: DeckApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def test_control_of_a_prometheus_engine_is_refused_with_why(make_app: AppFactory) -> None:
    app = make_app(PromFrozenSource())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        for key in ("R", "X", "U"):
            await pilot.press(key)
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
        notes = _notes(app)
        assert sum("read-only: engine comes from Prometheus source prom" in n for n in notes) == 3, notes


async def test_opening_an_engine_asks_its_source_for_history(make_app: AppFactory) -> None:
    src = PromFrozenSource()
    app = make_app(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen)
        assert app.screen.engine in src.asked


async def test_a_single_source_shows_its_host_column_and_the_roles(make_app: AppFactory) -> None:
    app = make_app(PromFrozenSource(roles=("prefill", "decode")))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#engines", RowTable)
        keys = list(table.columns)
        assert keys[:3] == ["host", "name", "role"], keys
        cells = {str(table.get_cell_at(Coordinate(r, 2))) for r in range(table.row_count)}
        assert {"prefill", "decode"} <= cells, cells
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen)
        e = next(e for e in src_fleet(app).engines if e.role)
        console = Console(width=160, record=True)
        console.print(identity_table(e, app, time.time()))
        text = console.export_text()
        assert "read-only: read from Prometheus source prom" in text, text
        assert re.search(r"role\s+(prefill|decode)", text), text


async def test_no_role_no_role_column(make_app: AppFactory) -> None:
    app = make_app(PromFrozenSource())
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        keys = list(app.screen.query_one("#engines", RowTable).columns)
        assert "host" in keys and "role" not in keys


async def test_roles_that_do_not_fit_80x24_leave_the_rows_drawn(make_app: AppFactory) -> None:
    app = make_app(PromFrozenSource(roles=("prefill", "decode")))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(3):  # refreshes: the table is not refitted (and emptied) on each
            await pilot.pause(0.3)
        table = app.screen.query_one("#engines", RowTable)
        assert "host" in list(table.columns)
        assert table.row_count == len(src_fleet(app).engines)
