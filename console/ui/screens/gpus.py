"""GPUs: every GPU with history for the selected one, and its processes attributed to engines."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid
from textual.widgets import DataTable, Static

from console.model import FleetSnapshot, GpuSnapshot
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.fleet_panels import GPU_COLUMNS, gpu_cells, gpu_columns_for, gpu_title, short_name
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.widgets.cell_table import CellTable
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.plot import CELSIUS, DEFAULT_WINDOW, PERCENT, WINDOWS, Series, Unit
from console.ui.widgets.timechart import TimeChart

# (history key, title, unit, explain key). HBM and power get their scale from the selected GPU.
GPU_CHARTS: tuple[tuple[str, str, Unit, str], ...] = (
    ("util", "utilisation", PERCENT, "gpu_util"),
    ("mem_used", "HBM used", Unit("%", lo=0.0, hi=100.0), "gpu_mem"),
    ("power", "power", Unit("W"), "gpu_power"),
    ("temperature", "temperature", CELSIUS, "gpu_temp"),
)


def gpu_unit(key: str, g: GpuSnapshot, unit: Unit) -> tuple[Unit, float | None]:
    """The chart's unit and fixed top for GPU ``g``: HBM as a share of its memory (0-100%), power
    from 0 to its limit; an unknown size or limit leaves the automatic scale."""
    if key == "mem_used":
        if g.mem_total_bytes:
            return Unit("%", factor=100.0 / g.mem_total_bytes, lo=0.0, hi=100.0), None
        return Unit("GiB", factor=1 / fmt.GIB), None
    if key == "power" and g.power_limit_w:
        return unit, g.power_limit_w
    return unit, None


class GpuScreen(DeckScreen):
    deck_name = "gpus"
    deck_title = "GPUs"

    def __init__(self, selected: str | None) -> None:
        super().__init__()
        self.selected = selected
        self._order: list[str] = []
        self._cells: dict[str, list[tuple[str, str]]] = {}
        self._proc_sig: list[list[str]] = []
        self._cols: list[int] = []  # GPU_COLUMNS shown (by index)
        self._proc_cols: list[tuple[str, str, int]] = []
        self.window = DEFAULT_WINDOW  # the charts' time window, seconds

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Static(id="gpu-title")
        t: DataTable[Text] = CellTable(id="gpu-list", cursor_type="cell")
        yield t
        yield Static(id="gpu-sel")
        with Grid(id="gpu-charts"):
            for key, title, unit, metric in GPU_CHARTS:
                c = TimeChart(title, unit, id=f"gchart-{key}", classes="chart")
                c.metric = metric
                yield c
        p: DataTable[Text] = CellTable(id="procs", cursor_type="row")
        yield p
        yield DeckFooter()

    def on_mount(self) -> None:
        self._fit_columns()
        self.query_one("#gpu-list", DataTable).focus()

    def on_resize(self) -> None:
        if self._fit_columns() and self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)

    def _fit_columns(self) -> bool:
        """Only the columns that fit the width (narrow terminals drop columns; nothing scrolls
        sideways or wraps). True when they changed."""
        width = (self.size.width or self.app.size.width) - 2  # the vertical scrollbar
        cols = gpu_columns_for(width)
        procs = proc_columns(width)
        if cols == self._cols and procs == self._proc_cols:
            return False
        self._cols, self._proc_cols = cols, procs
        t = self.query_one("#gpu-list", DataTable)
        t.clear(columns=True)
        for i in cols:
            key, label, w, _ = GPU_COLUMNS[i]
            t.add_column(label, key=key, width=w)
        p = self.query_one("#procs", DataTable)
        p.clear(columns=True)
        for key, label, w in procs:
            p.add_column(label, key=key, width=w)
        self._order, self._proc_sig = [], []  # refill
        return True

    def _current(self, fleet: FleetSnapshot) -> GpuSnapshot | None:
        if not fleet.gpus.gpus:
            return None
        t = self.query_one("#gpu-list", DataTable)
        if self._order and t.row_count:
            key = self._order[min(t.cursor_coordinate.row, len(self._order) - 1)]
        else:
            key = self.selected or str(fleet.gpus.gpus[0].index)
        return next((g for g in fleet.gpus.gpus if str(g.index) == key), fleet.gpus.gpus[0])

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        now = self.deck.clock()
        self.query_one("#gpu-title", Static).update(fmt.shown_text(gpu_title(fleet.gpus, now)))
        table: DataTable[Text] = self.query_one("#gpu-list", DataTable)
        engine_of = {i: e.name for e in fleet.engines for i in e.gpus}
        rows = {str(g.index): [c for i, c in enumerate(gpu_cells(g, engine_of)) if i in self._cols]
                for g in fleet.gpus.gpus}  # fmt: skip
        order = list(rows)
        if order != self._order:
            table.clear()
            for k in order:
                table.add_row(*rows[k], key=k)
            self._order = order
            self._cells = {k: [(c.plain, c.markup) for c in rows[k]] for k in order}
            if self.selected in order:
                table.move_cursor(row=order.index(self.selected), animate=False)
        else:
            for k in order:
                for i, c in enumerate(rows[k]):
                    sig = (c.plain, c.markup)
                    if self._cells[k][i] != sig:
                        self._cells[k][i] = sig
                        table.update_cell(k, GPU_COLUMNS[self._cols[i]][0], c)
        self._show_selected(fleet)

    def _show_selected(self, fleet: FleetSnapshot) -> None:
        g = self._current(fleet)
        sel = self.query_one("#gpu-sel", Static)
        procs: DataTable[Text] = self.query_one("#procs", DataTable)
        if g is None:
            sel.update(fmt.outside("no GPU to show: " + (fleet.gpus.unavailable_reason or "none found"), fmt.WARN))
            procs.clear()
            return
        head = Text(f"GPU {g.index} ", style="bold")
        head.append(g.name)
        head.append(f"  {g.uuid}", style="dim")
        if g.sm_clock_mhz is not None:
            head.append(f"  SM {g.sm_clock_mhz} MHz")
        if g.mem_clock_mhz is not None:
            head.append(f"  mem {g.mem_clock_mhz} MHz")
        if g.ecc_errors:
            head.append(f"  ECC errors {g.ecc_errors}", style=fmt.CRIT)
        if g.xid_errors:
            head.append("  XID " + ",".join(map(str, g.xid_errors)), style=fmt.CRIT)
        sel.update(fmt.shown_text(head))
        src = self.deck.source
        if src is not None:
            end = fleet.taken_at
            for key, title, unit, _metric in GPU_CHARTS:
                c = self.query_one(f"#gchart-{key}", TimeChart)
                scale_unit, top = gpu_unit(key, g, unit)
                hist = src.history.window((f"gpu:{g.index}", key), end, self.window)
                c.set_data([Series(title, hist)], end=end, window=self.window, unit=scale_unit, top=top)
        pids = {p: e.name for e in fleet.engines for p in e.pids}
        rows: list[list[Text]] = []
        shown = [key for key, _, _ in self._proc_cols]
        widths = {key: w for key, _, w in PROC_COLUMNS} | {key: w for key, _, w in self._proc_cols}
        for p in g.processes:
            engine = p.engine or pids.get(p.pid)
            cells = {
                "pid": Text(str(p.pid)),
                "name": Text(p.name or "?"),
                "used": Text(f"{p.used_bytes / fmt.GIB:.1f} GiB") if p.used_bytes is not None else fmt.na(),
                "container": Text(p.container or "-", style="dim" if not p.container else ""),
                "engine": Text(short_name(engine)) if engine else Text("unattributed", style=fmt.WARN),
            }
            # The table crops a long cell silently: an engine's name keeps its head and tail, the rest end in "…".
            cells["engine"].plain = fmt.fit_name(cells["engine"].plain, widths["engine"])
            for k in ("name", "container"):
                cells[k].truncate(widths[k], overflow="ellipsis")
            rows.append([cells[k] for k in shown])
        if not g.processes:
            rows.append([Text("no compute processes reported", style="dim") if k == "name" else Text("-" if k == "pid"
                         else "") for k in shown])  # fmt: skip
        sig = [[c.markup for c in r] for r in rows]
        if sig != self._proc_sig:
            self._proc_sig = sig
            procs.clear()
            for r in rows:
                procs.add_row(*r)

    @on(DataTable.RowHighlighted, "#gpu-list")
    def _row(self) -> None:
        if self.deck.fleet is not None:
            self._show_selected(self.deck.fleet)

    def step_window(self, step: int) -> None:
        spans = [s for s, _ in WINDOWS]
        i = spans.index(self.window) if self.window in spans else 1
        self.window = spans[(i + step) % len(spans)]
        if self.deck.fleet is not None:
            self._show_selected(self.deck.fleet)

    def selected_engine(self) -> str | None:
        fleet = self.deck.fleet
        g = self._current(fleet) if fleet else None
        if g is None or fleet is None:
            return None
        owners = [e.name for e in fleet.engines if g.index in e.gpus]
        return owners[0] if owners else None

    def explain_target(self) -> tuple[str, str | None]:
        t = self.query_one("#gpu-list", DataTable)
        col = self._cols[min(t.cursor_coordinate.column, len(self._cols) - 1)] if self._cols else 0
        return (GPU_COLUMNS[col][3], self.selected_engine())


# The processes table: (key, label, width); the container goes first when narrow, then the process
# name shrinks.
PROC_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("pid", "PID", 8), ("name", "process", 24), ("used", "HBM", 10), ("container", "container", 16),
    ("engine", "engine", 18),
)


def proc_columns(width: int) -> list[tuple[str, str, int]]:
    cols = list(PROC_COLUMNS)
    if sum(w + 2 for _, _, w in cols) > width:
        cols = [c for c in cols if c[0] != "container"]
    over = sum(w + 2 for _, _, w in cols) - width
    if over > 0:
        cols = [(k, label, max(8, w - over)) if k == "name" else (k, label, w) for k, label, w in cols]
    return cols


def _screen(app: DeckHost, target: str | None) -> GpuScreen:
    return GpuScreen(target)


ACTIONS: Sequence[Action] = ()

register_screen(ScreenSpec("gpus", "GPUs", _screen, tuple(ACTIONS), kept=True))
