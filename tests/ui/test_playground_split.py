"""Playground split view: a pane's reply and timings belong to the engine that produced them, also
after ``n`` moves the next prompt on to other engines (issue 31 item 8)."""

from __future__ import annotations

from typing import Any

from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Static

from console.client.playground import Turn
from console.ui.screens.playground import PlaygroundScreen
from tests.ui.conftest import AppFactory
from tests.ui.playground_turns import REPLY, finished_turn


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


def _text(screen: PlaygroundScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def _split_view(app: Any, pilot: Pilot[Any]) -> PlaygroundScreen:
    """The playground in split view: vllm-a (left) and sglang-b (right)."""
    await _settle(pilot)
    await pilot.press("P")
    await _settle(pilot)
    screen = app.screen
    assert isinstance(screen, PlaygroundScreen)
    await pilot.press("v")
    await _settle(pilot)
    return screen


def _replies(i: int = 0) -> list[Turn]:
    """One finished exchange on each side (vllm-a: TTFT 85+i ms; sglang-b: 95+i ms)."""
    return [finished_turn("vllm-a", "http://127.0.0.1:8000", REPLY, 21.0, 85.0 + i),
            finished_turn("sglang-b", "http://127.0.0.1:8001", "a different reply", 23.5, 95.0 + i)]


async def test_n_keeps_each_reply_with_the_engine_that_produced_it(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await _split_view(app, pilot)
        await screen.show_turns("what does the prefix cache do?", _replies(), {})
        await _settle(pilot)
        assert _text(screen, "#pane-a .pane-title") == "vllm-a"
        assert _text(screen, "#pane-b .pane-title") == "sglang-b"

        await pilot.press("n")  # the next prompt goes to sglang-b and trtllm-c
        await _settle(pilot)
        assert "sglang-b" in _text(screen, "#pg-engine") and "trtllm-c" in _text(screen, "#pg-engine")
        left, right = _text(screen, "#pane-a .pane-title"), _text(screen, "#pane-b .pane-title")
        # Each pane still names the engine whose reply and timings it shows, and where the next goes.
        assert left.startswith("vllm-a ·") and left.endswith("next prompt → sglang-b")
        assert right.startswith("sglang-b ·") and right.endswith("next prompt → trtllm-c")
        assert _text(screen, "#pane-a .pane-stats").startswith("TTFT 85 ms")
        assert _text(screen, "#pane-b .pane-stats").startswith("TTFT 95 ms")
        # The compare line names the same engines as the panes above it.
        summary = _text(screen, "#pg-summary")
        assert "TTFT vllm-a 85 ms vs sglang-b 95 ms" in summary

        # A copy takes the reply the focused pane shows, not the next engine's last one.
        screen.query_one("#pane-b VerticalScroll", VerticalScroll).focus()
        await _settle(pilot)
        await pilot.press("r")
        await _settle(pilot)
        assert app.clipboard == "a different reply"


async def test_at_80_columns_a_pane_title_keeps_both_names(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _split_view(app, pilot)
        await screen.show_turns("what does the prefix cache do?", _replies(), {})
        await pilot.press("n")
        await _settle(pilot)
        for pane_id, shown, target in (("#pane-a", "vllm-a", "sglang-b"), ("#pane-b", "sglang-b", "trtllm-c")):
            title = _text(screen, f"{pane_id} .pane-title")
            width = screen.query_one(pane_id).content_region.width
            assert title.startswith(shown) and title.endswith(f"next → {target}") and len(title) <= width, title


async def test_the_history_table_follows_the_newest_exchange(make_app: AppFactory) -> None:
    from textual.widgets import DataTable

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _split_view(app, pilot)
        for i in range(4):  # eight rows: more than the table shows
            await screen.show_turns(f"question {i}", _replies(i), {})
            await _settle(pilot)
        table = screen.query_one("#pg-history", DataTable)
        assert table.row_count == 8 and table.max_scroll_y > 0
        assert table.scroll_y == table.max_scroll_y
