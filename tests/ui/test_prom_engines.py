"""Engines read from a Prometheus source in the console: control is refused with the reason, and
opening an engine's charts asks the source for its history (without waiting for it)."""

from __future__ import annotations

from dataclasses import replace

from console.ui.app import DeckApp
from console.ui.screens.engine import EngineScreen
from console.ui.screens.modals import ConfirmScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet


class PromFrozenSource(FrozenSource):
    """Every engine from source "prom"; ``request_backfill`` calls are recorded."""

    def __init__(self) -> None:
        fleet = frozen_fleet()
        fleet = replace(fleet, engines=tuple(replace(e, source="prom", host="prom") for e in fleet.engines))
        super().__init__(fleet)
        self.asked: list[str] = []

    def request_backfill(self, engine: str) -> bool:
        self.asked.append(engine)
        return True


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
