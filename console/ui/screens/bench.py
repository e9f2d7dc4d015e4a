"""Bench screen: run a small A/B benchmark in its own process, with live progress and the table.

The load runs in a child process (``console.client.bench.run_in_subprocess``) driven from a
worker thread, so the UI never distorts the timings; progress events arrive at most 10 times a
second and are handed to the UI thread with ``call_from_thread``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Grid
from textual.widget import Widget
from textual.widgets import DataTable, Input, Label, Static

from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.host import DeckHost
from console.ui.messages import BenchDone, BenchProgress, BenchReady, BenchStopped
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar, console_engines
from console.ui.widgets.cell_table import CellTable
from console.ui.widgets.footer import DeckFooter

if TYPE_CHECKING:
    from console.client.bench import BenchConfig, Verdict
    from console.client.report import ComparisonRow

PROGRESS_ROWS = 8  # progress lines kept on show where the layout does not cap them
# B/A coloured by its verdict; the glyph and the word say the same without colour. With NO_COLOR
# (greys only) a worse result stands out in bold.
VERDICT_STYLE: dict[str, str] = (
    {"better": "", "worse": "bold", "same": "dim"} if fmt.MONO
    else {"better": "green", "worse": "bold red", "same": "dim"}
)

# (label, default, placeholder, id): the form, in reading order (two rows of three).
FORM: tuple[tuple[str, str, str, str], ...] = (
    ("engines", "", "A,B", "bench-engines"),
    ("concurrency", "1,8", "1,8", "bench-conc"),
    ("prompts/level", "32", "32", "bench-n"),
    ("input tokens", "128", "128", "bench-in"),
    ("output tokens", "64", "64", "bench-out"),
    ("workload", "random", "random|shared-prefix", "bench-workload"),
)


class BenchScreen(DeckScreen):
    deck_name = "bench"
    deck_title = "Bench"
    # Never open (or come back) with the focus in a text box: its letters would be the box's.
    AUTO_FOCUS = "#bench-table"

    # A labelled form of one-line fields (two rows), then progress, the results, notes. At 80x24
    # layouts/compact.tcss caps progress and notes so the results get the rows.
    DEFAULT_CSS = """
    BenchScreen #bench-form { height: 2; grid-size: 6 2; grid-columns: auto 2fr auto 1fr auto 1fr; }
    BenchScreen #bench-form Label { width: 100%; padding: 0 1; text-align: right; color: $text-muted; }
    BenchScreen #bench-form Input { height: 1; border: none; padding: 0 1; background: $boost; }
    BenchScreen #bench-progress { height: auto; max-height: 8; padding: 0 1; }
    BenchScreen #bench-table { height: 1fr; }
    BenchScreen #bench-notes { height: auto; max-height: 6; padding: 0 1; }
    """

    def compare_pair(self) -> tuple[str, str] | None:
        """The bench's first two engines (c compares their charts)."""
        names = [n.strip() for n in self.query_one("#bench-engines", Input).value.split(",") if n.strip()]
        return (names[0], names[1]) if len(names) >= 2 else None

    def __init__(self, app: DeckHost) -> None:
        super().__init__()
        self.doc: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._bench_running = False
        self._progress: list[str] = []
        self._live_line: int | None = None  # the progress line a level's counts rewrite in place
        self._plan = ""  # what each level runs, said when the engines are ready
        self._notes: dict[str, list[str]] = {}  # level label -> its notes
        self._table_layout: TableLayout | None = None
        names = [e.name for e in console_engines(app, forward=False)][:2]
        self._default_engines = ",".join(names)

    def compose(self) -> ComposeResult:
        yield TopBar()
        with Grid(id="bench-form"):
            for label, value, hint, wid in FORM:
                yield Label(label)
                yield Input(value=self._default_engines if wid == "bench-engines" else value, placeholder=hint, id=wid)
        yield Static("r (or F9) runs each engine in turn at every level, x (F10) stops, s saves the results",
                     id="bench-progress")
        t: DataTable[str] = CellTable(id="bench-table", cursor_type="row")
        yield t
        yield Static(id="bench-notes")
        yield DeckFooter()

    def home_focus(self) -> Widget:
        """Where Escape from a form field puts the focus."""
        return self.query_one("#bench-table", DataTable)

    def focus_form(self) -> None:
        self.set_focus(self.query_one("#bench-engines", Input))  # at once: the keys typed next are the form's

    def _config(self) -> BenchConfig:
        from console.client.bench import BenchConfig
        from console.client.loadgen import LevelSpec
        from console.client.stream import GenParams
        from console.client.workloads import WorkloadSpec

        def val(id_: str) -> str:
            return self.query_one(f"#{id_}", Input).value.strip()

        known = {e.name: e for e in console_engines(self.deck)}
        names = [n.strip() for n in val("bench-engines").split(",") if n.strip()]
        missing = [n for n in names if n not in known]
        if not names or missing:
            raise ValueError(f"unknown engine(s): {', '.join(missing) or '(none given)'}; known: {', '.join(known)}")
        try:
            conc = sorted({int(x) for x in val("bench-conc").split(",") if x.strip()})
            n, il, ol = int(val("bench-n")), int(val("bench-in")), int(val("bench-out"))
        except ValueError:
            raise ValueError("concurrency, prompts and lengths must be whole numbers") from None
        if not conc or min(conc) < 1 or n < 1 or il < 1 or ol < 1:
            raise ValueError("concurrency, prompts and lengths must be >= 1")
        workload = WorkloadSpec(kind=val("bench-workload") or "random", input_len=il, output_len=ol)
        if workload.kind not in ("random", "shared-prefix"):
            raise ValueError("workload: random or shared-prefix")
        return BenchConfig(
            engines=tuple(known[x] for x in names),
            levels=tuple(LevelSpec("closed", c, num_prompts=n) for c in conc),
            workload=workload, params=GenParams(max_tokens=ol, fixed_length=True),
            # The same GPU source the console watches: simulated in the demo, NVML elsewhere.
            gpu=self._gpu_source(),
        )  # fmt: skip

    def _gpu_source(self) -> str:
        fleet = self.deck.fleet
        if fleet is None:
            return "none"
        gpus = fleet.gpus
        if gpus.source == "simulated":
            return "simulated"
        return "nvml" if gpus.source == "nvml" and not gpus.unavailable_reason else "none"

    def start(self) -> None:
        from console.client.bench import plan_line

        if self._bench_running:
            self.notify("a benchmark is already running", severity="warning")
            return
        try:
            cfg = self._config()
        except ValueError as exc:
            # Said where the run would show too: a notice goes away, the reason it did not start stays.
            self.query_one("#bench-progress", Static).update(fmt.outside(f"not started: {exc}", "bold red"))
            self.notify(str(exc), severity="error")
            return
        self._stop.clear()
        self._progress = []
        self._live_line = None
        self._plan = plan_line(cfg)
        self._bench_running = True
        self._run(cfg)

    def stop(self) -> None:
        if self._bench_running:
            self._stop.set()

    def on_unmount(self) -> None:
        # The screen is gone for good (the console quits, or more screens were kept than it keeps):
        # its run must not go on loading the engines with nobody to see it.
        self._stop.set()

    @work(thread=True, exclusive=True, group="bench")
    def _run(self, cfg: BenchConfig) -> None:
        import asyncio

        from console.client.bench import BenchFailed, check_ready, run_in_subprocess
        from console.transport.http import HTTPError

        # Worker thread: the results go to the screen as messages (post_message is thread-safe).
        try:
            models = asyncio.run(check_ready(cfg.engines))
            self.post_message(BenchReady(models))
            doc = run_in_subprocess(cfg, models, lambda ev: self.post_message(BenchProgress(ev)),
                                    should_stop=self._stop.is_set, quiet=True)  # fmt: skip
        except (HTTPError, BenchFailed) as exc:
            self.post_message(BenchStopped(str(exc)))
            return
        finally:
            self._bench_running = False
        self.post_message(BenchDone(doc))

    @on(BenchReady)
    def _on_ready(self, message: BenchReady) -> None:
        self._progress.append(f"ready: models {', '.join(message.models)}" + (f" · {self._plan}" if self._plan else ""))
        self._show_progress()

    @on(BenchProgress)
    def _on_progress(self, message: BenchProgress) -> None:
        from console.client.progress import LevelDone, LevelProgress, RunStarted

        ev = message.event
        if isinstance(ev, LevelProgress):
            # The measured count against prompts/level, the warmup apart: "C=1: 2/32 (+1 warmup)".
            line = f"   {ev.engine} {ev.level}: {ev.counts()}, {fmt.plural(ev.errors, 'error')}"
            if self._live_line is not None and self._live_line == len(self._progress) - 1:
                self._progress[-1] = line
            else:
                self._progress.append(line)
                self._live_line = len(self._progress) - 1
        else:
            self._live_line = None
            if isinstance(ev, RunStarted):
                self._progress.append(f"[{ev.position + 1}/{ev.of}] {ev.engine} (repeat {ev.repeat + 1})")
            elif isinstance(ev, LevelDone):
                ttft = ev.ttft_p50_ms
                self._progress.append(
                    f"   {ev.level}: {ev.completed} ok, {ev.failed} failed"
                    + (f", {ev.cut} cut at max duration" if ev.cut else "")
                    + (f", TTFT p50 {ttft:.1f} ms" if ttft is not None else "")
                )
        self._show_progress()

    def _show_progress(self) -> None:
        """The newest progress lines that fit the log's rows (3 at 80x24, 8 elsewhere): it follows the
        run to its end, as a log does."""
        w = self.query_one("#bench-progress", Static)
        cap = w.styles.max_height
        rows = int(cap.value) if cap is not None and cap.is_cells else PROGRESS_ROWS
        width = max(20, w.content_region.width or self.app.size.width - 2)
        shown: list[str] = []
        used = 0
        # Each line as text (never markup: "[1/3]" and an engine's error body show as they are), inert
        # before its wrapped rows are counted.
        for line in reversed([fmt.shown(x) for x in self._progress[-PROGRESS_ROWS:]]):
            need = max(1, -(-cell_len(line) // width))  # the rows it wraps to
            if shown and used + need > rows:
                break
            shown.insert(0, line)
            used += need
        w.update(Text("\n".join(shown)))

    def on_resize(self) -> None:
        if self._progress:
            # After the layout for the new size (80x24 caps the log's rows) is applied.
            self.call_after_refresh(self._show_progress)
        if self.doc is not None:
            self.call_after_refresh(self._refit_table)

    def _refit_table(self) -> None:
        """A new width may fit another arrangement (levels side by side, B/A with or without words)."""
        if self.doc is not None and self._pick_layout(self.doc) != self._table_layout:
            self._fill_table(self.doc)

    @on(BenchStopped)
    def _on_failed(self, message: BenchStopped) -> None:
        self.query_one("#bench-progress", Static).update(
            fmt.outside(f"benchmark failed: {message.reason}", "bold red"))

    @on(BenchDone)
    def _on_bench_done(self, message: BenchDone) -> None:
        self._on_done(message.doc)

    def _on_done(self, doc: dict[str, Any]) -> None:
        from console.client.bench import SAME_BAND
        from console.client.report import column_labels

        self.doc = doc
        names = doc["summary"]["engines"]
        labels = column_labels(doc)
        self._fill_table(doc)
        t = self.query_one("#bench-table", DataTable)
        t.focus()
        ratio = (f"B/A = {labels[1]} ÷ {labels[0]}: ▲ better ▼ worse ≈ within {SAME_BAND:.0%} · "
                 if len(names) >= 2 else "")
        self._live_line = None
        self._progress.append(f"done · {ratio}s saves JSON and Markdown · e explains the row")
        self._show_progress()

    def _pick_layout(self, doc: dict[str, Any]) -> TableLayout:
        t = self.query_one("#bench-table", DataTable)
        # The room inside the table, its vertical scrollbar kept free (shown as soon as rows overflow).
        width = (t.size.width or self.app.size.width) - t.styles.scrollbar_size_vertical
        return pick_layout(result_columns(doc), width)

    def _fill_table(self, doc: dict[str, Any]) -> None:
        """The results in the arrangement the table's width fits: every level side by side (one row
        per metric) where they fit, else one block per level; B/A with its word where it fits."""
        from console.client.report import comparison_rows, level_notes

        names = doc["summary"]["engines"]
        layout = self._pick_layout(doc)
        self._table_layout = layout
        cols = result_columns(doc)
        t = self.query_one("#bench-table", DataTable)
        keep = _row_key(t)
        t.clear(columns=True)
        widths = iter(layout.widths)
        t.header_height = 2 if layout.side else 1
        metric = t.add_column("metric", key="metric", width=next(widths))
        if layout.side:
            t.columns[metric].label = Text("\nmetric")
        levels = doc["summary"]["levels"]
        groups = levels if layout.side else levels[:1]
        for gi, level in enumerate(groups):
            if layout.side and layout.rules and gi:
                rule = t.add_column("│", key=f"rule{gi}", width=next(widths))
                t.columns[rule].label = Text("│\n│", style="dim")
            for ci, lab in enumerate(cols.labels):
                w = next(widths)
                top = level["label"] if layout.side and ci == 0 else ""
                # "B/A", not "sglang-sim/vllm-sim": two names do not fit 80 columns beside the metric;
                # the progress line says which engine is B and which A.
                key = t.add_column(lab, key=f"{level['label']}|{lab}|{ci}", width=w)
                # Set here, not through add_column, which makes a title one line: two lines side by
                # side (the level over the engines), each made safe already.
                t.columns[key].label = _header(top, lab, w, layout.side)
        by_level = [comparison_rows(level, names) for level in levels]
        self._notes = {level["label"]: level_notes(doc, level) for level in levels}
        if layout.side:
            for rows_at_levels in _by_metric(by_level):
                first = next(r for r in rows_at_levels if r is not None)
                cells: list[Any] = [first.label]
                for gi, row in enumerate(rows_at_levels):
                    if layout.rules and gi:
                        cells.append(Text("│", style="dim"))
                    cells.extend(_cells(row, len(cols.labels), layout.words))
                t.add_row(*cells, key=f"|{first.key}")
        else:
            for level, rows in zip(levels, by_level, strict=True):
                # The level once, where it starts, ruled across the metric column: the table reads as
                # one block per level, also without colour.
                name = fmt.shown(level["label"])
                heading = Text(name, style="bold").append(" " + "─" * (layout.widths[0] - cell_len(name) - 1), "dim")
                t.add_row(heading, *([""] * len(cols.labels)), key=f"{level['label']}|")
                for row in rows:
                    t.add_row(row.label, *_cells(row, len(cols.labels), layout.words),
                              key=f"{level['label']}|{row.key}")  # fmt: skip
        _restore_row(t, keep)
        self._show_notes()

    def _show_notes(self) -> None:
        """The notes (client-bound, length mode, engine metrics n/a...) of the level under the cursor;
        with the levels side by side, of every level (a note they all share said once)."""
        t = self.query_one("#bench-table", DataTable)
        level = ""
        if t.row_count:
            level = str(_row_key(t) or "").split("|", 1)[0]
        lines = [f"{level}: {n}" for n in self._notes.get(level, [])] if level else shared_notes(self._notes)
        self.query_one("#bench-notes", Static).update(fmt.outside("\n".join(lines), multiline=True))

    @on(DataTable.RowHighlighted, "#bench-table")
    def _row(self) -> None:
        self._show_notes()

    def save(self) -> None:
        """Write the results as JSON and Markdown (secrets scrubbed, as `enginedeck bench` does) into
        the results folder (``[console] bench_dir``, ``$ENGINEDECK_BENCH_DIR``, else the state folder's
        ``bench``: never the folder the console happened to start in) and say where."""
        if self.doc is None:
            self.notify("nothing to save yet: run a benchmark first (r)", severity="warning")
            return
        from console.client.report import save_results

        try:
            paths = save_results(self.doc, bench_folder(self.deck.options.bench_dir))
        except OSError as exc:
            self.notify(f"could not save the results: {exc}", severity="error", timeout=15)
            return
        msg = f"saved {paths[0]} and {paths[1].name}"
        self._live_line = None
        self._progress.append(msg)
        self._show_progress()
        self.notify(msg, timeout=15)

    def explain_target(self) -> tuple[str, str | None]:
        t = self.query_one("#bench-table", DataTable)
        if self.doc is None or t.row_count == 0:
            return ("bench:", None)
        key = t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value or ""
        return ("bench:" + str(key).split("|", 1)[-1], None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.start()


def bench_folder(configured: str | None) -> Path:
    """Where `s` saves: ``$ENGINEDECK_BENCH_DIR``, else ``[console] bench_dir``, else the state folder's ``bench``."""
    from console.paths import bench_results_dir

    return bench_results_dir(configured)


@dataclass(frozen=True, slots=True)
class ResultColumns:
    """What the results table must hold, measured: one column per engine and B/A (two engines or more)."""

    labels: tuple[str, ...]  # engine column titles, then "B/A"
    metric_width: int  # the widest metric label (or level label, in blocks)
    level_widths: tuple[int, ...]  # each level label
    widths_words: tuple[int, ...]  # per column: the widest cell, B/A with its word
    widths_glyphs: tuple[int, ...]  # per column: the widest cell, B/A with its glyph only


@dataclass(frozen=True, slots=True)
class TableLayout:
    side: bool  # the levels side by side, one row per metric
    rules: bool  # a thin rule between the levels (side by side)
    words: bool  # B/A says "better"/"worse"/"same", not just the glyph
    widths: tuple[int, ...]  # every column's width, in order


def result_columns(doc: dict[str, Any]) -> ResultColumns:
    from console.client.report import ba_cell, column_labels, comparison_rows

    names = doc["summary"]["engines"]
    labels = column_labels(doc)
    two = len(names) >= 2
    titles = (*labels, "B/A") if two else tuple(labels)
    words = [cell_len(fmt.shown(x)) for x in titles]
    glyphs = list(words)
    metric = len("metric")
    for level in doc["summary"]["levels"]:
        for row in comparison_rows(level, names):
            metric = max(metric, cell_len(row.label))
            for i, c in enumerate(row.cells):
                words[i] = glyphs[i] = max(words[i], cell_len(fmt.shown(c)))
            if two:
                words[-1] = max(words[-1], cell_len(ba_cell(row.ratio, row.verdict, words=True)))
                glyphs[-1] = max(glyphs[-1], cell_len(ba_cell(row.ratio, row.verdict, words=False)))
    level_widths = tuple(cell_len(fmt.shown(lv["label"])) for lv in doc["summary"]["levels"])
    return ResultColumns(titles, metric, level_widths, tuple(words), tuple(glyphs))


def pick_layout(cols: ResultColumns, width: int, padding: int = 1) -> TableLayout:
    """The first arrangement that fits ``width`` cells: levels side by side with rules between them,
    side by side, one block per level with B/A's words, then with its glyphs only (wider still, the
    table scrolls sideways)."""
    pad = 2 * padding
    n_levels = len(cols.level_widths)

    def side(rules: bool) -> TableLayout:
        ws: list[int] = [cols.metric_width]
        for li, lw in enumerate(cols.level_widths):
            if rules and li:
                ws.append(1)
            ws.extend(max(w, lw) if ci == 0 else w for ci, w in enumerate(cols.widths_words))
        return TableLayout(True, rules, True, tuple(ws))

    def blocks(words: bool) -> TableLayout:
        metric = max(cols.metric_width, *cols.level_widths) if n_levels else cols.metric_width
        return TableLayout(False, False, words, (metric, *(cols.widths_words if words else cols.widths_glyphs)))

    candidates = [side(True), side(False)] if n_levels > 1 else []
    candidates += [blocks(True), blocks(False)]
    for layout in candidates:
        if sum(w + pad for w in layout.widths) <= width:
            return layout
    return candidates[-1]


def _header(top: str, label: str, width: int, side: bool) -> Text:
    """A column title: the engine (or B/A) right-aligned over its numbers; side by side, a first
    line with the level over its first column, from the left."""
    top, label = fmt.shown(top), fmt.shown(label)
    if not side:
        return Text(label, justify="right")
    return Text(top + " " * (width - cell_len(top)) + "\n" + " " * (width - cell_len(label)) + label)


def _cells(row: ComparisonRow | None, n: int, words: bool) -> list[Text]:
    """One row's cells at one level: the engines', then B/A coloured by its verdict and marked."""
    from console.client.report import NA

    if row is None:  # this level has no such row (e.g. an engine metric one level lacks)
        return [Text(NA, style=fmt.NA_STYLE, justify="right") for _ in range(n)]
    out = [Text(c, style=fmt.NA_STYLE if c == NA else "", justify="right") for c in row.cells]
    if len(out) < n:
        out.append(verdict_text(row.ratio, row.verdict, words=words))
    return out


def verdict_text(ratio: float | None, verdict: Verdict | None, *, words: bool = True) -> Text:
    """B/A as the table shows it: ``0.73x ▲ better`` in green, ``▼ worse`` in red, ``≈ same`` dim."""
    from console.client.report import NA, ba_cell

    cell = ba_cell(ratio, verdict, words=words)
    style = VERDICT_STYLE[verdict] if verdict is not None else (fmt.NA_STYLE if cell == NA else "")
    return Text(cell, style=style, justify="right")


def _by_metric(by_level: Sequence[Sequence[ComparisonRow]]) -> list[list[ComparisonRow | None]]:
    """Rows side by side: for each metric (in the table's order) its row at every level, None where a
    level left it out."""
    order: list[str] = []
    for rows in by_level:
        order.extend(r.key for r in rows if r.key not in order)
    rank = {key: i for i, key in enumerate(_row_order())}
    order.sort(key=lambda k: rank.get(k, len(rank)))
    index = [{r.key: r for r in rows} for rows in by_level]
    return [[at.get(key) for at in index] for key in order]


def _row_order() -> list[str]:
    from console.client.report import ROWS

    return [key for key, _, _ in ROWS]


def shared_notes(notes: dict[str, list[str]]) -> list[str]:
    """Every level's notes, each said once: as it is when every level has it, else after its levels."""
    levels_of: dict[str, list[str]] = {}
    for level, lines in notes.items():
        for line in lines:
            levels_of.setdefault(line, []).append(level)
    return [line if len(levels) == len(notes) else f"{', '.join(levels)}: {line}" for line, levels in levels_of.items()]


def _row_key(t: DataTable[Any]) -> str | None:
    if not t.row_count:
        return None
    return str(t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value or "")


def _restore_row(t: DataTable[Any], key: str | None) -> None:
    """Back on the row the cursor was on before the table was rebuilt (the same metric, whatever the
    layout); on a new table, on its first metric (not on the row naming the first level)."""
    if not key:
        if t.row_count > 1 and str(next(iter(t.rows)).value).endswith("|"):
            t.move_cursor(row=1)
        return
    level, _, metric = key.partition("|")
    keys = [str(k.value) for k in t.rows]
    for want in (key, f"|{metric}", f"{level}|{metric}"):
        if want in keys:
            t.move_cursor(row=keys.index(want))
            return
    if metric:
        near = next((i for i, k in enumerate(keys) if k.endswith(f"|{metric}")), None)
        if near is not None:
            t.move_cursor(row=near)


def _on_bench(fn: Callable[[BenchScreen], None]) -> Callable[[DeckHost], None]:
    def handler(app: DeckHost) -> None:
        s = app.screen
        if isinstance(s, BenchScreen):
            fn(s)

    return handler


def _screen(app: DeckHost, target: str | None) -> BenchScreen:
    return BenchScreen(app)


ACTIONS: tuple[Action, ...] = (
    Action("bench", "B,5", "Bench: A/B benchmark in its own process", "Navigate",
           lambda app: app.show_screen("bench"), footer=False, short="bench", footer_screens=("overview",)),
    # Plain letters besides the F-keys (lost over SSH, tmux, laptops); F-keys also work in the form.
    Action("bench_form", "i", "Bench: edit the form (tab moves between fields, esc leaves)", "Bench",
           _on_bench(lambda s: s.focus_form()), screens=("bench",), short="edit", text_box="outside",
           priority=True),
    Action("bench_run", "r,f9", "Bench: run", "Bench", _on_bench(lambda s: s.start()), screens=("bench",), short="run"),
    Action("bench_stop", "x,f10", "Bench: stop the run", "Bench", _on_bench(lambda s: s.stop()), screens=("bench",),
           short="stop"),
    Action("bench_save", "s", "Bench: save the results (JSON and Markdown; says where)", "Bench",
           _on_bench(lambda s: s.save()), screens=("bench",), short="save"),
)

# Kept: leaving the bench (esc, another screen's key) and coming back shows the run where it is, or
# its results; built anew, a finished run's table was gone and a running one went on unseen.
register_screen(ScreenSpec("bench", "Bench", _screen, ACTIONS, kept=True))
