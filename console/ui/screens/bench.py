"""Bench screen: run a small A/B benchmark in its own process, with live progress and the table.

The load runs in a child process (``console.client.bench.run_in_subprocess``) driven from a
worker thread, so the UI never distorts the timings; progress events arrive at most 10 times a
second and are handed to the UI thread with ``call_from_thread``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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
    from console.client.bench import BenchConfig

PROGRESS_ROWS = 8  # progress lines kept on show where the layout does not cap them

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
        self._notes: dict[str, list[str]] = {}  # level label -> its notes
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
        self._progress.append(f"ready: models {', '.join(message.models)}")
        self._show_progress()

    @on(BenchProgress)
    def _on_progress(self, message: BenchProgress) -> None:
        from console.client.progress import LevelDone, LevelProgress, RunStarted

        ev = message.event
        if isinstance(ev, RunStarted):
            self._progress.append(f"[{ev.position + 1}/{ev.of}] {ev.engine} (repeat {ev.repeat + 1})")
        elif isinstance(ev, LevelDone):
            ttft = ev.ttft_p50_ms
            self._progress.append(
                f"   {ev.level}: {ev.completed} ok, {ev.failed} failed"
                + (f", {ev.cut} cut at max duration" if ev.cut else "")
                + (f", TTFT p50 {ttft:.1f} ms" if ttft is not None else "")
            )
        elif isinstance(ev, LevelProgress):
            line = f"   {ev.engine} {ev.level}: {ev.completed}/{ev.total} ({ev.errors} errors)"
            if self._progress and self._progress[-1].startswith("   ") and "/" in self._progress[-1].split(":")[-1]:
                self._progress[-1] = line
            else:
                self._progress.append(line)
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

    @on(BenchStopped)
    def _on_failed(self, message: BenchStopped) -> None:
        self.query_one("#bench-progress", Static).update(
            fmt.outside(f"benchmark failed: {message.reason}", "bold red"))

    @on(BenchDone)
    def _on_bench_done(self, message: BenchDone) -> None:
        self._on_done(message.doc)

    def _on_done(self, doc: dict[str, Any]) -> None:
        from console.client.report import ROWS, column_labels, level_notes, table_rows

        self.doc = doc
        names = doc["summary"]["engines"]
        labels = column_labels(doc)
        key_of = {label: key for key, label, _, _ in ROWS}
        t = self.query_one("#bench-table", DataTable)
        t.clear(columns=True)
        t.add_column("level", key="level")
        t.add_column("metric", key="metric")
        for lab in labels:
            t.add_column(Text(lab, justify="right"))
        if len(names) >= 2:
            # "B/A", not "sglang-sim/vllm-sim": two names do not fit 80 columns beside the metric;
            # the progress line says which engine is B and which A.
            t.add_column(Text("B/A", justify="right"))
        self._notes = {}
        for level in doc["summary"]["levels"]:
            for i, (label, *cells) in enumerate(table_rows(level, names)):
                # The level once, where it starts: the table reads as one block per level.
                t.add_row(Text(level["label"] if i == 0 else "", style="bold"), label,
                          *(Text(c, justify="right") for c in cells),
                          key=f"{level['label']}|{key_of.get(label, label)}")  # fmt: skip
            self._notes[level["label"]] = [f"{level['label']}: {n}" for n in level_notes(doc, level)]
        self._show_notes()
        t.focus()
        ratio = f"B/A = {labels[1]} ÷ {labels[0]} · " if len(names) >= 2 else ""
        self._progress.append(f"done · {ratio}s saves JSON and Markdown · e explains the row")
        self._show_progress()

    def _show_notes(self) -> None:
        """The notes (client-bound, length mode, engine metrics n/a...) of the level under the cursor."""
        t = self.query_one("#bench-table", DataTable)
        level = ""
        if t.row_count:
            level = str(t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value or "").split("|", 1)[0]
        notes = "\n".join(self._notes.get(level, []))
        self.query_one("#bench-notes", Static).update(fmt.outside(notes, multiline=True))

    @on(DataTable.RowHighlighted, "#bench-table")
    def _row(self) -> None:
        self._show_notes()

    def save(self) -> None:
        """Write the results as JSON and Markdown (secrets scrubbed, as `enginedeck bench` does) and say where."""
        if self.doc is None:
            self.notify("nothing to save yet: run a benchmark first (r)", severity="warning")
            return
        from console.client.report import write_outputs

        stamp = time.strftime("%Y%m%d-%H%M%S")
        errors: list[str] = []
        for folder in save_folders():
            base = folder / f"enginedeck-bench-{stamp}"
            try:
                folder.mkdir(parents=True, exist_ok=True)
                write_outputs(self.doc, json_path=f"{base}.json", csv_path=None, md_path=f"{base}.md")
            except OSError as exc:
                errors.append(f"{folder}: {exc.strerror or exc}")
                continue
            msg = f"saved {base}.json and {base}.md"
            self._progress.append(msg)
            self._show_progress()
            self.notify(msg, timeout=15)
            return
        self.notify("could not save the results: " + "; ".join(errors), severity="error", timeout=15)

    def explain_target(self) -> tuple[str, str | None]:
        t = self.query_one("#bench-table", DataTable)
        if self.doc is None or t.row_count == 0:
            return ("bench:", None)
        key = t.coordinate_to_cell_key(t.cursor_coordinate).row_key.value or ""
        return ("bench:" + str(key).split("|", 1)[-1], None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.start()


def save_folders() -> list[Path]:
    """Where `s` saves: the folder the console was started in, else enginedeck's state folder."""
    from console.paths import state_dir

    return [Path.cwd(), state_dir() / "bench"]


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
