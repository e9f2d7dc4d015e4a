"""Overview: every engine in one table (sickest first), why the sick ones are sick, the GPUs and the host.

Per refresh only the cells whose text changed are written (``update_cell``); the table is rebuilt
only when the set or the order of rows changes (new engine, filter, sort).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.text import Span, Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Input

from console.model import Alert, AlertState, EngineSnapshot, FleetSnapshot, ModelMetrics, Rates
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.fleet_panels import (
    ask_backfill,
    gpu_cells,
    gpu_text_table,
    gpu_title,
    host_line,
    hosts_lines,
    short_name,
    shows_hosts,
    stale_host_lines,
)
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.trends import Plan, Trends
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.line import Line, text_key
from console.ui.widgets.row_table import RowTable

CellKey = tuple[str, str]


def _rate(r: Rates) -> float | None:
    return r.now  # 5 s, or 60 s for a counter the engine bumps only when requests finish


def _m(e: EngineSnapshot) -> ModelMetrics:
    return e.total if e.total is not None else ModelMetrics(model="")


def _num(v: float | None, desc: bool = True) -> tuple[int, float]:
    """Sort key: missing values last whatever the direction."""
    if fmt.is_missing(v):
        return (1, 0.0)
    assert v is not None
    return (0, -v if desc else v)


# The name column's widest: a longer name (an attached engine's PROFILE@HOST:PORT) keeps its head and
# tail around "…" (format.fit_name), never a silent cut.
NAME_MAX = 28

# Row tint of an engine with a firing alert (k9s' error/modify colours); the cells' markup carries it,
# so only the rows whose tint changes are drawn again.
TINT = {"critical": "on #5f0000", "warning": "on #5f3f00"}


def row_tint(alerts: tuple[Alert, ...], engine: str) -> str:
    sev = {a.severity for a in alerts if a.engine == engine and a.state is AlertState.FIRING}
    return next((TINT[s] for s in ("critical", "warning") if s in sev), "")


def engine_label(e: EngineSnapshot, profiles: dict[str, str]) -> Text:
    disp = profiles.get(e.profile, e.profile)
    t = fmt.outside(disp)
    if e.identity.version:
        t.append(" " + fmt.shown(e.identity.version), style="dim")
    return t


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    metric: str  # explain key
    render: Callable[[EngineSnapshot, CellContext], Text]
    sort: Callable[[EngineSnapshot], Any] | None = None
    priority: int = 9  # columns are kept by priority until the terminal width is used up


def _model(e: EngineSnapshot) -> Text:
    # Made inert before it is measured: a placeholder is wider than what it replaces.
    name = fmt.shown(e.identity.models[0] if e.identity.models else (e.total.model if e.total else ""))
    if not name:
        return fmt.na()
    # Keep the end of a long name (the model, not its organisation) within the 22-wide column.
    return Text(name if len(name) <= 22 else "…" + name.split("/")[-1][-21:])


def engine_name(e: EngineSnapshot, hosts: bool) -> str:
    """The name column: without the ``HOST/`` prefix while the host column shows it (a remote host's
    engine names are outside text: short_name makes them inert before the column is measured)."""
    return short_name(e.name.removeprefix(f"{e.host}/") if hosts and e.host else e.name)


def host_cell(e: EngineSnapshot) -> Text:
    """The host column ("local" for this machine); red while the host's stream is stale."""
    stale = bool(e.host) and e.health_detail.startswith(f"host {e.host}:")
    return Text(fmt.fit_name(fmt.shown(e.host or "local"), HOST_MAX_W), style=fmt.CRIT if stale else "")


HOST_W = 8
HOST_MAX_W = 24  # the column grows to the longest host name up to this; longer ones are cut in the middle

COLUMNS: tuple[Column, ...] = (
    # Shown only with a remote host or source, or engines of more than one host (fleet_panels.shows_hosts).
    Column("host", "host", HOST_W, "phase", lambda e, ctx: host_cell(e), lambda e: (e.host, e.name), 1),
    Column("name", "engine", 14, "phase", lambda e, ctx: Text(fmt.fit_name(engine_name(e, ctx.hosts), ctx.name_width)),
           lambda e: e.name, 1),
    # Shown only when an engine has a role (a source's prefill/decode label).
    Column("role", "role", 7, "role", lambda e, ctx: fmt.outside(e.role) if e.role else fmt.na(),
           lambda e: (e.role, e.name), 4),
    Column("kind", "type/version", 18, "phase", lambda e, ctx: engine_label(e, ctx.display), None, 8),
    Column("model", "model", 22, "phase", lambda e, ctx: _model(e), None, 9),
    Column("phase", "health", 13, "phase", lambda e, ctx: fmt.health(e, ctx.now, ctx.health_width),
           lambda e: (fmt.severity(e), not e.metrics_freshness.stale, e.name), 1),
    Column("gpus", "GPUs", 5, "gpu_engine",
           lambda e, ctx: Text(",".join(map(str, e.gpus))) if e.gpus else fmt.na(), None, 7),
    Column("running", "run", 4, "running", lambda e, ctx: fmt.count(_m(e).running),
           lambda e: _num(_m(e).running), 2),
    Column("waiting", "wait", 4, "waiting", lambda e, ctx: fmt.count(_m(e).waiting),
           lambda e: _num(_m(e).waiting), 2),
    Column("kv", "KV", 4, "kv_usage", lambda e, ctx: fmt.pct(_m(e).kv_usage), lambda e: _num(_m(e).kv_usage), 2),
    Column("prefix", "prefix", 6, "prefix_hit_rate", lambda e, ctx: fmt.pct(_m(e).prefix_hit_rate, warn=2, crit=2),
           lambda e: _num(_m(e).prefix_hit_rate), 6),
    Column("gen", "gen tok/s", 9, "generation_tps",
           lambda e, ctx: fmt.tps(_rate(_m(e).generation_tps), at_finish=_m(e).generation_tps.at_finish,
                                  approximate=_m(e).generation_tps.approximate),
           lambda e: _num(_rate(_m(e).generation_tps)), 3),
    Column("prompt", "prompt tok/s", 12, "prompt_tps",
           lambda e, ctx: fmt.tps(_rate(_m(e).prompt_tps), at_finish=_m(e).prompt_tps.at_finish,
                                  approximate=_m(e).prompt_tps.approximate),
           lambda e: _num(_rate(_m(e).prompt_tps)), 4),
    Column("ttft50", "TTFT p50", 8, "ttft_p50", lambda e, ctx: fmt.quantile(_m(e).ttft, "p50"),
           lambda e: _num(_m(e).ttft.p50), 5),
    Column("ttft99", "TTFT p99", 8, "ttft_p99", lambda e, ctx: fmt.quantile(_m(e).ttft, "p99"),
           lambda e: _num(_m(e).ttft.p99), 3),
    Column("itl50", "ITL p50", 8, "itl_p50", lambda e, ctx: fmt.quantile(_m(e).itl, "p50"),
           lambda e: _num(_m(e).itl.p50), 5),
    Column("errors", "err/s", 6, "errors", lambda e, ctx: fmt.per_s(_rate(_m(e).error_rate)),
           lambda e: _num(_rate(_m(e).error_rate)), 3),
    # Generated tokens per joule of the engine's GPUs over 60 s; "~" marks an estimate (shared GPU).
    Column("tpj", "tok/J", 6, "tokens_per_joule", lambda e, ctx: fmt.tok_per_joule(e.energy),
           lambda e: _num(e.energy.tokens_per_joule if e.energy else None), 6),
)
SORTABLE = [c for c in COLUMNS if c.sort is not None]


def arrow_width(c: Column) -> int:
    """A column's width with room for its label and the sort arrow (▼/▲) after it."""
    return max(c.width, len(c.label) + 1)

IDENTITY_COLS = frozenset({"host", "name", "role", "kind", "model", "phase", "gpus"})

@dataclass(frozen=True, slots=True)
class CellContext:
    """What a column's cell needs besides the engine: profile display names, the time, the health width."""

    display: dict[str, str]
    now: float = 0.0
    health_width: int = 13
    hosts: bool = False  # the host column shows (the name column then leaves out HOST/)
    name_width: int = NAME_MAX  # the name column's width: a longer name is cut in the middle, with "…"


# The health column grows to this width (it says "✖ crashed: exit 137 (SIGKILL) 12 s ago") with
# the room left once the columns up to this priority are placed.
HEALTH_MAX = 40
HEALTH_GROWS_AFTER = 6


class OverviewScreen(DeckScreen):
    deck_name = "overview"
    deck_title = "overview"

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = "phase"
        self.sort_reverse = False
        self.filter_text = ""
        self._compact = False
        self._shown: list[Column] = []
        self._shown_name_w = 0
        self._shown_host_w = 0
        self._health_w = 0
        self._role_eligible = False  # an engine has a role (the role column may show)
        self._row_order: list[str] = []
        self._cells: dict[str, list[tuple[object, ...]]] = {}  # each shown cell's text_key
        self.marked: str | None = None  # the first engine of an A/B compare (m)
        self.trends = Trends()  # the trends' window, scales and each series' columns (console/ui/trends.py)
        self._trend_plan: Plan | None = None
        self._trend_room: tuple[int, int] = (0, 0)  # the room the trends were last drawn for
        self._trend_lines = 1  # and their lines

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        yield Input(placeholder="filter engines (name, type, model, health) — enter keeps, esc clears",
                    id="filter")
        yield RowTable(id="engines")
        yield Line(id="attention")
        yield Line(id="hosts")
        yield Line(id="sparks")
        yield Line(id="gpu-title")
        # Plain text, not a DataTable: it changes every refresh and a DataTable re-renders every cell
        # on each change. The GPU screen (g) has the interactive table.
        with VerticalScroll(id="gpu-scroll"):
            yield Line(id="gpus")
        yield Line(id="host")
        yield DeckFooter()

    def on_mount(self) -> None:
        self.query_one("#filter", Input).display = False
        self.query_one("#hosts", Line).display = False  # shown once a snapshot has remote hosts
        self._compact = self.deck.layout_name == "compact"
        self._fit_columns()
        self.query_one("#engines", RowTable).focus()

    def layout_changed(self, name: str) -> None:
        compact = name == "compact"
        self._compact = compact

    def on_resize(self) -> None:
        self._fit_columns()
        if self.deck.fleet is not None:
            self._show_gpus(self.deck.fleet)  # GPU columns follow the width too
        # The trends follow the height their widget gets, known once this resize is laid out.
        self.call_after_refresh(self._redraw_trends)

    def _redraw_trends(self) -> None:
        sparks = self.query_one("#sparks", Line)
        if self.deck.fleet is not None and sparks.display:
            grid, key, lines = self._sparks(self.deck.fleet)
            sparks.show(grid, key, lines=lines)

    def _columns(self) -> list[Column]:
        return self._shown

    def _multi_host(self) -> bool:
        fleet = self.deck.fleet
        return fleet is not None and shows_hosts(fleet)

    def _name_width(self) -> int:
        fleet = self.deck.fleet
        hosts = self._multi_host()
        names = [engine_name(e, hosts) for e in fleet.engines] if fleet else []
        return max(8, min(NAME_MAX, max((len(n) for n in names), default=8)))

    def _host_width(self) -> int:
        """The host column as wide as the longest host name (a source's "127.0.0.1:9090" too), up to 24."""
        fleet = self.deck.fleet
        hosts = [host_cell(e).plain for e in fleet.engines] if fleet else []
        return max(HOST_W, min(HOST_MAX_W, max((len(h) for h in hosts), default=HOST_W)))

    def _fit_columns(self) -> None:
        """Keep the most important columns that fit the width (no horizontal scrolling)."""
        width = self.size.width or self.app.size.width
        name_w = self._name_width()
        host_w = self._host_width()
        budget = width - 2
        keep: set[str] = set()
        health_w = next(c.width for c in COLUMNS if c.key == "phase")
        grown = False
        fleet = self.deck.fleet
        self._role_eligible = fleet is not None and any(e.role for e in fleet.engines)
        hidden = ({"host"} if not self._multi_host() else set()) | ({"role"} if not self._role_eligible else set())
        columns = [c for c in COLUMNS if c.key not in hidden]
        for c in sorted(columns, key=lambda c: c.priority):
            if not grown and c.priority > HEALTH_GROWS_AFTER:
                extra = max(0, min(budget, HEALTH_MAX - health_w))
                health_w, budget, grown = health_w + extra, budget - extra, True
            w = (name_w if c.key == "name" else host_w if c.key == "host" else arrow_width(c)) + 2
            if w <= budget or c.priority == 1:
                keep.add(c.key)
                budget -= w
        shown = [c for c in COLUMNS if c.key in keep]
        if ([c.key for c in shown] == [c.key for c in self._shown] and name_w == self._shown_name_w
                and host_w == self._shown_host_w and health_w == self._health_w):
            return
        self._shown = shown
        self._shown_name_w = name_w
        self._shown_host_w = host_w
        self._health_w = health_w
        table = self.query_one("#engines", RowTable)
        table.clear(columns=True)
        self._row_order = []
        self._cells = {}
        for c in shown:
            width = {"name": name_w, "host": host_w, "phase": health_w}.get(c.key) or arrow_width(c)
            table.add_column(self._header(c), key=c.key, width=width)
        if self.deck.fleet is not None and self.is_mounted:
            self.show_fleet(self.deck.fleet)

    def _header(self, c: Column) -> Text:
        if c.key != self.sort_key:
            return Text(c.label)
        return Text(c.label + ("▲" if self.sort_reverse else "▼"), style="bold")

    # -- data --------------------------------------------------------------------------------

    def _visible(self, fleet: FleetSnapshot) -> list[EngineSnapshot]:
        engines = list(fleet.engines)
        if self.filter_text:
            needle = self.filter_text.lower()
            engines = [
                e
                for e in engines
                if needle in " ".join((e.name, e.profile, e.phase.value, *e.identity.models)).lower()
            ]
        col = next((c for c in SORTABLE if c.key == self.sort_key), SORTABLE[0])
        assert col.sort is not None
        keyf = col.sort
        engines.sort(key=lambda e: (keyf(e), e.name), reverse=self.sort_reverse)
        return engines

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        now = self.deck.clock()
        self._show_engines(fleet, now)
        self._set_text("attention", self._attention(fleet, now))
        self._set_text("gpu-title", gpu_title(fleet.gpus, now))
        self._show_gpus(fleet)
        self._set_text("host", host_line(fleet.host, now))
        if fleet.hosts:  # remote hosts: the fleet's totals and a line per host, under the attention lines
            hosts = self.query_one("#hosts", Line)
            hosts.display = True
            hosts.show(hosts_lines(fleet, now, (self.size.width or self.app.size.width) - 2))
            self.query_one("#host", Line).display = fleet.host is not None
        sparks = self.query_one("#sparks", Line)
        if sparks.display:  # last: in the rows the panels above leave
            grid, key, lines = self._sparks(fleet)
            sparks.show(grid, key, lines=lines)

    def _set_text(self, wid: str, text: Text) -> None:
        self.query_one(f"#{wid}", Line).show(text)

    def _show_engines(self, fleet: FleetSnapshot, now: float) -> None:
        table = self.query_one("#engines", RowTable)
        engines = self._visible(fleet)
        cols = self._columns()
        hosts = any(c.key == "host" for c in cols)
        ctx = CellContext({n: p.display_name for n, p in self.deck.profiles.items()}, now, self._health_w or 13, hosts,
                          self._shown_name_w or NAME_MAX)
        rows: dict[str, list[Text]] = {}
        for e in engines:
            cells = [c.render(e, ctx) for c in cols]
            if not e.live:
                # Stale, starting, loading, stopping or ended: the last values are history, not the
                # present, so none is shown (the health cell and the attention line say why).
                cells = [
                    t if c.key in IDENTITY_COLS else Text("--", style="dim")
                    for c, t in zip(cols, cells, strict=True)
                ]
            tint = row_tint(fleet.alerts, e.name)
            if tint:
                for t in cells:
                    t.stylize(tint)
            rows[e.name] = cells
        order = [e.name for e in engines]
        roles = any(e.role for e in fleet.engines) != self._role_eligible  # a role came or went
        if order != self._row_order and (self._name_width() != self._shown_name_w or hosts != self._multi_host()
                                         or self._host_width() != self._shown_host_w or roles):
            self._fit_columns()
            return
        if order != self._row_order:
            selected = self.selected_engine()
            col = table.cursor_coordinate.column
            table.clear()
            for name in order:
                table.add_row(*rows[name], key=name)
            self._row_order = order
            self._cells = {n: [text_key(t) for t in rows[n]] for n in order}
            if selected in order:
                table.move_cursor(row=order.index(selected), column=col, animate=False)
            if not order:
                self._set_text("attention", Text("no engine matches the filter", style=fmt.WARN))
            return
        for name in order:
            new = rows[name]
            old = self._cells[name]
            for i, (c, t) in enumerate(zip(cols, new, strict=True)):
                sig = text_key(t)
                if old[i] != sig:
                    old[i] = sig
                    table.update_cell(name, c.key, t)

    def _attention(self, fleet: FleetSnapshot, now: float) -> Text:
        t = self._health_attention(fleet, now)
        firing = sum(1 for a in fleet.alerts if a.state is AlertState.FIRING)
        if firing:
            t = Text.assemble((f"▲ {fmt.plural(firing, 'alert')} firing (a: alerts)", fmt.WARN), "\n", t)
        return t

    def _health_attention(self, fleet: FleetSnapshot, now: float) -> Text:
        if not fleet.engines:
            return Text("no engines yet: waiting for the first collection", style="dim")
        # A stale remote host is one line for all its engines (fleet_panels.stale_host_lines).
        stale_hosts = {h.name for h in fleet.hosts if h.freshness.stale}
        sick = [e for e in fleet.engines if fmt.is_sick(e) and e.host not in stale_hosts]
        stopped = [e for e in fleet.engines if fmt.stopped_by_you(e)]
        if stale_hosts:
            t = stale_host_lines(fleet, now, (self.size.width or self.app.size.width) - 2)
            rest = self._health_attention(replace(fleet, engines=tuple(e for e in fleet.engines
                                                                        if e.host not in stale_hosts), hosts=()), now)
            return t if not sick and not stopped else Text.assemble(t, "\n", rest)
        if not sick and not stopped:
            n = len(fleet.engines)
            return Text(f"✓ {'the engine is' if n == 1 else f'all {n} engines'} ready, metrics fresh", style="green")
        sick.sort(key=lambda e: (fmt.severity(e), e.name))
        listed = sick + sorted(stopped, key=lambda e: e.name)  # a stop you asked for: a line, after the alarms
        limit = 2 if self._compact else 4
        t = Text()
        if not sick:
            ready = len(fleet.engines) - len(stopped)
            t.append(f"✓ {fmt.plural(ready, 'engine')} ready, metrics fresh", style="green")
            limit -= 1
        for e in listed[:limit]:
            if t.plain:
                t.append("\n")
            glyph = fmt.phase(e)
            t.append(glyph.plain.split(" ")[0] + " ", style=glyph.style)
            # One line each: a reason with a line end in it stays on its engine's line.
            t.append(fmt.shown(short_name(e.name)), style="bold")
            t.append(" " + fmt.shown(fmt.problem(e, now)))
        if len(listed) > limit:
            t.append(f"\n… and {len(listed) - limit} more (sort by health: s)", style="dim")
        return t

    def trend_room(self) -> tuple[int, int]:
        """(columns, rows) the trends may take: the rows the other panels leave (theirs do not depend on
        the trends'); what the trends do not use stays blank at the bottom of the screen."""
        sparks = self.query_one("#sparks", Line)
        used = 0
        for child in self.children:
            if child is not sparks and child.display:
                margin = child.styles.margin
                # A line as tall as its text now (the attention lines just set), not as last laid out.
                rows = child.content.plain.count("\n") + 1 if isinstance(child, Line) and isinstance(
                    child.content, Text) and child.styles.height is not None and child.styles.height.is_auto \
                    else child.outer_size.height
                used += rows + margin.top + margin.bottom
        # Its own width once laid out (a scrollbar narrows it), never wider than the screen's.
        width = min(sparks.size.width or 10**6, (self.size.width or self.app.size.width) - 2)
        return width, max(0, self.size.height - used) if sparks.region else 0

    def _check_trend_room(self) -> None:
        """After a layout: the trends again if the other panels' heights changed under them (the GPUs
        appear with the first snapshot, a hosts line, a toast)."""
        if not self.is_mounted:
            return
        if self.trend_room() != self._trend_room:
            self._redraw_trends()
            return
        sparks = self.query_one("#sparks", Line)
        if sparks.display and sparks.size.height != self._trend_lines:
            # A new height asked for during a layout in progress can be missed: asked again.
            sparks.refresh(layout=True)

    def trend_layout(self, engines: int) -> tuple[int, int]:
        """(engines shown, rows a chart) of the trends as last drawn for ``engines`` engines."""
        p = self._trend_plan
        return (p.engines, p.rows) if p is not None and engines else (0, 1)

    def _sparks(self, fleet: FleetSnapshot) -> tuple[Text, str, int]:
        """The engines' trends (console/ui/trends.py), in the table's order, as text: per band a header
        (window, metrics, scales) and a line or two an engine; the text, its key and its number of lines."""
        src = self.deck.source
        width, height = self._trend_room = self.trend_room()
        self.call_after_refresh(self._check_trend_room)
        if src is None or height <= 0:  # not laid out yet: the resize after layout draws them
            self._trend_lines = 1
            return Text(""), "", 1
        # The table's order, the live engines first: a stale, stopped or unreachable engine's trend is
        # its past, and the lines above say what became of it; it gives its row up first.
        by_name = {e.name: e for e in fleet.engines}
        visible = [by_name[n] for n in self._row_order if n in by_name]  # as the table shows them
        engines = [e for e in visible if e.live] + [e for e in visible if not e.live]
        name_w = self._name_width()
        for e in engines[:height]:
            ask_backfill(src, e)
        drawn = self.trends.draw(src.history, [(e.name, fmt.fit_name(fmt.shown(short_name(e.name)), name_w))
                                               for e in engines],
                                 end=fleet.taken_at, width=width, height=height, name_w=name_w,
                                 quiet=len(engines) - sum(e.live for e in engines))
        self._trend_plan = drawn.plan
        # The text and its spans at once: a Text.append a piece cost as much as drawing the charts.
        parts: list[str] = []
        spans: list[Span] = []
        at = 0
        for n, line in enumerate(drawn.lines):
            if n:
                parts.append("\n")
                at += 1
            for text, style in line:
                parts.append(text)
                if style:
                    spans.append(Span(at, at + len(text), style))
                at += len(text)
        plain = "".join(parts)
        self._trend_lines = max(1, len(drawn.lines))
        return Text(plain, spans=spans), plain, self._trend_lines

    def step_window(self, step: int) -> None:
        """The trends' next (or previous) time window (w / W, as on the chart screens)."""
        self.trends.step_window(step)
        self._redraw_trends()

    def toggle_trend_scale(self) -> None:
        """One scale per metric for every engine, or each engine its own."""
        self.trends.shared = not self.trends.shared
        self._redraw_trends()
        self.notify("trends: " + ("one scale per metric, shared by the engines" if self.trends.shared
                                  else "each engine on its own scale"), timeout=2)

    def _show_gpus(self, fleet: FleetSnapshot) -> None:
        line = self.query_one("#gpus", Line)
        # No empty grid: the title says why there are none.
        self.query_one("#gpu-scroll").display = bool(fleet.gpus.gpus)
        engine_of = {i: e.name for e in fleet.engines for i in e.gpus}
        width = (self.size.width or self.app.size.width) - 2  # the line's padding
        line.show(gpu_text_table([gpu_cells(g, engine_of) for g in fleet.gpus.gpus], width))

    # -- interaction -------------------------------------------------------------------------

    def selected_engine(self) -> str | None:
        table = self.query_one("#engines", RowTable)
        if not self._row_order or table.row_count == 0:
            return None
        row = min(table.cursor_coordinate.row, len(self._row_order) - 1)
        return self._row_order[row]

    def toggle_mark(self) -> None:
        """Mark the engine under the cursor as the first of an A/B compare (c opens it)."""
        name = self.selected_engine()
        if name is None:
            return
        self.marked = None if self.marked == name else name
        if self.marked is not None:
            self.notify(f"{name} marked: choose another engine and press c to compare them")
        else:
            self.notify(f"{name} unmarked")

    def compare_pair(self) -> tuple[str, str] | None:
        """The marked engine and the one under the cursor; unmarked (or the same), the one under the
        cursor and the next in the table with data in most of the compare charts (not a TGI without
        TTFT and KV history beside an SGLang): NoComparePair says when none has."""
        # Imported here: the compare screen's module is the compare view's, not the overview's.
        from console.ui.screens.compare import MOST_CHARTS, NoComparePair, charts_with_data
        from console.ui.widgets.plot import DEFAULT_WINDOW

        cur = self.selected_engine()
        order = self._row_order
        if self.marked is not None and self.marked in order and cur is not None and cur != self.marked:
            return (self.marked, cur)
        first = self.marked if self.marked in order else cur
        if first is None or len(order) < 2:
            return None
        at = order.index(first)
        others = order[at + 1:] + order[:at]
        src, fleet = self.deck.source, self.deck.fleet
        if src is None or fleet is None:
            return (first, others[0])
        for name in others:
            if charts_with_data(src.history, name, fleet.taken_at, DEFAULT_WINDOW) >= MOST_CHARTS:
                return (first, name)
        raise NoComparePair(f"no engine besides {first} has data in most compare charts: m marks one, "
                            "c on another compares them anyway")

    def explain_target(self) -> tuple[str, str | None]:
        table = self.query_one("#engines", RowTable)
        cols = self._columns()
        col = cols[min(table.cursor_coordinate.column, len(cols) - 1)]
        return (col.metric, self.selected_engine())

    def cycle_sort(self, reverse: bool = False) -> None:
        if reverse:
            self.sort_reverse = not self.sort_reverse
        else:
            visible = {c.key for c in self._columns()}
            keys = [c.key for c in SORTABLE if c.key in visible]
            i = keys.index(self.sort_key) if self.sort_key in keys else -1
            self.sort_key = keys[(i + 1) % len(keys)]
            self.sort_reverse = False
        table = self.query_one("#engines", RowTable)
        for c in self._columns():
            table.set_label(c.key, self._header(c))
        self._row_order = []  # force a re-order
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)
        label = next(c.label for c in COLUMNS if c.key == self.sort_key)
        self.notify(f"sorted by {label}" + (" (reversed)" if self.sort_reverse else ""), timeout=2)

    def open_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        inp.display = True
        self.set_focus(inp)  # now, not after the keys already typed (they are the filter's)

    def deck_back(self) -> bool:
        inp = self.query_one("#filter", Input)
        if inp.display:
            inp.value = ""
            inp.display = False
            self.query_one("#engines", RowTable).focus()
            return True
        return False

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            event.input.display = False
        self.query_one("#engines", RowTable).focus()

    @on(RowTable.CellSelected, "#engines")
    async def _open_engine(self, event: RowTable.CellSelected) -> None:
        await self.deck.show_screen("engine", event.row_key)


def _screen(app: DeckHost, target: str | None) -> OverviewScreen:
    return OverviewScreen()


def _on_overview(fn: Callable[[OverviewScreen], None]) -> Callable[[DeckHost], None]:
    def handler(app: DeckHost) -> None:
        if isinstance(app.screen, OverviewScreen):
            fn(app.screen)

    return handler


async def _open(app: DeckHost) -> None:
    await app.show_screen("engine")


ACTIONS: Sequence[Action] = (
    Action("open", "enter", "Open engine detail (charts, raw metrics, identity)", "Overview", _open,
           screens=("overview",), footer=True, key_display="⏎", short="open"),
    Action("sort", "s", "Sort by next column", "Overview", _on_overview(lambda s: s.cycle_sort()),
           screens=("overview",), short="sort", footer_rank=1),
    Action("sort_reverse", "S", "Reverse sort order", "Overview", _on_overview(lambda s: s.cycle_sort(True)),
           screens=("overview",), footer=False),
    Action("mark", "m", "Mark the engine for an A/B compare (c compares it with the one under the cursor)",
           "Overview", _on_overview(lambda s: s.toggle_mark()), screens=("overview",), footer=False),
    Action("filter", "slash", "Filter engines", "Overview", _on_overview(lambda s: s.open_filter()),
           screens=("overview",), short="filter", text_box="outside", priority=True),
    # The chart screens' window keys (w/W), for the trends; out of the footer, which keeps q and ?.
    Action("trend_window", "w", "Trends: next time window (1m, 5m, 15m, 1h)", "Overview",
           _on_overview(lambda s: s.step_window(1)), screens=("overview",), footer=False),
    Action("trend_window_back", "W", "Trends: previous time window", "Overview",
           _on_overview(lambda s: s.step_window(-1)), screens=("overview",), footer=False),
    Action("trend_scale", "y", "Trends: one scale per metric for every engine / each engine its own",
           "Overview", _on_overview(lambda s: s.toggle_trend_scale()), screens=("overview",), footer=False),
)

register_screen(ScreenSpec("overview", "Overview", _screen, tuple(ACTIONS)))
