"""The alerts screen: what fires, what is pending, what resolved lately, on which engine.

Each row: severity, state, engine, rule, since when, the value now against its threshold; the
line under the table has the selected alert's summary and runbook; ``e`` explains its formula and
inputs. It reads ``FleetSnapshot.alerts`` only (the hub evaluates them).
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
SEVERITIES = ("critical", "warning", "info")
# Fits 80 columns up to "now"; the condition follows where there is room.
COLUMNS = (("sev", "sev", 4), ("state", "state", 8), ("engine", "engine", 12), ("rule", "rule", 26),
           ("since", "since", 6), ("value", "now", 8), ("condition", "condition", 60))
SEV_SHORT = {"critical": "crit", "warning": "warn", "info": "info"}
SEV_STYLE = {"critical": fmt.CRIT, "warning": fmt.WARN, "info": "cyan"}


def shown_alerts(alerts: tuple[Alert, ...]) -> list[Alert]:
    """Firing first, then pending, then resolved; the most severe and the oldest first in each."""
    rows = [a for a in alerts if a.state in SHOWN]
    return sorted(rows, key=lambda a: (SHOWN.index(a.state), SEVERITIES.index(a.severity) if a.severity in
                                       SEVERITIES else 9, a.since or 0.0, a.engine, a.rule))


def summary_line(alerts: tuple[Alert, ...]) -> Text:
    by_state = {s: sum(1 for a in alerts if a.state is s) for s in AlertState}
    t = Text()
    if not alerts:
        return Text("no alert rules evaluated yet", style="dim")
    t.append(f"{by_state[AlertState.FIRING]} firing", style=fmt.CRIT if by_state[AlertState.FIRING] else "green")
    t.append(f" · {by_state[AlertState.PENDING]} pending · {by_state[AlertState.RESOLVED]} resolved")
    t.append(f" · {by_state[AlertState.OK]} ok · {by_state[AlertState.NA]} n/a"
             f" · {by_state[AlertState.NO_DATA]} no data", style="dim")
    return t


class AlertsScreen(DeckScreen):
    deck_name = "alerts"
    deck_title = "Alerts"

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Line(id="alerts-summary")
        table: CellTable[Text] = CellTable(id="alerts", cursor_type="row", zebra_stripes=False)
        for key, label, width in COLUMNS:
            table.add_column(label, width=width, key=key)
        yield table
        yield Line(id="alert-detail")
        yield DeckFooter()

    def on_mount(self) -> None:
        self._rows: list[Alert] = []
        self.query_one("#alerts", DataTable).focus()

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        now = self.deck.clock()
        table: DataTable[Text] = self.query_one("#alerts", DataTable)
        rows = shown_alerts(fleet.alerts)
        keys = [f"{a.rule}@{a.engine}" for a in rows]
        selected = self._selected_key()
        table.clear()
        for key, a in zip(keys, rows, strict=True):
            table.add_row(*self._cells(a, now), key=key)
        self._rows = rows
        if selected in keys:
            table.move_cursor(row=keys.index(selected), animate=False)
        self.query_one("#alerts-summary", Line).show(summary_line(fleet.alerts))
        self._show_detail()

    def _cells(self, a: Alert, now: float) -> list[Text]:
        sev = Text(SEV_SHORT.get(a.severity, a.severity), style=SEV_STYLE.get(a.severity, ""))
        state = Text(a.state.value, style="bold" if a.state is AlertState.FIRING else "dim"
                     if a.state is AlertState.RESOLVED else "")
        since = Text(fmt.ago(now, a.since) if a.since else "-")
        value = fmt.na() if a.value is None else Text(f"{a.value:.3g}")
        engine = a.engine.replace("http://", "").replace("https://", "")
        return [sev, state, Text(engine), Text(a.rule), since, value, Text(a.condition)]

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
        t.append("\n" + (a.runbook or "(no runbook line)"))
        t.append("   e: formula and inputs", style="dim")
        line.show(t, lines=3)

    def selected_engine(self) -> str | None:
        a = self.selected_alert()
        return None if a is None else a.engine

    def explain_target(self) -> tuple[str, str | None]:
        a = self.selected_alert()
        return ("phase", None) if a is None else (f"alert:{a.rule}", a.engine)


async def _show(app: DeckHost) -> None:
    await app.show_screen("alerts")


register_screen(ScreenSpec(
    "alerts", "Alerts", lambda app, target: AlertsScreen(),
    # Not in the footer (it is full at 80 columns): the badge and every toast say "a".
    actions=(Action("alerts", "a,6", "Alerts: firing, pending and resolved, with runbook lines", "Navigate", _show,
                    short="alerts", footer=False, footer_screens=("overview",)),),
))
