"""Kept screens: the engine detail and the GPU screen are built once and shown again on return
(building a screen is most of a key's way to it), and a kept screen comes back as a new one would:
with the newest numbers, its engine's raw series wanted again, and the cursor out of its text boxes."""

from __future__ import annotations

import dataclasses
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Static

from console.ui import app as app_module
from console.ui.app import DeckApp
from console.ui.screens.engine import EngineScreen
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.overview import OverviewScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


async def _show(app: DeckApp, pilot: Pilot[Any], name: str, target: str | None = None) -> None:
    await app.show_screen(name, target)
    await _settle(pilot)


async def test_a_return_shows_the_same_screen_with_the_newest_numbers(make_app: AppFactory) -> None:
    source = FrozenSource()
    app = make_app(source)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await _show(app, pilot, "engine", "vllm-a")
        first = app.screen
        assert isinstance(first, EngineScreen) and source.detail == "vllm-a"
        await _show(app, pilot, "overview")
        assert isinstance(app.screen, OverviewScreen)
        assert source.detail is None  # the overview parses no engine's every series
        # New numbers arrive while the detail screen is not shown ...
        fleet = frozen_fleet()
        engines = tuple(
            dataclasses.replace(e, identity=dataclasses.replace(e.identity, models=("renamed/model-x",)))
            if e.name == "vllm-a" else e
            for e in fleet.engines
        )
        source.publish(dataclasses.replace(fleet, engines=engines))
        await _settle(pilot)
        await _show(app, pilot, "engine", "vllm-a")
        # ... and the kept screen comes back with them, and wants the raw series again.
        assert app.screen is first
        assert "renamed/model-x" in str(first.query_one("#engine-head", Static).render())
        assert source.detail == "vllm-a"
        await _show(app, pilot, "engine", "sglang-b")
        assert app.screen is not first and source.detail == "sglang-b"
        await _show(app, pilot, "gpus")
        gpus = app.screen
        assert isinstance(gpus, GpuScreen)
        await _show(app, pilot, "overview")
        await _show(app, pilot, "gpus")
        assert app.screen is gpus


async def test_a_kept_screen_comes_back_with_the_cursor_out_of_its_text_box(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await _show(app, pilot, "engine", "vllm-a")
        screen = app.screen
        screen.query_one("#tabs").active = "raw"  # type: ignore[attr-defined]
        await _settle(pilot)
        screen.query_one("#raw-filter", Input).focus()
        await _settle(pilot)
        assert isinstance(app.focused, Input)
        await _show(app, pilot, "overview")
        await _show(app, pilot, "engine", "vllm-a")
        assert app.screen is screen
        assert not isinstance(app.focused, Input)
        await pilot.press("q")  # a plain letter acts again: it quits, it types nothing
        await _settle(pilot)
        assert screen.query_one("#raw-filter", Input).value == ""


async def test_at_most_so_many_screens_are_kept(make_app: AppFactory, monkeypatch: Any) -> None:
    monkeypatch.setattr(app_module, "KEPT_SCREENS", 2)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot)
        await _show(app, pilot, "engine", "vllm-a")
        a = app.screen
        await _show(app, pilot, "engine", "sglang-b")
        await _show(app, pilot, "gpus")  # the third: vllm-a's screen, the oldest, goes
        await _settle(pilot)
        assert not a.is_attached
        await _show(app, pilot, "engine", "vllm-a")
        assert app.screen is not a and isinstance(app.screen, EngineScreen)
        assert len(app._kept) == 2
