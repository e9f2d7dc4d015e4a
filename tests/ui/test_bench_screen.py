"""The bench screen after a run at 80x24 (issue 31 item 9): the log follows the run to "done", every
column title is whole, a run that cannot start says why where the run would show, and the saved
table names why client-server TTFT can be negative."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from console.client.report import to_markdown
from console.ui.screens.bench import BenchScreen
from tests.ui.conftest import AppFactory
from tests.ui.test_small_terminal import _plain, _settle, _show, bench_doc

# What a demo run of vllm-sim against sglang-sim logs before it is done (console/ui/screens/bench.py).
RUN_LOG = ["ready: models Qwen/Qwen3-0.6B, Qwen/Qwen3-0.6B · 32 prompts/level measured, after C warmup requests "
           "(not counted)", "[1/2] vllm-sim (repeat 1)",
           "   vllm-sim C=1: 32/32 (+1 warmup), 0 errors", "   C=1: 32 ok, 0 failed, TTFT p50 54.7 ms",
           "   vllm-sim C=8: 32/32 (+8 warmup), 0 errors", "   C=8: 32 ok, 0 failed, TTFT p50 88.4 ms",
           "[2/2] sglang-sim (repeat 1)", "   sglang-sim C=1: 32/32 (+1 warmup), 0 errors",
           "   C=1: 32 ok, 0 failed, TTFT p50 35.3 ms", "   sglang-sim C=8: 32/32 (+8 warmup), 0 errors",
           "   C=8: 32 ok, 0 failed, TTFT p50 79.6 ms"]


def demo_doc() -> dict[str, Any]:
    """The fixture's results under the demo's engine names."""
    doc = bench_doc()
    for e, label in zip(doc["engines"], ("vllm-sim", "sglang-sim"), strict=True):
        e["label"] = label
    return doc


async def _bench(app: Any, pilot: Pilot[Any]) -> BenchScreen:
    await _show(app, pilot, "bench")
    screen = app.screen
    assert isinstance(screen, BenchScreen)
    return screen


def _visible_lines(widget: Static) -> list[str]:
    return _plain(widget).splitlines()[: widget.region.height]


async def test_a_finished_run_at_80x24_shows_done_and_whole_column_titles(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _bench(app, pilot)
        screen._progress = list(RUN_LOG)
        screen._on_done(demo_doc())
        await _settle(pilot)
        log = screen.query_one("#bench-progress", Static)
        visible = _visible_lines(log)
        # The done line says which engine is B and which A, and what the marks mean (it wraps at 80).
        assert visible and visible[-1].startswith(
            "done · B/A = sglang-sim ÷ vllm-sim: ▲ better ▼ worse ≈ within 3% · s saves"), visible
        assert not any("[2/2]" in line for line in visible)
        table = screen.query_one("#bench-table", DataTable)
        titles = [str(c.label) for c in table.columns.values()]
        # At 80 columns one block per level, each under a row naming it (no level column).
        assert titles == ["metric", "vllm-sim", "sglang-sim", "B/A"]
        # Every column on screen whole: no title or cell cut at the right edge.
        assert table.virtual_size.width <= table.scrollable_content_region.width, table.virtual_size


async def test_a_run_that_cannot_start_says_why_in_the_log(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await _bench(app, pilot)
        screen.query_one("#bench-engines", Input).value = "nope-sim"
        await pilot.press("r")
        await _settle(pilot)
        said = _plain(screen.query_one("#bench-progress", Static))
        assert said.startswith("not started: unknown engine(s): nope-sim; known: vllm-a"), said
        assert any("unknown engine(s): nope-sim" in str(n.message) for n in app._notifications)


def test_the_saved_markdown_says_client_server_ttft_can_be_negative() -> None:
    md = to_markdown(demo_doc())
    row = next(line for line in md.splitlines() if line.startswith("| client-server TTFT p50"))
    # The engine's p50 comes from histogram buckets: the name carries the ± of that estimate.
    assert row.startswith("| client-server TTFT p50 (ms, ±bucket) | ") and "| -45.38 |" in row


async def test_the_log_still_ends_with_done_after_a_resize(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _bench(app, pilot)
        screen._progress = list(RUN_LOG)
        screen._on_done(demo_doc())
        await _settle(pilot)
        await pilot.resize_terminal(200, 50)
        await pilot.pause(0.2)
        await _settle(pilot)
        visible = _visible_lines(screen.query_one("#bench-progress", Static))
        assert visible and visible[-1].startswith("done · B/A"), visible


async def test_leaving_the_bench_and_coming_back_keeps_its_results(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(200, 50)) as pilot:
        screen = await _bench(app, pilot)
        screen._progress = list(RUN_LOG)
        screen._on_done(demo_doc())
        await _settle(pilot)
        rows = screen.query_one("#bench-table", DataTable).row_count
        assert rows > 0
        await pilot.press("escape")
        await _settle(pilot)
        assert not isinstance(app.screen, BenchScreen)
        again = await _bench(app, pilot)
        await _settle(pilot)
        # Before: a new, empty bench screen (its form and "r runs ..." only).
        assert again.doc is not None and again.query_one("#bench-table", DataTable).row_count == rows
        assert _visible_lines(again.query_one("#bench-progress", Static))[-1].startswith("done · B/A")


async def test_a_bench_screen_removed_for_good_stops_its_run(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _bench(app, pilot)
        stop = screen._stop
        assert not stop.is_set()
        await pilot.press("escape")
        await _settle(pilot)
        assert not stop.is_set()  # kept: a run would go on, shown again on return
    assert stop.is_set()  # the console quit: the screen was unmounted
