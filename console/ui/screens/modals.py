"""Pop-ups: help (generated from the action registry), explain-a-metric, and confirmation."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from console.profiles import EngineProfile
from console.ui import format as fmt
from console.ui.actions import ActionRegistry, display_key
from console.ui.explain_rows import explain_key
from console.ui.host import host_of

# Keys the screens' widgets handle themselves (tables, tabs, scrolling: Textual's own bindings), listed
# in help beside the registry's actions, per screen ("" for every screen).
MOVE_KEYS: dict[str, tuple[tuple[str, str], ...]] = {
    "": (("tab / shift+tab", "focus the next / previous panel (table, chart, tab bar)"),
         ("↑ ↓ pgup pgdn home end", "move in a table, scroll a panel")),
    "overview": (("← →", "choose the column that e explains"), ("↑ ↓", "choose the engine (m marks it for c)")),
    "engine": (("← → (tab bar)", "switch tab"), ("tab", "focus a chart: e explains it")),
    "gpus": (("↑ ↓", "choose the GPU the charts show"), ("← →", "choose the column that e explains")),
    "compare": (("tab", "focus a chart: e explains it"),),
}


def help_table(registry: ActionRegistry, *, read_only: bool, hidden_groups: tuple[str, ...] = (),
               screen: str = "") -> Table:
    """Every key: first this screen's (its movement keys and its own actions), then every group."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    table.add_column(style="dim")
    if screen:
        table.add_row(Text(f"This screen ({screen})", style="bold underline"), "", "")
        for keys, what in (*MOVE_KEYS.get(screen, ()), *MOVE_KEYS[""]):
            table.add_row(keys, what, "")
        for a in registry.visible(read_only=read_only, hidden_groups=hidden_groups):
            if screen in a.screens:
                table.add_row(display_key(a.keys) or Text("unbound", style="dim"), a.description, "")
    for group, actions in registry.groups(read_only=read_only, hidden_groups=hidden_groups).items():
        table.add_row(Text(group, style="bold underline"), "", "")
        for a in actions:
            where = "" if not a.screens else ", ".join(a.screens)
            desc = a.description + (" (asks first)" if a.mutating else "")
            # An action [keys] in config.toml unbound is still listed: the palette runs it.
            table.add_row(display_key(a.keys) or Text("unbound", style="dim"), desc, where)
    return table


class _Popup(ModalScreen[None]):
    """A read-only pop-up: esc (or q) closes it, and a screen key (o g P B 1-5) closes it and goes there,
    so the global keys work with a pop-up open too (ctrl+q quits from anywhere: a priority binding)."""

    async def on_key(self, event: events.Key) -> None:
        host = host_of(self.app)
        if host is None:
            return
        for a in host.registry:
            if a.group == "Navigate" and event.key in a.key_list:
                event.stop()
                self.dismiss(None)
                self.app.call_later(host.run_deck_action, a.id)
                return

    closed_by = ""  # the action whose keys open this pop-up: they close it too, wherever [keys] put them

    def on_mount(self) -> None:
        host = host_of(self.app)
        if host is not None and self.closed_by in host.registry:
            for key in host.registry.get(self.closed_by).key_list:
                self._bindings.bind(key, "dismiss", "Close", show=False)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class HelpScreen(_Popup):
    BINDINGS: ClassVar = [Binding("escape,q,question_mark,f1", "dismiss", "Close", show=False)]
    closed_by = "help"

    def __init__(self, registry: ActionRegistry, *, read_only: bool, reason: str = "",
                 hidden_groups: tuple[str, ...] = (), screen: str = "") -> None:
        super().__init__()
        self.screen_name = screen  # the screen help was opened on: its keys first
        self.registry = registry
        self.read_only = read_only
        self.reason = reason  # why read-only ("replay"); "" for read-only mode
        self.hidden_groups = hidden_groups  # the replay's keys in a live console

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box", classes="popup"):
            note = Text("Keys (also in the command palette, ctrl+p). ", style="bold")
            if self.read_only:
                why = "Replay" if self.reason == "replay" else "Read-only mode"
                note.append(f"{why}: engine control is disabled and not listed.", style=fmt.WARN)
            note.append("\nCells: 'n/a' = not exported / no data yet (never 0) · '~' = few samples (latency) or an "
                        "estimate (energy of a shared GPU) · '>' = beyond the largest histogram bucket (a lower "
                        "bound) · '*' = a 60 s rate of a counter the engine bumps when requests finish · "
                        "'--' = engine not answering · 'stale N s: why' = last collection failed N s ago", style="dim")
            note.append("\nCharts: y-axis in the metric's unit, time axis to 'now', the window in the title (w "
                        "changes it); two lines: ▀▄ the first, ⠉⣀ the second, ▓ both; a thin │ reaches a "
                        "column's max; blank = no data (stale, stopped, not collected)", style="dim")
            yield Static(note)
            yield Static(help_table(self.registry, read_only=self.read_only, hidden_groups=self.hidden_groups,
                                    screen=self.screen_name), id="help-table")


class ExplainScreen(_Popup):
    BINDINGS: ClassVar = [Binding("escape,q,e", "dismiss", "Close", show=False)]
    closed_by = "explain"

    def __init__(self, metric: str, profile: EngineProfile | None, engine: str, *, simulated: bool,
                 text: Text | None = None) -> None:
        super().__init__()
        self.text = text  # given: shown as it is (an alert's explanation)
        self.metric = metric
        self.profile = profile
        self.engine = engine
        self.simulated = simulated

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="explain-box", classes="popup"):
            body = self.text if self.text is not None else explain_key(
                self.metric, self.profile, engine_name=self.engine, simulated=self.simulated)
            # An explanation names series, label values and reasons the engine sent: inert text.
            yield Static(fmt.shown_text(body, multiline=True) if isinstance(body, Text) else body, id="explain-text")
            yield Static(Text("esc to close", style="dim"))


class ConfirmScreen(ModalScreen[bool]):
    """y confirms; n, esc or Enter (the default) cancel. The default is No."""

    BINDINGS: ClassVar = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape,enter", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        # The box sits on a band as wide as the screen: the screen under a pop-up shows through
        # beside it, and a cell cut there read as stray characters on the border.
        with Horizontal(id="confirm-band"), Vertical(id="confirm-box", classes="popup"):
            yield Static(fmt.outside(self.question, "bold"))  # it names the engine
            yield Static(Text("y = yes   n / esc / Enter = no (default)", style="dim"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
