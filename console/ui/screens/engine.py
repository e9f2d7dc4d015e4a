"""Engine detail: history charts, a browser over every raw series, identity, and logs.

Only the visible tab is redrawn on a refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static, TabbedContent, TabPane, Tabs

from console.config import mask_secrets
from console.model import EngineSnapshot, FleetSnapshot, RawSeries
from console.secrets import mask_url
from console.telemetry.metrics.history import History
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.engine_strips import STRIPS
from console.ui.fleet_panels import ask_backfill, short_name
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.widgets.cell_table import CellTable
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.line import Line
from console.ui.widgets.plot import (
    COUNT,
    DEFAULT_WINDOW,
    FRACTION_PCT,
    SECONDS,
    TOKENS_PER_S,
    WINDOWS,
    Series,
    Unit,
)
from console.ui.widgets.timechart import TimeChart, fit_grid_rows

TABS = ("charts", "raw", "identity", "logs")
# Raw metrics columns: value and kind fixed, the series takes the rest (cell padding and the
# scrollbar included in RAW_FIXED).
RAW_VALUE_W = 14
RAW_KIND_W = 10
RAW_FIXED = RAW_VALUE_W + RAW_KIND_W + 3 * 2 + 2
RAW_SERIES_MIN = 20
LOG_LINES = 500  # shown in the Logs tab (lines are capped at 400 characters)


@dataclass(frozen=True, slots=True)
class ChartSpec:
    """A chart: its id (and explain key), title, unit, the history series it overlays (with their
    legend names), and whether overlaid lines follow each column's max (latency)."""

    id: str
    title: str
    unit: Unit
    series: tuple[str, ...]
    names: tuple[str, ...] = ()
    use_max: bool = False
    explain: str = ""

    @property
    def metric(self) -> str:
        return self.explain or self.series[-1]


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("ttft", "TTFT", SECONDS, ("ttft_p50", "ttft_p99"), ("p50", "p99"), True, "ttft_p99"),
    ChartSpec("itl", "ITL", SECONDS, ("itl_p50", "itl_p99"), ("p50", "p99"), True, "itl_p99"),
    ChartSpec("generation_tps", "generation", TOKENS_PER_S, ("generation_tps",)),
    ChartSpec("prompt_tps", "prompt", TOKENS_PER_S, ("prompt_tps",)),
    ChartSpec("kv_usage", "KV cache", FRACTION_PCT, ("kv_usage",)),
    ChartSpec("prefix_hit_rate", "prefix hits", FRACTION_PCT, ("prefix_hit_rate",)),
    ChartSpec("requests", "requests", COUNT, ("running", "waiting"), ("running", "waiting"), False, "running"),
    ChartSpec("e2e", "E2E latency", SECONDS, ("e2e_p50", "e2e_p99"), ("p50", "p99"), True, "e2e_p99"),
    ChartSpec("queue", "queue time", SECONDS, ("queue_p50", "queue_p99"), ("p50", "p99"), True, "queue_p99"),
)
# Charts of series not every engine exports: shown once the engine has them.
OPTIONAL_CHARTS = frozenset({"e2e", "queue"})


def chart_series(history: History, entity: str, spec: ChartSpec, end: float, window: float) -> list[Series]:
    names = spec.names or (spec.title,) * len(spec.series)
    return [Series(name, history.window((entity, key), end, window)) for key, name in zip(spec.series, names,
                                                                                          strict=True)]


def _raw_value(v: float) -> str:
    if v == v and abs(v) < 1e15 and v == int(v):  # integral (counters, bytes): all digits
        return f"{int(v):,}"
    return f"{v:.6g}"


def raw_key(r: RawSeries) -> str:
    return r.name + "{" + ",".join(f'{k}="{v}"' for k, v in r.labels) + "}"


def identity_table(e: EngineSnapshot, app: DeckHost, now: float) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()

    def row(k: str, v: str | Text) -> None:
        # Most values come from the engine or its host (model ids, version, reasons, log lines):
        # shown as text, credentials masked, controls inert.
        t.add_row(k, fmt.shown_text(v) if isinstance(v, Text) else (fmt.outside(v) if v else fmt.na()))

    prof = app.profiles.get(e.profile)
    row("instance", e.name)
    row("engine", (prof.display_name if prof else e.profile) + f" (profile {e.profile})")
    if e.role:
        row("role", e.role)  # prefill / decode, from the source's role label
    row("version", e.identity.version or "")
    row("served models", ", ".join(e.identity.models))
    row("max context", f"{e.identity.max_model_len:,} tokens" if e.identity.max_model_len else "")
    row("url", mask_url(e.url))
    if e.source:
        row("control", f"read-only: read from Prometheus source {e.source}")
    elif e.managed:
        row("control", "managed by enginedeck (start/stop/restart)")
    elif e.simulated:
        row("control", "simulated engine started for this session (no start/stop control)")
    else:
        row("control", "monitor-only (watched, not started here)")
    if e.simulated:
        row("simulated", Text("yes: synthetic engine from `enginedeck sim`, not a real model", style=fmt.SIM))
    row("GPUs", ",".join(map(str, e.gpus)))
    row("PIDs", ",".join(map(str, e.pids)))
    row("CPU / RSS", (f"{e.cpu_percent:.0f}%" if e.cpu_percent is not None else "n/a")
        + " / " + (f"{e.rss_bytes / 2**20:.0f} MiB" if e.rss_bytes is not None else "n/a"))
    row("health", fmt.problem(e, now) or "ready")
    row("health probe", fmt.staleness(e.health_freshness, now)
        or f"ok, {fmt.ago(now, e.health_freshness.updated_at)} ago")
    row("metrics", fmt.staleness(e.metrics_freshness, now)
        or f"ok, {fmt.ago(now, e.metrics_freshness.updated_at)} ago")
    if e.missing:
        row("not in payload", Text(", ".join(e.missing), style=fmt.WARN))
    if e.unmapped:
        row("unmapped families", Text(f"{len(e.unmapped)} (see Raw metrics)", style="dim"))
    launch = app.lifecycle.launch_command(e.name) if app.lifecycle is not None else None
    if launch:
        row("launch", launch)
    inst = app.instances.get(e.name)
    if inst is not None:
        cfg = inst.config
        if cfg.image:
            row("image", cfg.image)
        if cfg.command and not launch:
            row("command", " ".join(fmt.mask_args(cfg.command)))
        if cfg.extra_args:
            row("launch args", " ".join(fmt.mask_args(cfg.extra_args)))
        if cfg.env:
            masked = mask_secrets(dict(cfg.env))
            row("env", " ".join(f"{k}={v}" for k, v in masked.items()))
        if cfg.api_key_env:
            row("API key", f"from ${cfg.api_key_env} (value never shown)")
        if cfg.model:
            row("model (config)", cfg.model)
    elif not launch:
        row("launch args", Text("not known: this engine was not started by enginedeck", style="dim"))
    if e.last_log_line:
        row("last log line", e.last_log_line)
    return t


class EngineScreen(DeckScreen):
    deck_name = "engine"
    deck_title = "engine"
    # The tab bar, as before the panels above it existed (they take focus only when chosen, for e).
    AUTO_FOCUS = "Tabs"

    def __init__(self, engine: str) -> None:
        super().__init__()
        self.engine = engine
        self.raw_filter = ""
        self._raw_order: list[str] = []
        self._raw_vals: dict[str, str] = {}
        self._raw_names: dict[str, str] = {}  # row key -> series (family) name
        self._series_w = 0
        self._last_head = ""
        self._strips: dict[str, str] = {}  # widget id -> markup shown
        self.window = DEFAULT_WINDOW  # the charts' time window, seconds

    def title_text(self) -> str:
        return f"engine {short_name(self.engine)}"

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Static(id="engine-head")
        for key, wid, _render in STRIPS:  # shown only where the engine has the series
            strip = Static(id=wid, classes="engine-strip")
            strip.display = False
            strip.can_focus = True
            strip.metric = key  # type: ignore[attr-defined]
            yield strip
        with TabbedContent(initial="charts", id="tabs"):
            with TabPane("Charts", id="charts"), VerticalScroll(id="chart-scroll"), Grid(id="chart-grid"):
                for spec in CHARTS:
                    c = TimeChart(spec.title, spec.unit, use_max=spec.use_max, id=f"chart-{spec.id}", classes="chart")
                    c.metric = spec.metric
                    c.can_focus = True
                    c.display = spec.id not in OPTIONAL_CHARTS
                    yield c
            with TabPane("Raw metrics", id="raw"), Vertical():
                yield Input(placeholder="filter raw series (name or label)", id="raw-filter")
                yield Static(id="raw-count")
                raw: DataTable[Text] = CellTable(id="raw-table", cursor_type="row")
                yield raw
                yield Static(id="raw-selected")
            with TabPane("Identity", id="identity"):
                yield Static(id="identity-text")
            with TabPane("Logs", id="logs"), VerticalScroll(id="logs-scroll"):
                yield Line(id="logs-text")
        yield DeckFooter()

    def on_mount(self) -> None:
        self._fit_raw_columns()
        self.call_after_refresh(self._fit_chart_rows)
        self._show_logs()

    def detail_engine(self) -> str | None:
        # Every raw series is parsed only while a screen shows them (the hub's set_detail): each
        # screen names its engine, or none, when it comes up (DeckScreen.on_screen_resume).
        return self.engine

    def on_resize(self) -> None:
        self._fit_raw_columns()
        self.call_after_refresh(self._fit_chart_rows)

    def _fit_chart_rows(self) -> None:
        found = self.query("#chart-grid")
        if found:
            shown = sum(1 for c in self.query(TimeChart) if c.display)
            fit_grid_rows(found.first(Grid), self.query_one("#chart-scroll", VerticalScroll), shown)

    def _fit_raw_columns(self) -> None:
        """The series column takes the width the value and kind leave (no sideways scrolling); a
        name too long for it ends in … and is shown whole under the table for the selected row."""
        width = max(RAW_SERIES_MIN, (self.size.width or self.app.size.width) - RAW_FIXED)
        if width == self._series_w:
            return
        self._series_w = width
        t = self.query_one("#raw-table", DataTable)
        t.clear(columns=True)
        t.add_column("series", key="series", width=width)
        t.add_column("value", key="value", width=RAW_VALUE_W)
        t.add_column("kind", key="kind", width=RAW_KIND_W)
        self._raw_order = []  # refill at the next redraw
        if self.deck.fleet is not None and self.is_mounted:
            self.show_fleet(self.deck.fleet)

    def _snap(self, fleet: FleetSnapshot) -> EngineSnapshot | None:
        return fleet.engine(self.engine)

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        e = self._snap(fleet)
        now = self.deck.clock()
        head = Text()
        if e is None:
            head.append(f"{self.engine}: no longer in the fleet", style=fmt.WARN)
            self.query_one("#engine-head", Static).update(fmt.shown_text(head))
            return
        head.append(short_name(e.name), style="bold")
        head.append("  ")
        glyph = fmt.phase(e)
        prob = fmt.problem(e, now)
        if prob:
            # The problem line names the state itself ("crashed: exit 137 ..."): the glyph, then it.
            head.append(glyph.plain.split(" ")[0] + " " + prob, style=glyph.style)
        else:
            head.append_text(glyph)
        if e.identity.models:
            head.append("  " + e.identity.models[0], style="dim")
        if head.markup != self._last_head:
            self._last_head = head.markup
            self.query_one("#engine-head", Static).update(fmt.shown_text(head))
        self._show_strips(e)
        tab = self.query_one("#tabs", TabbedContent).active
        if tab == "charts":
            self._show_charts(e)
        elif tab == "raw":
            self._show_raw(e)
        elif tab == "identity":
            self.query_one("#identity-text", Static).update(identity_table(e, self.deck, now))
        elif tab == "logs":
            self._show_logs()

    def _show_strips(self, e: EngineSnapshot) -> None:
        for _key, wid, render in STRIPS:
            text = render(e) if e.live or wid == "strip-energy" else None
            if text is not None:  # one line: a narrow terminal cuts the end (the least important)
                text.no_wrap = True
                text.truncate(max(10, (self.size.width or self.app.size.width) - 1), overflow="ellipsis")
            found = self.query(f"#{wid}")
            if not found:
                continue
            widget = found.first(Static)
            markup = text.markup if text is not None else ""
            if markup != self._strips.get(wid):
                self._strips[wid] = markup
                widget.display = text is not None
                widget.update(fmt.shown_text(text) if text is not None else "")

    def _show_logs(self) -> None:
        """The last lines the lifecycle manager holds in memory (no Docker call from here), or a
        Kubernetes source's ``kubectl logs`` (read in its thread; here only what it last read)."""
        ctl = self.deck.lifecycle
        lines = ctl.log_tail(self.engine, LOG_LINES) if ctl is not None else None
        kube = getattr(self.deck.source, "log_tail", None)
        got = kube(self.engine, LOG_LINES) if lines is None and kube is not None else None
        out = Text()
        if got is not None and not got[0]:
            out.append("No logs here: ", style="bold")
            out.append(got[1] or "the pod wrote no log output yet", style="dim")
        elif got is not None:
            out.append("\n".join(line[:400] for line in got[0][-LOG_LINES:]))
        elif lines is None and kube is not None and getattr(self.deck.source, "source_of", _none)(self.engine):
            out.append("reading the pod's logs with kubectl logs ...", style="dim")
        elif lines is None:
            out.append("No logs here: ", style="bold")
            out.append(
                "engine logs come from enginedeck's engine control (docker logs / process output), and this "
                "engine is not started by enginedeck"
                + (" (the console runs without engine control)." if ctl is None else ".")
                + " Use the engine's own logs (e.g. docker logs <container>).",
                style="dim",
            )
        elif not lines:
            out.append("no log output yet", style="dim")
        else:
            out.append("\n".join(line[:400] for line in lines[-LOG_LINES:]))
        found = self.query("#logs-scroll")
        if not found:  # a late snapshot while the screen is being torn down
            return
        scroll = found.first(VerticalScroll)
        follow = scroll.scroll_y >= scroll.max_scroll_y - 1  # at the end: keep following the tail
        self.query_one("#logs-text", Line).show(out)
        if follow:
            scroll.call_after_refresh(scroll.scroll_end, animate=False)

    def _show_charts(self, e: EngineSnapshot) -> None:
        src = self.deck.source
        if src is None:
            return
        ask_backfill(src, e)
        end = self.deck.fleet.taken_at if self.deck.fleet is not None else self.deck.clock()
        m = e.total
        exported = {"e2e": m is not None and m.e2e.p50 is not None,
                    "queue": m is not None and m.queue_time.p50 is not None}
        for spec in CHARTS:
            c = self.query_one(f"#chart-{spec.id}", TimeChart)
            if spec.id in OPTIONAL_CHARTS:
                # Once exported, kept: a chart that comes and goes with each stale read would jump.
                if exported[spec.id] and not c.display:
                    c.display = True
                    self.call_after_refresh(self._fit_chart_rows)
                if not c.display:
                    continue
            c.set_data(chart_series(src.history, e.name, spec, end, self.window), end=end, window=self.window)

    def step_window(self, step: int) -> None:
        """The next (or previous) time window of every chart."""
        spans = [s for s, _ in WINDOWS]
        i = spans.index(self.window) if self.window in spans else 1
        self.window = spans[(i + step) % len(spans)]
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)

    def _show_raw(self, e: EngineSnapshot) -> None:
        table: DataTable[Text] = self.query_one("#raw-table", DataTable)
        needle = self.raw_filter.lower()
        rows = [(raw_key(r), r) for r in e.raw]
        if needle:
            rows = [(k, r) for k, r in rows if needle in k.lower()]
        rows.sort(key=lambda kr: kr[0])
        order = [k for k, _ in rows]
        now = self.deck.clock()
        count = Text(f"{len(order)} of {len(e.raw)} raw series · {len(e.unmapped)} families not used by the profile",
                     style="dim")
        if e.raw and not e.live:
            # The values below are the last scrape's, not the present: say how old they are.
            seen = e.metrics_freshness.updated_at
            count.append(f" · last seen {fmt.ago(now, seen) + ' ago' if seen is not None else 'never'}, not current",
                         style=fmt.WARN)
        self.query_one("#raw-count", Static).update(fmt.shown_text(
            count if e.raw else Text("no raw series: " + (fmt.staleness(e.metrics_freshness, now)
                                                          or "the engine exported nothing yet"), style=fmt.WARN)
        ))
        vals = {k: _raw_value(r.value) for k, r in rows}
        if order != self._raw_order:
            table.clear()
            for k, r in rows:
                # Made inert before it is cut to the column: a placeholder is wider than what it replaces.
                series = fmt.outside(k)
                series.no_wrap, series.overflow = True, "ellipsis"
                series.truncate(self._series_w or series.cell_len, overflow="ellipsis")
                table.add_row(series, Text(vals[k], justify="right"), fmt.outside(r.kind, "dim"), key=k)
            self._raw_order = order
            self._raw_vals = vals
            self._raw_names = {k: r.name for k, r in rows}
            self._show_raw_selected()
            return
        for k in order:
            if self._raw_vals.get(k) != vals[k]:
                self._raw_vals[k] = vals[k]
                table.update_cell(k, "value", Text(vals[k], justify="right"))
        self._show_raw_selected()

    def _selected_raw(self) -> str | None:
        t = self.query_one("#raw-table", DataTable)
        if not self._raw_order or t.row_count == 0:
            return None
        return self._raw_order[min(t.cursor_coordinate.row, len(self._raw_order) - 1)]

    def _show_raw_selected(self) -> None:
        """The selected row's whole series (name and every label), its value and kind."""
        key = self._selected_raw()
        out = Text()
        if key is not None:
            out.append(fmt.shown(key))
            out.append(f" = {self._raw_vals.get(key, '')}", style="bold")
            out.append("  (e explains it)", style="dim")
        self.query_one("#raw-selected", Static).update(out)

    @on(DataTable.RowHighlighted, "#raw-table")
    def _raw_row(self) -> None:
        self._show_raw_selected()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self) -> None:
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)
        if self.query_one("#tabs", TabbedContent).active == "raw" and not isinstance(self.focused, Input):
            self.query_one("#raw-table", DataTable).focus()  # arrows move through the series at once

    @on(Input.Changed, "#raw-filter")
    def _raw_filter(self, event: Input.Changed) -> None:
        self.raw_filter = event.value.strip()
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)

    def selected_engine(self) -> str | None:
        return self.engine

    def explain_target(self) -> tuple[str, str | None]:
        """Per tab: the focused chart (else the first), the selected raw series, else the phase."""
        tab = self.query_one("#tabs", TabbedContent).active
        focused = self.focused
        if isinstance(focused, TimeChart):
            return (focused.metric, self.engine)
        if isinstance(focused, Static) and focused.has_class("engine-strip"):
            return (str(getattr(focused, "metric", "phase")), self.engine)
        if tab == "charts":
            return (self.query(TimeChart).first().metric, self.engine)
        if tab == "raw":
            key = self._selected_raw()
            if key is not None:
                return ("raw:" + self._raw_names.get(key, key.split("{")[0]), self.engine)
        return ("phase", self.engine)

    def step_tab(self, step: int) -> None:
        tabs = self.query_one("#tabs", TabbedContent)
        i = TABS.index(tabs.active) if tabs.active in TABS else 0
        # Focus off the pane that is about to hide first: Textual would move it to the pane's next
        # widget, and a focused widget inside a pane makes TabbedContent switch back to it.
        self.set_focus(tabs.query_one(Tabs))
        tabs.active = TABS[(i + step) % len(TABS)]

    def focus_raw_filter(self) -> None:
        self.query_one("#tabs", TabbedContent).active = "raw"
        self.set_focus(self.query_one("#raw-filter", Input))  # now: the keys typed next are the filter's

    def deck_back(self) -> bool:
        inp = self.query_one("#raw-filter", Input)
        if inp.has_focus:
            inp.value = ""
            self.query_one("#raw-table", DataTable).focus()
            return True
        return False


def _screen(app: DeckHost, target: str | None) -> EngineScreen:
    assert target is not None
    return EngineScreen(target)


def _on_engine(fn: Callable[[EngineScreen], None]) -> Callable[[DeckHost], None]:
    def handler(app: DeckHost) -> None:
        if isinstance(app.screen, EngineScreen):
            fn(app.screen)

    return handler


def _step_window(step: int) -> Callable[[DeckHost], None]:
    def handler(app: DeckHost) -> None:
        fn = getattr(app.screen, "step_window", None)
        if fn is not None:
            fn(step)

    return handler


ACTIONS: Sequence[Action] = (
    Action("next_tab", "right_square_bracket", "Next tab", "Engine detail", _on_engine(lambda s: s.step_tab(1)),
           screens=("engine",), short="tab", key_display="[ ]"),
    Action("prev_tab", "left_square_bracket", "Previous tab", "Engine detail",
           _on_engine(lambda s: s.step_tab(-1)), screens=("engine",), footer=False),
    Action("window", "w", "Charts: next time window (1m, 5m, 15m, 1h)", "Charts", _step_window(1),
           screens=("engine", "gpus", "compare"), short="window"),
    Action("window_back", "W", "Charts: previous time window", "Charts", _step_window(-1),
           screens=("engine", "gpus", "compare"), footer=False),
    Action("raw_filter", "slash", "Filter raw metrics", "Engine detail", _on_engine(lambda s: s.focus_raw_filter()),
           screens=("engine",), short="filter", text_box="outside", priority=True),
)

register_screen(ScreenSpec("engine", "Engine detail", _screen, tuple(ACTIONS), needs_engine=True, kept=True))


def _none(_engine: str) -> None:
    return None
