"""Screen snapshots (pytest-textual-snapshot) of a fleet frozen to deterministic values.

Update after an intended visual change with: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.ui.conftest import AppFactory
from tests.ui.playground_turns import REPLY, finished_turn

SnapCompare = Any


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


SIZES = pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])


@SIZES
def test_overview(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(), terminal_size=size, run_before=_settle)


@SIZES
def test_engine_detail(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    async def open_detail(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("down", "down", "down", "enter")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=open_detail)


def _keys(*keys: str) -> Any:
    async def press(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press(*keys)
        await _settle(pilot)

    return press


@SIZES
@pytest.mark.parametrize("screen", ["gpus", "compare", "playground", "bench", "alerts", "help"])
def test_screen(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int], screen: str) -> None:
    """Every other screen, opened by its key from the overview."""
    keys = {"gpus": "g", "compare": "c", "playground": "P", "bench": "B", "alerts": "a", "help": "question_mark"}
    assert snap_compare(make_app(), terminal_size=size, run_before=_keys(keys[screen]))


def test_help_read_only_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    async def open_help(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(make_app(read_only=True), terminal_size=(80, 24), run_before=open_help)


def test_playground_split_reply_80x24(
    snap_compare: SnapCompare, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split view after a request: both replies with 8+ lines each, their timings, the summary."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()

    async def reply(pilot: Pilot[Any]) -> None:
        from console.ui.screens.playground import PlaygroundScreen

        await _settle(pilot)
        await pilot.press("P", "v")
        await _settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, PlaygroundScreen)
        turns = [finished_turn("vllm-a", "http://127.0.0.1:8000", REPLY, 21.0, 85.0),
                 finished_turn("sglang-b", "http://127.0.0.1:8001", REPLY.replace("radix tree", "radix tree too"),
                               23.5, 95.0)]  # fmt: skip
        shown = "**you**: what does the prefix cache do?\n\n**assistant**: "
        await screen.show_turns("what does the prefix cache do?", turns, {t.engine: shown for t in turns})
        await _settle(pilot)
        await pilot.pause(0.2)  # the replies scroll to their end once laid out
        await _settle(pilot)

    try:
        assert snap_compare(make_app(), terminal_size=(80, 24), run_before=reply)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_bench_results_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    """The labelled form and a finished A/B run's results (a recorded simulator run, see
    tests/ui/test_small_terminal.py) at 80x24."""
    from tests.ui.test_small_terminal import bench_doc

    async def results(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("B")
        await _settle(pilot)
        pilot.app.screen._on_done(bench_doc())  # type: ignore[attr-defined]
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=results)
