"""Small terminals (issue 10 item 10): at 80x24 the playground has room for the reply, the bench
form is labelled and its results fit and save, the raw metrics fit the width and show the whole
series, notices never cover a table, every sort arrow shows, e explains the row on every tab, and at
60 columns GPU rows drop columns instead of wrapping.

The bench results come from ``fixtures/bench-sim-vllm-sglang.json``: the document of a real
``enginedeck bench --engine vllm@... --engine sglang@... --concurrency 1,8 --num-prompts 16
--output-len 32 --gpus simulated`` against two simulators (its per-request runs dropped); it is a
rendering fixture, not a measurement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Label, Static
from textual.widgets._toast import Toast

from console.paths import state_dir
from console.ui.app import DeckApp
from console.ui.screens.bench import BenchScreen
from console.ui.screens.engine import EngineScreen
from console.ui.screens.modals import ExplainScreen
from console.ui.screens.overview import SORTABLE, OverviewScreen
from console.ui.screens.playground import PlaygroundScreen
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory

BENCH_DOC = Path(__file__).parent / "fixtures" / "bench-sim-vllm-sglang.json"


def bench_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(BENCH_DOC.read_text())
    return doc


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


async def _show(app: DeckApp, pilot: Pilot[Any], name: str, target: str | None = None) -> None:
    await _settle(pilot)
    if name != "overview":
        await app.show_screen(name, target)
    await _settle(pilot)


def _plain(widget: Static) -> str:
    content = widget.render()
    return content.plain if isinstance(content, Text) else str(content)


# -- playground -------------------------------------------------------------------------------------


def _reply_rows(screen: PlaygroundScreen, pane: str) -> int:
    return screen.query_one(f"#{pane} VerticalScroll", VerticalScroll).scrollable_content_region.height


async def test_playground_shows_8_reply_lines_at_80x24_single_and_split(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _show(app, pilot, "playground")
        screen = app.screen
        assert isinstance(screen, PlaygroundScreen)
        assert _reply_rows(screen, "pane-a") >= 8
        await pilot.press("v")  # split
        await _settle(pilot)
        assert screen.split
        assert _reply_rows(screen, "pane-a") >= 8 and _reply_rows(screen, "pane-b") >= 8
        # after a split request the comparison summary shows too
        summary = screen.query_one("#pg-summary", Static)
        summary.update(" · ".join(["TTFT vllm-a 85 ms vs sglang-b 95 ms (B/A 1.12x)", "TPOT 21.0 vs 23.0 ms",
                                   "decode 47 vs 43 tok/s", "output tokens 64 vs 64", "replies differ"]))  # fmt: skip
        summary.display = True
        await _settle(pilot)
        assert summary.region.height >= 1
        assert _reply_rows(screen, "pane-a") >= 8 and _reply_rows(screen, "pane-b") >= 8


# -- bench ------------------------------------------------------------------------------------------


async def test_bench_form_is_labelled_at_80x24(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _show(app, pilot, "bench")
        form = app.screen.query_one("#bench-form")
        labels = [str(w.render()) for w in form.query(Label)]
        inputs = list(form.query(Input))
        assert labels == ["engines", "concurrency", "prompts/level", "input tokens", "output tokens", "workload"]
        assert len(inputs) == 6
        for label, inp in zip(form.query(Label), inputs, strict=True):
            # each label is on screen, on the line of its field, just left of it
            assert label.region.width >= len(str(label.render())) and label.region.y == inp.region.y
            assert label.region.right <= inp.region.x and inp.region.width >= 5 and inp.region.right <= 80


async def test_bench_results_fit_80_columns_and_s_saves_them(
    make_app: AppFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _show(app, pilot, "bench")
        screen = app.screen
        assert isinstance(screen, BenchScreen)
        await pilot.press("s")  # nothing yet
        await _settle(pilot)
        assert any("nothing to save" in str(n.message) for n in app._notifications)
        screen._on_done(bench_doc())
        await _settle(pilot)
        table = screen.query_one("#bench-table", DataTable)
        assert table.row_count > 20
        # every column readable without sideways scrolling, and enough rows to read
        assert table.virtual_size.width <= table.scrollable_content_region.width, table.virtual_size
        assert table.region.height >= 10
        await pilot.press("s")
        await _settle(pilot)
        # Into the results folder (the state folder's bench by default), never the current folder.
        assert not list(tmp_path.glob("enginedeck-bench-*"))
        results = state_dir() / "bench"
        saved_json = sorted(results.glob("enginedeck-bench-*.json"))
        saved_md = sorted(results.glob("enginedeck-bench-*.md"))
        assert len(saved_json) == 1 and len(saved_md) == 1
        doc = json.loads(saved_json[0].read_text())
        assert doc["summary"] == bench_doc()["summary"]
        assert "| TTFT p50 (ms) |" in saved_md[0].read_text()
        said = [str(n.message) for n in app._notifications]
        assert any(f"saved {saved_json[0]} and {saved_md[0].name}" == m for m in said), said
        assert str(saved_json[0]) in _plain(screen.query_one("#bench-progress", Static))


# -- engine detail: raw metrics -----------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_raw_metrics_fit_the_width_and_show_the_whole_selected_series(
    make_app: AppFactory, size: tuple[int, int]
) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _show(app, pilot, "engine", "vllm-a")
        await pilot.press("right_square_bracket")
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, EngineScreen)
        table = screen.query_one("#raw-table", DataTable)
        assert table.row_count == 3
        assert table.virtual_size.width <= table.scrollable_content_region.width, (table.virtual_size, table.size)
        # the series column uses the width it has (no wide empty gap at 200 columns)
        assert table.virtual_size.width >= table.scrollable_content_region.width - 4
        await pilot.press("down")
        await _settle(pilot)
        full = 'vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct"}'
        assert full in _plain(screen.query_one("#raw-selected", Static)).replace("\n", "")
        assert str(table.get_row_at(1)[0]).startswith("vllm:num_requests_running")


# -- notices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["overview", "engine", "gpus", "playground", "bench"])
async def test_notices_never_cover_a_table(make_app: AppFactory, name: str) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await _show(app, pilot, name, "vllm-a" if name == "engine" else None)
        if name == "engine":
            await pilot.press("right_square_bracket")  # the raw table
        if name == "bench":
            app.screen._on_done(bench_doc())  # type: ignore[attr-defined]
        for i in range(3):
            app.notify(f"notice {i}: a long message that goes on about what happened and what to do about it " * 2)
        await pilot.pause(0.3)
        await _settle(pilot)
        toasts = list(app.screen.query(Toast))
        tables = [t for t in [*app.screen.query(DataTable), *app.screen.query(RowTable)] if t.display and t.region.area]
        assert toasts and tables
        for toast in toasts:
            for table in tables:
                assert not toast.region.overlaps(table.region), (name, table.id, table.region, toast.region)


# -- sort arrows ------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_sort_arrow_is_visible_on_every_column(make_app: AppFactory, size: tuple[int, int]) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _settle(pilot)
        screen = app.screen
        assert isinstance(screen, OverviewScreen)
        table = screen.query_one("#engines", RowTable)
        shown = [c.key for c in SORTABLE if c.key in set(table.columns)]
        assert len(shown) >= 6
        seen = set()
        for _ in range(len(shown) * 2):
            col = table.columns[screen.sort_key]
            label = str(col.label)
            assert label.endswith(("▼", "▲")), label
            assert len(label) <= col.width, f"{label!r} cut to {col.width} columns"
            seen.add(screen.sort_key)
            await pilot.press("s" if len(seen) < len(shown) else "S")
            await pilot.pause()
        assert seen == set(shown)


# -- e on every tab ---------------------------------------------------------------------------------


async def _explain(app: DeckApp, pilot: Pilot[Any]) -> tuple[str, str]:
    await pilot.press("e")
    await _settle(pilot)
    assert isinstance(app.screen, ExplainScreen)
    metric, text = app.screen.metric, _plain(app.screen.query_one("#explain-text", Static))
    await pilot.press("escape")
    await _settle(pilot)
    return metric, text


async def test_e_explains_the_selected_row_on_every_tab(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _show(app, pilot, "engine", "vllm-a")
        metric, text = await _explain(app, pilot)  # charts: the first is TTFT (p50 and p99; explains p99)
        assert metric == "ttft_p99" and "Time to first token" in text
        await pilot.press("right_square_bracket")  # raw metrics
        await _settle(pilot)
        await pilot.press("down")
        metric, text = await _explain(app, pilot)
        assert metric == "raw:vllm:num_requests_running"
        assert "vllm:num_requests_running" in text and "Running requests" in text
        await pilot.press("down")
        metric, text = await _explain(app, pilot)
        assert metric == "raw:vllm:num_requests_waiting" and "Waiting requests" in text
        for _tab in ("identity", "logs"):
            await pilot.press("right_square_bracket")
            await _settle(pilot)
            metric, text = await _explain(app, pilot)
            assert metric == "phase" and "Phase / health" in text

        await app.show_screen("bench")
        await _settle(pilot)
        app.screen._on_done(bench_doc())  # type: ignore[attr-defined]
        await _settle(pilot)
        await pilot.press("down", "down")  # requests ok, failed, TTFT p50
        metric, text = await _explain(app, pilot)
        assert metric == "bench:ttft_p50_ms" and "Time to first token" in text and "lower" in text

        await app.show_screen("playground")
        await _settle(pilot)
        metric, text = await _explain(app, pilot)
        assert metric == "playground" and "TTFT ms" in text and "TPOT ms" in text


# -- 60 columns -------------------------------------------------------------------------------------


async def test_gpu_rows_drop_columns_at_60_columns(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(60, 24)) as pilot:
        await _settle(pilot)
        gpus = app.screen.query_one("#gpus", Line)
        lines = gpus.content.plain.split("\n")  # type: ignore[union-attr]
        assert len(lines) == 9  # the header and 8 GPUs, one line each
        assert all(len(line) <= 58 for line in lines), max(len(line) for line in lines)
        assert "util" in lines[0] and "HBM" in lines[0] and "power" not in lines[0]
        assert gpus.region.height == 9
        await pilot.press("g")
        await _settle(pilot)
        for tid in ("#gpu-list", "#procs"):
            table = app.screen.query_one(tid, DataTable)
            assert table.virtual_size.width <= table.scrollable_content_region.width, (tid, table.virtual_size)
        await pilot.resize_terminal(160, 48)
        await _settle(pilot)
        header = [str(c.label) for c in app.screen.query_one("#gpu-list", DataTable).columns.values()]
        assert "power" in header and "temp" in header
