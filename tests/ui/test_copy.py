"""OSC 52 copy in the playground (issue 10 item 12): the notice says the text was sent to the terminal
(the console cannot know whether the clipboard got it) and, in split view, whose text it was."""

from __future__ import annotations

from typing import Any

from textual.containers import VerticalScroll
from textual.pilot import Pilot

from console.client.playground import as_curl, as_json
from console.ui.app import DeckApp
from console.ui.screens.playground import PlaygroundScreen
from tests.ui.conftest import AppFactory
from tests.ui.playground_turns import REPLY, finished_turn


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


def _last_notice(app: DeckApp) -> str:
    return str(list(app._notifications)[-1].message)


async def test_copy_says_sent_to_the_terminal_and_names_the_engine(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _settle(pilot)
        await pilot.press("P")
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, PlaygroundScreen)
        await pilot.press("c")
        await _settle(pilot)
        assert "nothing sent yet" in _last_notice(app)

        await pilot.press("v")  # split: vllm-a (left) and sglang-b (right)
        await _settle(pilot)
        a = finished_turn("vllm-a", "http://127.0.0.1:8000", REPLY, 21.0, 85.0)
        b = finished_turn("sglang-b", "http://127.0.0.1:8001", "a different reply", 23.5, 95.0)
        await screen.show_turns("what does the prefix cache do?", [a, b], {})
        await _settle(pilot)

        # the left pane has the focus: its engine's request, though the right one finished last
        await pilot.press("c")
        await _settle(pilot)
        assert app.clipboard == as_curl(a)
        said = _last_notice(app)
        assert said.startswith("vllm-a: last request as curl") and "sent to the terminal" in said
        assert "copied" not in said

        # focus the right pane (tab moves there): its engine's reply and JSON
        screen.query_one("#pane-b VerticalScroll", VerticalScroll).focus()
        await _settle(pilot)
        await pilot.press("r")
        await _settle(pilot)
        assert app.clipboard == "a different reply"
        assert _last_notice(app).startswith("sglang-b: last reply (17 characters) sent to the terminal")
        await pilot.press("f5")
        await _settle(pilot)
        assert app.clipboard == as_json(b) and _last_notice(app).startswith("sglang-b: last request as JSON")
