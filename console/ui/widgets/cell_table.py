"""A DataTable that re-renders only the cells whose value changed.

Textual's ``DataTable.update_cell`` bumps one table-wide counter that is part of every cell's cache
key, so changing one cell renders every cell of the table again. The overview changes a few cells
of each row every refresh; here a cell's cache key carries that cell's own version instead, and an
unchanged cell is taken from the cache. Everything else (cursor, hover, focus, styles, widths,
rows added, removed or sorted, a header label) keys or clears the cache as before.

The caches are sized to the table. DataTable's own caches (10,000 cells, 1,000 rows and lines) are
keyed by that table-wide counter, so here each refresh makes all their entries dead, and they would
fill to their bounds over minutes (megabytes even on a small table; docs/performance.md). What they can
still hit is the current state's visible lines, so they hold a few times the table's lines, and the
cell cache here a few versions of each cell.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.widgets import DataTable
from textual.widgets.data_table import CellType, ColumnKey, RowKey

from console.ui.format import shown_text

CellKey = tuple[object, ...]


def safe_cell(value: Any) -> Any:
    """A cell as a table may show it: a string becomes ``Text`` (DataTable parses a string as markup,
    so ``[link=...]`` from an engine would act), and every text is made inert (format.shown_text)."""
    if isinstance(value, str):
        return shown_text(Text(value))
    if isinstance(value, Text):
        return shown_text(value)
    return value


class CellTable(DataTable[CellType]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._versions: dict[tuple[RowKey | None, ColumnKey | None], int] = {}
        self._generation = 0  # bumped by any change other than one cell's value
        self._cells: LRUCache[CellKey, list[Any]] = LRUCache(10_000)
        # DataTable bumps _update_count on every change: one not made by update_cell here (rows
        # added, removed, sorted, columns) starts a new generation at the next render.
        self._seen_count = self._update_count
        self._cache_cells = 0
        self._fit_caches()

    def _new_generation(self) -> None:
        self._generation += 1
        self._versions.clear()
        self._cells.clear()
        self._fit_caches()

    def _fit_caches(self) -> None:
        """Bound every cache by the table's size (they only grow: a table that shrank keeps its room)."""
        lines = self.row_count + 2  # rows of height 1, the header, a spare
        size = max(32, 2 * lines)
        cells = size * max(1, len(self.columns))
        if cells <= self._cache_cells:
            return
        self._cache_cells = cells
        # Textual's caches, keyed by its counter: the visible lines of the state on screen and the
        # one before. Its cell cache is written by every render of a cell here, and read by none.
        self._row_render_cache = LRUCache(size)
        self._row_renderable_cache = LRUCache(size)
        self._line_cache = LRUCache(size)
        self._cell_render_cache = LRUCache(cells)
        self._cells = LRUCache(2 * cells)

    def add_column(self, label: Any, *, width: int | None = None, key: str | None = None,
                   default: Any = None) -> ColumnKey:
        return super().add_column(safe_cell(label), width=width, key=key, default=default)

    def add_row(self, *cells: CellType, height: int | None = 1, key: str | None = None,
                label: Any = None) -> RowKey:
        return super().add_row(*(safe_cell(c) for c in cells), height=height, key=key, label=label)

    def update_cell(self, row_key: RowKey | str, column_key: ColumnKey | str, value: CellType, *,
                    update_width: bool = False) -> None:
        before = self._update_count
        super().update_cell(row_key, column_key, safe_cell(value), update_width=update_width)
        if before == self._seen_count:
            self._seen_count = self._update_count
        key = (RowKey(row_key) if isinstance(row_key, str) else row_key,
               ColumnKey(column_key) if isinstance(column_key, str) else column_key)
        self._versions[key] = self._versions.get(key, 0) + 1
        if update_width:
            self._new_generation()

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._new_generation()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._new_generation()

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> Any:
        if column_index < 0:  # row labels (the overview has none): as DataTable does
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        if self._update_count != self._seen_count:
            self._new_generation()
            self._seen_count = self._update_count
        column_key = self._column_locations.get_key(column_index)
        version: object
        if row_index < 0:  # the header: its label is set directly (the sort arrow), so it is the version
            row_key = None
            version = self.columns[column_key].label.markup if column_key in self.columns else None
        else:
            row_key = self._row_locations.get_key(row_index)
            version = self._versions.get((row_key, column_key), 0)
        key: CellKey = (
            row_index, column_index, row_key, column_key, version,
            self._generation, base_style, width, cursor, hover, self._show_hover_cursor, self.show_cursor,
            self._pseudo_class_state, self.fixed_rows, self.fixed_columns,
        )
        lines = self._cells.get(key)
        if lines is None:
            lines = super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
            self._cells[key] = lines
        return lines
