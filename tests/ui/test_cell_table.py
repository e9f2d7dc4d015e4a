"""The overview's engines table re-renders only the cells that changed (issue 12)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.renderables.styled import Styled
from textual.widgets import DataTable

from console.ui.screens.overview import OverviewScreen
from tests.ui.conftest import AppFactory


def _screen_text(table: DataTable[Any]) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


async def test_one_changed_cell_renders_one_cell(make_app: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        table: DataTable[Text] = app.screen.query_one("#engines", DataTable)
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
        # Rows re-ordered (a sort redraws from the snapshot): each line shows its own row's values.
        app.screen.cycle_sort(reverse=True)
        await pilot.pause()
        lines = _screen_text(table)
        order = app.screen._row_order
        for i, name in enumerate(order):
            row = [str(c) for c in table.get_row(name)]
            assert lines[i + 1].split()[0] == name and all(v in lines[i + 1] for v in row if v.strip())
