"""Bench screen: run a small A/B benchmark in its own process, with live progress and the table.

The load runs in a child process (``console.client.bench.run_in_subprocess``) driven from a
worker thread, so the UI never distorts the timings; progress events arrive at most 10 times a
second and are handed to the UI thread with ``call_from_thread``.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import DataTable, Input, Static

from console.ui.actions import Action
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar, console_engines
from console.ui.widgets.footer import DeckFooter


class BenchScreen(DeckScreen):
    deck_name = "bench"
    deck_title = "Bench"
    # Never open (or come back) with the focus in a text box: its letters would be the box's.
    AUTO_FOCUS = "#bench-table"

    DEFAULT_CSS = """
    BenchScreen #bench-form { height: 3; }
    BenchScreen #bench-form Input { width: 1fr; }
    BenchScreen #bench-engines { width: 3fr; }
    BenchScreen #bench-progress { height: auto; max-height: 8; }
    BenchScreen #bench-table { height: 1fr; }
    BenchScreen #bench-notes { height: auto; max-height: 6; }
    """

    def __init__(self, app: Any) -> None:
        super().__init__()
        self.doc: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._bench_running = False
        self._progress: list[str] = []
        names = [e.name for e in console_engines(app)][:2]
        self._default_engines = ",".join(names)

    def compose(self) -> ComposeResult:
        yield TopBar()
        with Horizontal(id="bench-form"):
            yield Input(value=self._default_engines, placeholder="engines A,B", id="bench-engines")
            yield Input(value="1,8", placeholder="concurrency", id="bench-conc")
            yield Input(value="32", placeholder="prompts/level", id="bench-n")
            yield Input(value="128", placeholder="input len", id="bench-in")
            yield Input(value="64", placeholder="output len", id="bench-out")
            yield Input(value="random", placeholder="random | shared-prefix", id="bench-workload")
        yield Static("r (or F9) runs the benchmark (each engine, every level, ABBA); x (F10) stops it.",
                     id="bench-progress")
        t: DataTable[str] = DataTable(id="bench-table", cursor_type="row")
        yield t
        yield Static(id="bench-notes")
        yield DeckFooter()

    def home_focus(self) -> Widget:
        """Where Escape from a form field puts the focus."""
        return self.query_one("#bench-table", DataTable)

    def focus_form(self) -> None:
        self.query_one("#bench-engines", Input).focus()

    def _config(self) -> Any:
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
        conc = sorted({int(x) for x in val("bench-conc").split(",") if x.strip()})
        n, il, ol = int(val("bench-n")), int(val("bench-in")), int(val("bench-out"))
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
        fleet = getattr(self.app, "fleet", None)
        gpus = getattr(fleet, "gpus", None)
        source = getattr(gpus, "source", "none")
        if source == "simulated":
            return "simulated"
        return "nvml" if source == "nvml" and not getattr(gpus, "unavailable_reason", "") else "none"

    def start(self) -> None:
        if self._bench_running:
            self.notify("a benchmark is already running", severity="warning")
            return
        try:
            cfg = self._config()
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        self._stop.clear()
        self._progress = []
        self._bench_running = True
        self._run(cfg)

    def stop(self) -> None:
        if self._bench_running:
            self._stop.set()

    @work(thread=True, exclusive=True, group="bench")
    def _run(self, cfg: Any) -> None:
        import asyncio

        from console.client.bench import BenchFailed, check_ready, run_in_subprocess
        from console.client.http import HTTPError

        try:
            models = asyncio.run(check_ready(cfg.engines))
            self.app.call_from_thread(self._on_progress, {"type": "ready", "models": models})
            doc = run_in_subprocess(cfg, models, lambda ev: self.app.call_from_thread(self._on_progress, ev),
                                    should_stop=self._stop.is_set, quiet=True)  # fmt: skip
        except (HTTPError, BenchFailed) as exc:
            self.app.call_from_thread(self._on_failed, str(exc))
            return
        finally:
            self._bench_running = False
        self.app.call_from_thread(self._on_done, doc)

    def _on_progress(self, ev: dict[str, Any]) -> None:
        kind = ev.get("type")
        if kind == "ready":
            self._progress.append(f"ready: models {', '.join(ev['models'])}")
        elif kind == "run_start":
            self._progress.append(f"[{ev['position'] + 1}/{ev['of']}] {ev['engine']} (repeat {ev['repeat'] + 1})")
        elif kind == "level_done":
            ttft = ev.get("ttft_p50_ms")
            self._progress.append(
                f"   {ev['level']}: {ev['completed']} ok, {ev['failed']} failed"
                + (f", TTFT p50 {ttft:.1f} ms" if ttft is not None else "")
            )
        elif kind == "level_progress":
            line = f"   {ev['engine']} {ev['level']}: {ev['completed']}/{ev['total']} ({ev['errors']} errors)"
            if self._progress and self._progress[-1].startswith("   ") and "/" in self._progress[-1].split(":")[-1]:
                self._progress[-1] = line
            else:
                self._progress.append(line)
        self.query_one("#bench-progress", Static).update("\n".join(self._progress[-8:]))

    def _on_failed(self, msg: str) -> None:
        self.query_one("#bench-progress", Static).update(Text(f"benchmark failed: {msg}", style="bold red"))

    def _on_done(self, doc: dict[str, Any]) -> None:
        from console.client.report import column_labels, level_notes, table_rows

        self.doc = doc
        names = doc["summary"]["engines"]
        labels = column_labels(doc)
        t = self.query_one("#bench-table", DataTable)
        t.clear(columns=True)
        t.add_column("level")
        t.add_column("metric")
        for lab in labels:
            t.add_column(lab)
        if len(names) >= 2:
            t.add_column(f"{labels[1]}/{labels[0]}")
        notes: list[str] = []
        for level in doc["summary"]["levels"]:
            for row in table_rows(level, names):
                t.add_row(level["label"], *row)
            notes.extend(f"{level['label']}: {n}" for n in level_notes(doc, level))
        self.query_one("#bench-notes", Static).update("\n".join(notes[-6:]))
        self._progress.append("done")
        self.query_one("#bench-progress", Static).update("\n".join(self._progress[-8:]))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.start()


def _on_bench(method: str) -> Any:
    def handler(app: Any) -> None:
        s = app.screen
        if isinstance(s, BenchScreen):
            getattr(s, method)()

    return handler


def _screen(app: Any, target: str | None) -> BenchScreen:
    return BenchScreen(app)


ACTIONS: tuple[Action, ...] = (
    Action("bench", "B,5", "Bench: A/B benchmark in its own process", "Navigate",
           lambda app: app.show_screen("bench"), footer=False),
    # Plain letters besides the F-keys (lost over SSH, tmux, laptops); F-keys also work in the form.
    Action("bench_form", "i", "Bench: edit the form (tab moves between fields, esc leaves)", "Bench",
           _on_bench("focus_form"), screens=("bench",), short="edit"),
    Action("bench_run", "r,f9", "Bench: run", "Bench", _on_bench("start"), screens=("bench",), short="run"),
    Action("bench_stop", "x,f10", "Bench: stop the run", "Bench", _on_bench("stop"), screens=("bench",),
           short="stop"),
)

register_screen(ScreenSpec("bench", "Bench", _screen, ACTIONS))
