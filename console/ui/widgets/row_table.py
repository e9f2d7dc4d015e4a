"""A table drawn a row at a time on Textual's line API: a cell change repaints that row's line only.

Textual's DataTable keys every cache by one table-wide counter, so one changed cell re-renders every
visible line, each cell through Rich's console (padding, styling, cropping), on every refresh. The
overview changes a few cells of most rows every second, and at 64 engines that was the largest cost
of the console's frame. Here each row keeps its drawn line (a ``Strip``) until one of its cells, the
cursor on it, the focus, the width or the styles change, and a cell that fits with a single style
becomes one segment without Rich's renderer. It looks like a DataTable (the same component styles:
header, cursor, blurred cursor) and keeps the parts the overview uses: a cell cursor moved by the
arrow keys, paging and the mouse, a fixed header, vertical scrolling, and ``CellSelected`` on a
click of the highlighted cell. Enter is left to the action registry (the screen's "open" action).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.coordinate import Coordinate
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.ui.format import shown_text


@dataclass
class TableColumn:
    """A column: its key, its header label and its width in cells (without the one-cell padding)."""

    key: str
    label: Text
    width: int

    @property
    def render_width(self) -> int:
        return self.width + 2 * RowTable.CELL_PADDING


class RowTable(ScrollView, can_focus=True):
    """Rows of ``Text`` cells under a fixed header; see the module's docstring. Every cell and label
    goes through ``format.shown_text`` (credentials masked, controls and escapes inert) as it comes in."""

    CELL_PADDING = 1

    COMPONENT_CLASSES: ClassVar[set[str]] = {"row-table--header", "row-table--cursor"}

    # DataTable's look (its DEFAULT_CSS for these parts), so the overview reads as before.
    DEFAULT_CSS = """
    RowTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .row-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .row-table--header {
                background-tint: $foreground 5%;
            }
        }
        & > .row-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .row-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .row-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "cursor_right", "Cursor right", show=False),
        Binding("left", "cursor_left", "Cursor left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "cursor_home", "First row", show=False),
        Binding("end", "cursor_end", "Last row", show=False),
    ]

    class CellSelected(Message):
        """A click on the highlighted cell."""

        def __init__(self, table: RowTable, row_key: str, column_key: str, value: Text) -> None:
            super().__init__()
            self.table = table
            self.row_key = row_key
            self.column_key = column_key
            self.value = value

        @property
        def control(self) -> RowTable:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns: dict[str, TableColumn] = {}
        self._order: list[str] = []  # row keys, top to bottom
        self._index: dict[str, int] = {}
        self._cells: dict[str, list[Text]] = {}
        self._versions: dict[str, int] = {}  # bumped by each change of one of the row's cells
        self._drawn: dict[str, tuple[tuple[object, ...], Strip]] = {}  # row -> (what it was drawn for, line)
        self._header: tuple[tuple[object, ...], Strip] | None = None
        self._styles_seen = 0  # bumped on a style change: every drawn line is stale
        self._cursor = Coordinate(0, 0)

    # -- contents ------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def ordered_row_keys(self) -> list[str]:
        return list(self._order)

    def add_column(self, label: Text | str, *, key: str, width: int) -> None:
        self.columns[key] = TableColumn(key, shown_text(Text(label) if isinstance(label, str) else label), width)
        self._cells = {k: [*v, Text()] for k, v in self._cells.items()}
        self._changed_shape()

    def set_label(self, key: str, label: Text) -> None:
        """A column's header label (the sort arrow)."""
        self.columns[key].label = shown_text(label)
        self._header = None
        self.refresh_line(self.scroll_offset.y)  # the header is the first line on screen

    def add_row(self, *cells: Text, key: str) -> None:
        if key in self._index:
            raise ValueError(f"row {key!r} is already in the table")
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self._index[key] = len(self._order)
        self._order.append(key)
        # Every cell is outside text until shown otherwise: made inert here, before it is measured.
        self._cells[key] = [shown_text(c) for c in cells]
        self._versions[key] = 0
        self._changed_shape()

    def clear(self, columns: bool = False) -> None:
        self._order.clear()
        self._index.clear()
        self._cells.clear()
        self._versions.clear()
        self._drawn.clear()
        if columns:
            self.columns.clear()
        self._cursor = Coordinate(0, min(self._cursor.column, max(0, len(self.columns) - 1)))
        self.scroll_to(y=0, animate=False)
        self._changed_shape()

    def update_cell(self, row_key: str, column_key: str, value: Text) -> None:
        i = self._column_index(column_key)
        self._cells[row_key][i] = shown_text(value)
        self._versions[row_key] += 1
        self._refresh_row(self._index[row_key])

    def get_cell(self, row_key: str, column_key: str) -> Text:
        return self._cells[row_key][self._column_index(column_key)]

    def get_row(self, row_key: str) -> list[Text]:
        return list(self._cells[row_key])

    def get_row_at(self, row_index: int) -> list[Text]:
        return self.get_row(self._order[row_index])

    def get_cell_at(self, coordinate: Coordinate) -> Text:
        return self._cells[self._order[coordinate.row]][coordinate.column]

    def _column_index(self, key: str) -> int:
        for i, k in enumerate(self.columns):
            if k == key:
                return i
        raise KeyError(key)

    def _changed_shape(self) -> None:
        """Rows or columns came or went: a new size (the widget's height follows its rows)."""
        width = sum(c.render_width for c in self.columns.values())
        self.virtual_size = Size(width, 1 + len(self._order))
        self._header = None
        self._clamp_cursor()
        self.refresh(layout=True)

    # -- the cursor ----------------------------------------------------------------------------

    @property
    def cursor_coordinate(self) -> Coordinate:
        return self._cursor

    @cursor_coordinate.setter
    def cursor_coordinate(self, value: Coordinate) -> None:
        self.move_cursor(row=value.row, column=value.column)

    def move_cursor(self, *, row: int | None = None, column: int | None = None, animate: bool = False) -> None:
        old = self._cursor
        self._cursor = Coordinate(old.row if row is None else row, old.column if column is None else column)
        self._clamp_cursor()
        if self._cursor != old:
            self._refresh_row(old.row)
            self._refresh_row(self._cursor.row)
        self._scroll_to_cursor(animate)

    def _clamp_cursor(self) -> None:
        row = max(0, min(self._cursor.row, len(self._order) - 1))
        column = max(0, min(self._cursor.column, len(self.columns) - 1))
        self._cursor = Coordinate(row, column)

    def _scroll_to_cursor(self, animate: bool = False) -> None:
        rows_shown = max(1, self.scrollable_content_region.height - 1)  # under the header
        top = round(self.scroll_offset.y)
        row = self._cursor.row
        if row < top:
            self.scroll_to(y=row, animate=animate)
        elif row >= top + rows_shown:
            self.scroll_to(y=row - rows_shown + 1, animate=animate)

    def action_cursor_up(self) -> None:
        self.move_cursor(row=self._cursor.row - 1)

    def action_cursor_down(self) -> None:
        self.move_cursor(row=self._cursor.row + 1)

    def action_cursor_left(self) -> None:
        self.move_cursor(column=self._cursor.column - 1)

    def action_cursor_right(self) -> None:
        self.move_cursor(column=self._cursor.column + 1)

    def action_page_up(self) -> None:
        self.move_cursor(row=self._cursor.row - max(1, self.scrollable_content_region.height - 1))

    def action_page_down(self) -> None:
        self.move_cursor(row=self._cursor.row + max(1, self.scrollable_content_region.height - 1))

    def action_cursor_home(self) -> None:
        self.move_cursor(row=0)

    def action_cursor_end(self) -> None:
        self.move_cursor(row=len(self._order) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0 or not self._order:  # the header: nothing to select
            return
        row = round(self.scroll_offset.y) + offset.y - 1
        x = offset.x + round(self.scroll_offset.x)
        column, edge = None, 0
        for i, c in enumerate(self.columns.values()):
            edge += c.render_width
            if x < edge:
                column = i
                break
        if row >= len(self._order) or column is None:
            return
        if Coordinate(row, column) == self._cursor:
            key = self._order[row]
            self.post_message(self.CellSelected(self, key, list(self.columns)[column], self._cells[key][column]))
        else:
            self.move_cursor(row=row, column=column)

    # -- drawing -------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles_seen += 1

    def _refresh_row(self, index: int) -> None:
        top = round(self.scroll_offset.y)
        if 0 <= index < len(self._order) and top <= index < top + self.size.height - 1:
            self.refresh_line(1 + index)  # refresh_line subtracts the scroll offset

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = round(self.scroll_offset.x), round(self.scroll_offset.y)
        state = (self.has_focus, self._styles_seen, width)
        if y == 0:
            if self._header is None or self._header[0] != state:
                self._header = (state, self._draw_header(width))
            line = self._header[1]
        else:
            index = scroll_y + y - 1
            if index >= len(self._order):
                return Strip.blank(width, self.rich_style)
            key = self._order[index]
            cursor = self._cursor.column if index == self._cursor.row else -1
            stamp = (*state, self._versions[key], cursor)
            drawn = self._drawn.get(key)
            if drawn is None or drawn[0] != stamp:
                drawn = self._drawn[key] = (stamp, self._draw_row(self._cells[key], cursor, width))
            line = drawn[1]
        return line.crop(scroll_x, scroll_x + width) if scroll_x or line.cell_length > width else line

    def _draw_header(self, width: int) -> Strip:
        style = self.get_component_rich_style("row-table--header")
        segments: list[Segment] = []
        for c in self.columns.values():
            segments += self._cell(c.label, c.width, style)
        return self._finish(segments, width, style)

    def _draw_row(self, cells: list[Text], cursor: int, width: int) -> Strip:
        base = self.rich_style
        cursor_style = base + self.get_component_rich_style("row-table--cursor") if cursor >= 0 else base
        segments: list[Segment] = []
        for i, (c, text) in enumerate(zip(self.columns.values(), cells, strict=True)):
            segments += self._cell(text, c.width, cursor_style if i == cursor else base, post=i == cursor)
        return self._finish(segments, width, base)

    def _finish(self, segments: list[Segment], width: int, row_style: Style) -> Strip:
        """The row's cells, then the rest of the line in the row's colours faded a quarter into the
        background (as DataTable extends a row)."""
        used = sum(c.render_width for c in self.columns.values())
        if used < width:
            fill = Style.from_color(row_style.color, row_style.bgcolor)
            if row_style.bgcolor is not None:
                faded = Color.from_rich_color(row_style.bgcolor).blend(self.background_colors[1], factor=0.25)
                fill = Style.from_color(row_style.color, faded.rich_color)
            segments.append(Segment(" " * (width - used), fill))
        return Strip(segments, max(used, width))

    def _cell(self, text: Text, width: int, base: Style, post: bool = False) -> list[Segment]:
        """One cell, padded to ``width`` plus a space each side, cropped like a DataTable cell of
        height 1 (no wrapping). Under the cursor (``post``) the cursor's text colour wins over the cell's
        and the cell's own background (an alert's row tint) over the cursor's, as in a DataTable."""
        pad = Segment(" " * self.CELL_PADDING, base)
        plain = text.plain
        console = self.app.console
        if not text.spans and "\n" not in plain and cell_len(plain) <= width:
            style = base + console.get_style(text.style) if text.style else base
            if post:
                style += Style.from_color(base.color)
            body = [Segment(plain, style)]
            used = cell_len(plain)
        else:
            line = text.split()[0] if "\n" in plain else text.copy()
            # Never a silent cut: a cell that does not fit ends in "…" unless it asks otherwise.
            line.truncate(width, overflow=text.overflow or "ellipsis")
            body = list(Segment.apply_style(line.render(console), base))
            if post:
                body = list(Segment.apply_style(body, post_style=Style.from_color(base.color)))
            used = line.cell_len
        room = " " * (width - used)
        justify = text.justify or "left"
        if justify == "right":
            return [pad, Segment(room, base), *body, pad]
        if justify == "center":
            left = (width - used) // 2
            return [pad, Segment(" " * left, base), *body, Segment(" " * (width - used - left), base), pad]
        return [pad, *body, Segment(room, base), pad]
