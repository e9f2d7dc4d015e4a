"""The alerts screen: what fires, what is pending, what resolved lately, on which engine.

Each row: severity, state, engine, rule, since when, the value now, and where there is room (not
at 80 columns) the condition; the lines under the table have the selected alert's summary, its
condition and runbook; ``e`` explains its formula and inputs. A firing alert whose condition has
stopped holding reads "clearing" with the seconds left of its clear period. ``v`` lists every rule
on every engine, ok, n/a and no data too. It reads ``FleetSnapshot.alerts`` only (the hub
evaluates them).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable

from console.model import Alert, AlertState, FleetSnapshot
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.widgets.cell_table import CellTable
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.line import Line

SHOWN = (AlertState.FIRING, AlertState.PENDING, AlertState.RESOLVED)
EVERY_STATE = (*SHOWN, AlertState.NO_DATA, AlertState.NA, AlertState.OK)
SEVERITIES = ("critical", "warning", "info")
# (key, title, width); engine and rule are as wide as the longest shown (up to the cap). The
# condition gets the rest of the row where that is at least CONDITION_MIN, else it is shown under
# the table for the selected alert only (at 80 columns: a column of 3 letters would be cut).
FIXED = (("sev", "sev", 4), ("state", "state", 8))
ENGINE_W, RULE_W = (6, 16), (4, 26)
TAIL = (("since", "since", 7), ("value", "now", 8))
CONDITION_MIN = 24
SEV_SHORT = {"critical": "crit", "warning": "warn", "info": "info"}
SEV_STYLE = {"critical": fmt.CRIT, "warning": fmt.WARN, "info": "cyan"}


def shown_alerts(alerts: tuple[Alert, ...], every: bool = False) -> list[Alert]:
    """Firing first, then pending, then resolved (``every``: then no data, n/a, ok); the most severe
    and the oldest first in each."""
    states = EVERY_STATE if every else SHOWN
    rows = [a for a in alerts if a.state in states]
    return sorted(rows, key=lambda a: (states.index(a.state), SEVERITIES.index(a.severity) if a.severity in
                                       SEVERITIES else 9, a.since or 0.0, a.engine, a.rule))


def clearing_in(a: Alert, now: float) -> float | None:
    """Seconds left of a firing alert's clear period (None when it is not clearing)."""
    if a.state is not AlertState.FIRING or a.clears_at is None:
        return None
    return max(0.0, a.clears_at - now)


def columns_for(rows: list[Alert], width: int) -> list[tuple[str, str, int]]:
    """The table's columns for these rows at this screen width (cell padding: 2 a column)."""
    def fit(texts: list[str], bounds: tuple[int, int]) -> int:
        return max(bounds[0], min(bounds[1], max((len(t) for t in texts), default=0)))

    cols = [*FIXED, ("engine", "engine", fit([_engine(a) for a in rows], ENGINE_W)),
            ("rule", "rule", fit([a.rule for a in rows], RULE_W)), *TAIL]
    # The table's own vertical scrollbar and a margin: 3 cells.
    room = width - sum(w + 2 for _, _, w in cols) - 2 - 3
    if room >= CONDITION_MIN:
        cols.append(("condition", "condition", room))
    return cols


def _engine(a: Alert) -> str:
    return a.engine.replace("http://", "").replace("https://", "")


def summary_line(alerts: tuple[Alert, ...], every: bool = False) -> Text:
    by_state = {s: sum(1 for a in alerts if a.state is s) for s in AlertState}
    t = Text()
    if not alerts:
        return Text("no alert rules evaluated yet", style="dim")
    t.append(f"{by_state[AlertState.FIRING]} firing", style=fmt.CRIT if by_state[AlertState.FIRING] else "green")
    t.append(f" · {by_state[AlertState.PENDING]} pending · {by_state[AlertState.RESOLVED]} resolved")
    t.append(f" · {by_state[AlertState.OK]} ok · {by_state[AlertState.NA]} n/a"
             f" · {by_state[AlertState.NO_DATA]} no data", style="dim")
    t.append("  v: only what fires" if every else "  v: list them all", style="dim")
    return t


class AlertsScreen(DeckScreen):
    deck_name = "alerts"
    deck_title = "Alerts"

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Line(id="alerts-summary")
        yield CellTable(id="alerts", cursor_type="row", zebra_stripes=False)
        yield Line(id="alert-detail")
        yield DeckFooter()

    def on_mount(self) -> None:
        self._rows: list[Alert] = []
        self._columns: list[tuple[str, str, int]] = []
        self._fleet: FleetSnapshot | None = None
        self.every = False  # v: every rule on every engine, not only what fires
        self.query_one("#alerts", DataTable).focus()

    def on_resize(self) -> None:
        if self._fleet is not None:
            self.show_fleet(self._fleet)

    def toggle_every(self) -> None:
        self.every = not self.every
        if self._fleet is not None:
            self.show_fleet(self._fleet)

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        self._fleet = fleet
        now = self.deck.clock()
        table: DataTable[Text] = self.query_one("#alerts", DataTable)
        rows = shown_alerts(fleet.alerts, self.every)
        keys = [f"{a.rule}@{a.engine}" for a in rows]
        selected = self._selected_key()
        columns = columns_for(rows, self.size.width or self.app.size.width)
        if columns != self._columns:
            table.clear(columns=True)
            for key, label, width in columns:
                table.add_column(label, width=width, key=key)
            self._columns = columns
        else:
            table.clear()
        for key, a in zip(keys, rows, strict=True):
            table.add_row(*self._cells(a, now)[: len(columns)], key=key)
        self._rows = rows
        if selected in keys:
            table.move_cursor(row=keys.index(selected), animate=False)
        self.query_one("#alerts-summary", Line).show(summary_line(fleet.alerts, self.every))
        self._show_detail()

    def _cells(self, a: Alert, now: float) -> list[Text]:
        sev = Text(SEV_SHORT.get(a.severity, a.severity), style=SEV_STYLE.get(a.severity, ""))
        left = clearing_in(a, now)
        if left is not None:
            # Still firing, waiting out its clear period: say so, and how long is left.
            state = Text("clearing", style=f"bold {fmt.WARN}")
            since = Text(f"in {left:.0f} s")
        else:
            state = Text(a.state.value, style="bold" if a.state is AlertState.FIRING else "dim"
                         if a.state in (AlertState.RESOLVED, AlertState.OK) else "")
            since = Text(fmt.ago(now, a.since) if a.since else "-")
        value = fmt.na() if a.value is None else Text(f"{a.value:.3g}")
        return [sev, state, Text(_engine(a)), Text(a.rule), since, value, Text(a.condition)]

    def _selected_key(self) -> str | None:
        a = self.selected_alert()
        return None if a is None else f"{a.rule}@{a.engine}"

    def selected_alert(self) -> Alert | None:
        if not getattr(self, "_rows", None):
            return None
        row = self.query_one("#alerts", DataTable).cursor_row
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        a = self.selected_alert()
        line = self.query_one("#alert-detail", Line)
        if a is None:
            line.show(Text("nothing firing, pending or resolved lately", style="green"))
            return
        t = Text(a.summary, style="bold")
        if a.note:
            t.append(f"  {a.note}", style=fmt.WARN)
        left = clearing_in(a, self.deck.clock())
        if left is not None:
            t.append(f"  clearing in {left:.0f} s", style=fmt.WARN)
            t.append(" (resolves unless it holds again)", style="dim")
        t.append("\n" + a.condition)
        t.append("\n" + (a.runbook or "(no runbook line)"))
        t.append("   e: formula and inputs", style="dim")
        line.show(t, lines=4)

    def selected_engine(self) -> str | None:
        a = self.selected_alert()
        return None if a is None else a.engine

    def explain_target(self) -> tuple[str, str | None]:
        a = self.selected_alert()
        return ("phase", None) if a is None else (f"alert:{a.rule}", a.engine)


async def _show(app: DeckHost) -> None:
    await app.show_screen("alerts")


def _toggle_every(app: DeckHost) -> None:
    s = app.screen
    if isinstance(s, AlertsScreen):
        s.toggle_every()


register_screen(ScreenSpec(
    "alerts", "Alerts", lambda app, target: AlertsScreen(),
    # Not in the footer (it is full at 80 columns): the badge and every toast say "a".
    actions=(Action("alerts", "a,6", "Alerts: firing, pending and resolved, with runbook lines", "Navigate", _show,
                    short="alerts", footer=False, footer_screens=("overview",)),
             Action("alerts_every", "v", "Alerts: list every rule on every engine (ok, n/a, no data too)", "Alerts",
                    _toggle_every, screens=("alerts",), short="all")),
))
