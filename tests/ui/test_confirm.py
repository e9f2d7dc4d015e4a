"""The confirmation pop-up (issue 31 item 11): Enter takes the default (No), and the rows of its box
show nothing of the screen beneath beside the border (a cut cell there read as stray characters)."""

from __future__ import annotations

import io

from rich.console import Console

from console.ui.app import DeckApp
from console.ui.screens.modals import ConfirmScreen
from tests.ui.conftest import AppFactory


def _screen_lines(app: DeckApp) -> list[str]:
    """The terminal's lines as a user sees them (the pop-up over the screen beneath)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text().splitlines()


async def test_enter_answers_no_and_the_box_rows_are_clean(make_app: AppFactory) -> None:
    app = make_app()
    answers: list[bool | None] = []
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("g")  # the GPU table: text under every row the box covers
        await pilot.pause()
        await app.push_screen(ConfirmScreen("Stop vllm-a? It is serving 7 running requests."), answers.append)
        await pilot.pause()
        lines = _screen_lines(app)
        # The box's rows: from its top corner to its bottom one (the charts beneath draw "│" too).
        top = next(i for i, line in enumerate(lines) if "╭" in line)
        bottom = next(i for i, line in enumerate(lines) if i > top and "╰" in line)
        boxed = lines[top:bottom + 1]
        assert len(boxed) >= 4, lines
        for line in boxed:
            left, right = line.index(next(c for c in line if c in "│╭╰")), max(line.rfind(c) for c in "│╮╯")
            # Beside the box: blank, nothing of the GPU table beneath.
            assert line[:left].strip() == "" and line[right + 1:].strip() == "", line
        assert any("Enter = no (default)" in line for line in boxed)
        await pilot.press("enter")
        await pilot.pause()
        assert answers == [False]
        assert not isinstance(app.screen, ConfirmScreen)
