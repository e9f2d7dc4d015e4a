"""RowTable (the overview's engines table): DataTable's look cell by cell, one line drawn per changed row."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from console.ui.screens.engine import EngineScreen
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory

COLUMNS = (("name", Text("engine"), 12), ("phase", Text("health▼", style="bold"), 10), ("run", Text("run"), 4),
           ("kv", Text("KV"), 5))


def rows(n: int) -> list[tuple[str, list[Text]]]:
    base = [
        ("a", [Text("vllm-a"), Text("● ready", style="green"), Text("17"), Text("55%")]),
        # Longer than its column (ends in "…": a DataTable does so when told, below, a RowTable unless
        # told otherwise), several spans, a dim cell, a right-justified one.
        ("b", [Text("sglang-long-name-here"), Text.assemble(("✖ ", "red"), ("crashed: exit 137", "bold")),
               Text("n/a", style="dim"), Text("3", justify="right")]),
        # A row tinted by a firing alert (the overview stylizes each cell), and a wide character.
        ("c", [Text("trtllm-c…"), Text("▲ stale 12 s", style="yellow"), Text("--", style="dim"), Text("--")]),
    ]
    for _, cells in base[2:]:
        for t in cells:
            t.stylize("on #5f0000")
    for _, cells in base:
        for t in cells:
            t.overflow, t.no_wrap = "ellipsis", True
    more = [(f"r{i}", [Text(f"tgi-{i}"), Text("● ready", style="green"), Text(str(i)), Text(f"{i}%")])
            for i in range(n - len(base))]
    return (base + more)[:n]


class Both(App[None]):
    """A RowTable and a DataTable with the same columns and rows, as the overview configured it."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.selected: list[RowTable.CellSelected] = []

    def on_row_table_cell_selected(self, message: RowTable.CellSelected) -> None:
        self.selected.append(message)

    def compose(self) -> ComposeResult:
        yield RowTable(id="r")
        yield DataTable(id="d", cursor_type="cell", zebra_stripes=False)

    def on_mount(self) -> None:
        r, d = self.query_one(RowTable), self.query_one(DataTable)
        for key, label, width in COLUMNS:
            r.add_column(label, key=key, width=width)
            d.add_column(label, key=key, width=width)
        for key, cells in rows(self.n):
            r.add_row(*cells, key=key)
            d.add_row(*cells, key=key)


def cells_of(strip: Any) -> list[tuple[str, object]]:
    """Each character with the style a terminal would show (colours and attributes; meta left out)."""
    out: list[tuple[str, object]] = []
    for seg in strip:
        st = seg.style
        look = None if st is None else (st.color, st.bgcolor, st.bold, st.dim, st.italic, st.underline, st.reverse)
        out.extend((ch, look) for ch in seg.text)
    return out


@pytest.mark.parametrize("n", [3, 30], ids=["fits", "scrolls"])
async def test_every_cell_looks_as_a_datatable_draws_it(n: int) -> None:
    app = Both(n)
    async with app.run_test(size=(60, 24)) as pilot:
        await pilot.pause()
        r, d = app.query_one(RowTable), app.query_one(DataTable)
        assert r.size.height == d.size.height
        for cursor in (Coordinate(1, 1), Coordinate(2, 0), Coordinate(n - 1, 3)):
            r.move_cursor(row=cursor.row, column=cursor.column, animate=False)
            d.move_cursor(row=cursor.row, column=cursor.column, animate=False)
            await pilot.pause()
            assert r.scroll_offset == d.scroll_offset, (cursor, r.scroll_offset, d.scroll_offset)
            for focused in (True, False):  # each table drawn with the focus on it, then with none
                drawn = {}
                for table in (r, d):
                    app.set_focus(table if focused else None)
                    await pilot.pause()
                    assert table.has_focus is focused
                    drawn[table.id] = [cells_of(table.render_line(y)) for y in range(table.size.height)]
                for y, (a, b) in enumerate(zip(drawn["r"], drawn["d"], strict=True)):
                    assert a == b, (cursor, focused, y, "".join(c for c, _ in a), "".join(c for c, _ in b))


async def test_a_changed_cell_draws_its_row_only(monkeypatch: pytest.MonkeyPatch) -> None:
    app = Both(3)
    async with app.run_test(size=(60, 12)) as pilot:
        await pilot.pause()
        r = app.query_one(RowTable)
        before = [r.render_line(y).text for y in range(r.size.height)]
        drawn: list[list[Text]] = []
        real = r._draw_row

        def counting(cells: list[Text], cursor: int, width: int) -> Any:
            drawn.append(cells)
            return real(cells, cursor, width)

        monkeypatch.setattr(r, "_draw_row", counting)
        r.update_cell("c", "run", Text("987"))
        await pilot.pause()
        after = [r.render_line(y).text for y in range(r.size.height)]
        changed = [y for y, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        assert changed == [3] and "987" in after[3]
        assert [str(c[0]) for c in drawn] == ["trtllm-c…"], drawn  # row c, once; rows a and b from their lines
        assert str(r.get_cell("c", "run")) == "987"


async def test_keys_and_clicks_move_the_cursor_and_a_second_click_selects() -> None:
    app = Both(30)
    selected = app.selected
    async with app.run_test(size=(60, 24)) as pilot:
        await pilot.pause()
        r = app.query_one(RowTable)
        app.query_one(RowTable).focus()
        await pilot.press("down", "down", "right")
        assert r.cursor_coordinate == Coordinate(2, 1)
        await pilot.press("left", "left", "up", "up", "up")  # clamped at the first row and column
        assert r.cursor_coordinate == Coordinate(0, 0)
        await pilot.press("end")
        assert r.cursor_coordinate.row == 29 and r.scroll_offset.y > 0
        await pilot.press("home")
        assert r.cursor_coordinate.row == 0 and r.scroll_offset.y == 0
        await pilot.press("pagedown")
        assert r.cursor_coordinate.row == r.scrollable_content_region.height - 1
        await pilot.press("home")
        # The third row's KV cell: x past three columns of 14, 12 and 6 cells; y under the header.
        await pilot.click(RowTable, offset=(34, 3))
        assert r.cursor_coordinate == Coordinate(2, 3) and not selected
        await pilot.click(RowTable, offset=(34, 3))
        await pilot.pause()
        assert [(m.row_key, m.column_key, str(m.value)) for m in selected] == [("c", "kv", "--")]
        await pilot.click(RowTable, offset=(34, 0))  # the header selects nothing
        await pilot.pause()
        assert len(selected) == 1


async def test_rows_and_columns_are_checked() -> None:
    app = Both(3)
    async with app.run_test(size=(60, 12)) as pilot:
        await pilot.pause()
        r = app.query_one(RowTable)
        with pytest.raises(ValueError, match="already in the table"):
            r.add_row(Text("x"), Text("y"), Text("z"), Text("w"), key="a")
        with pytest.raises(ValueError, match="3 cells for 4 columns"):
            r.add_row(Text("x"), Text("y"), Text("z"), key="new")
        r.move_cursor(row=2, column=3)
        r.clear()
        await pilot.pause()
        assert r.row_count == 0 and r.cursor_coordinate == Coordinate(0, 3)
        assert r.size.height == 1  # the header alone
        assert r.render_line(1).text.strip() == ""


async def test_overview_opens_the_engine_clicked_twice(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        table = app.screen.query_one("#engines", RowTable)
        second = table.ordered_row_keys[1]
        await pilot.click("#engines", offset=(3, 2))
        await pilot.click("#engines", offset=(3, 2))
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen) and app.screen.selected_engine() == second


async def test_a_cell_too_long_for_its_column_ends_in_an_ellipsis() -> None:
    """Never a silent cut: "sglang@10.255.255.1:30000" cropped to 24 cells would read as port 3000."""

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RowTable()

        def on_mount(self) -> None:
            t = self.query_one(RowTable)
            t.add_column("engine", key="name", width=24)
            t.add_row(Text("sglang@10.255.255.1:30000"), key="a")
            t.add_row(Text.assemble(("sglang@", "bold"), "10.255.255.1:30000"), key="b")

    app = One()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        t = app.query_one(RowTable)
        lines = ["".join(ch for ch, _ in cells_of(t.render_line(y))) for y in (1, 2)]
    for line in lines:
        assert line.strip() == "sglang@10.255.255.1:300…", line
