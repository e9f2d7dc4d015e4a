"""CellTable (the alerts screen's table) re-renders only the cells that changed (issue 12)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.renderables.styled import Styled
from textual.widgets import DataTable

from console.ui.widgets.cell_table import CellTable

COLUMNS = ("name", "phase", "running", "waiting", "kv", "prefix", "gen", "prompt", "ttft50", "ttft99", "itl50",
           "errors", "tpj")
ROWS = ("vllm-a", "sglang-b", "trtllm-c", "tgi-d")


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CellTable(id="table", cursor_type="row", zebra_stripes=False)

    def on_mount(self) -> None:
        table: CellTable[Text] = self.query_one(CellTable)
        for c in COLUMNS:
            table.add_column(c, key=c, width=9)
        for r in ROWS:
            table.add_row(*(Text(f"{r[:4]}{i}") for i in range(len(COLUMNS))), key=r)


def _screen_text(table: DataTable[Any]) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_one_changed_cell_renders_one_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    app = TableApp()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        table: DataTable[Text] = app.query_one(CellTable)
        before = _screen_text(table)
        real = app.console.render_lines
        rendered: list[object] = []

        def counting(*args: Any, **kwargs: Any) -> Any:
            if isinstance(args[0], Styled):  # a table cell (its content is rendered inside it)
                rendered.append(args[0])
            return real(*args, **kwargs)

        monkeypatch.setattr(app.console, "render_lines", counting)
        table.update_cell("vllm-a", "running", Text("987"))
        await pilot.pause()
        after = _screen_text(table)
        # What is on screen: the new value in its row, every other line as it was.
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert len(changed) == 1 and "987" in after[changed[0]]
        # A DataTable renders every cell again here (65: 13 columns, a header and 4 rows); this one, one cell.
        assert len(rendered) == 1, f"{len(rendered)} cells rendered for one changed cell"
        # Rows re-ordered: each line shows its own row's values.
        table.sort("name", key=str, reverse=True)
        await pilot.pause()
        lines = _screen_text(table)
        for i, name in enumerate(sorted(ROWS, reverse=True)):
            row = [str(c) for c in table.get_row(name)]
            assert all(v in lines[i + 1] for v in row), (name, lines[i + 1])


async def test_caches_stay_sized_to_the_table_over_many_refreshes() -> None:
    # Each refresh makes DataTable's own cache entries dead (they are keyed by its table-wide counter):
    # bounded by the table, not by Textual's 10,000 cells and 1,000 lines, a long run holds no more.
    app = TableApp()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        table: DataTable[Text] = app.query_one(CellTable)
        cells = (table.row_count + 1) * len(table.columns)
        first, second = list(table.rows)[:2]
        for i in range(400):
            table.update_cell(first, "running", Text(str(i)))
            table.update_cell(second, "running", Text(str(i)))
            table.refresh()
            await pilot.pause(0)
            _screen_text(table)  # every line rendered, as a frame does
        caches = {"lines": table._line_cache, "rows": table._row_render_cache,
                  "renderables": table._row_renderable_cache, "textual cells": table._cell_render_cache,
                  "cells": table._cells}  # type: ignore[attr-defined]
        sizes = {name: len(c) for name, c in caches.items()}
        # 400 refreshes rendered 800 new cells and 400 new states of every line; what is held is a
        # few states of the table, and the table on screen is still right.
        assert max(sizes["lines"], sizes["rows"], sizes["renderables"]) <= 64, sizes
        assert max(sizes["textual cells"], sizes["cells"]) <= 16 * cells, (sizes, cells)
        assert "399" in "".join(_screen_text(table))
