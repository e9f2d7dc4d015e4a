"""What every data screen shares: the top bar, the footer, and the fleet-update hook.

Screens see the app through the ``DeckHost`` protocol (console/ui/host.py), never the app module.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.screen import Screen
from textual.widget import Widget

from console.model import AlertState, FleetSnapshot
from console.target import EngineTarget
from console.ui import format as fmt
from console.ui.host import DeckHost, host_of
from console.ui.timeline import is_replay, timeline_badge
from console.ui.widgets.line import Line


class TopBar(Line):
    """One line: what this is, how fresh, paused or live, read-only, simulated. It never runs past the
    width: when the words do not fit, the badges collapse to counts and symbols, then the title (the
    screen's engine names) is cut in its middle with "…"."""

    DEFAULT_CSS = """
    TopBar { height: 1; background: $panel; color: $text; }
    """

    def draw(self, app: DeckHost, title: str) -> None:
        width = self.size.width or self.app.size.width
        badges = self._badges(app, short=False)
        if len(" enginedeck ") + 1 + len(fmt.shown(title)) + badges.cell_len > width:
            badges = self._badges(app, short=True)
        t = Text()
        t.append(" enginedeck ", style="bold reverse")
        room = width - t.cell_len - 1 - badges.cell_len
        t.append(" " + fmt.fit_name(fmt.shown(title), max(1, room)))  # engine names: inert before they are cut
        t.append_text(badges)
        t.truncate(width, overflow="ellipsis")  # a title of one cell and still too long: the badges end in …
        self.show(t)

    def _badges(self, app: DeckHost, *, short: bool) -> Text:
        """Everything after the title; ``short``: as counts and symbols (``SIM``, ``4 eng 1 sick``,
        ``▲ 1c 2w``)."""
        fleet = app.fleet
        t = Text()
        if app.options.simulated:
            t.append("  SIM" if short else "  SIMULATED", style=fmt.SIM)
        if app.recording_active:
            t.append("  ● REC", style="bold red")
        src = app.source
        if is_replay(src):
            t.append("  ")
            t.append_text(timeline_badge(src, wide=not short and self.size.width >= 100))
        elif app.options.read_only:
            t.append("  RO" if short else "  read-only", style="bold")
        if src is not None and not is_replay(src):
            if src.paused:
                t.append("  ❚❚" if short else "  ❚❚ paused", style="bold yellow")
            else:
                t.append(f"  ● {src.refresh:g} s")
        if fleet is not None and fleet.engines:
            sick = sum(1 for e in fleet.engines if fmt.is_sick(e))
            n = len(fleet.engines)
            t.append(f"  {n} eng" if short else f"  {fmt.plural(n, 'engine')}")
            if sick:
                t.append(f" {sick} sick" if short else f" {fmt.plural(sick, 'needs', 'need')} attention",
                         style=fmt.CRIT)
        if fleet is not None and fleet.alerts:
            firing = {sev: 0 for sev in ("critical", "warning", "info")}
            for a in fleet.alerts:
                if a.state is AlertState.FIRING:
                    firing[a.severity] = firing.get(a.severity, 0) + 1
            if any(firing.values()):
                t.append("  ▲", style=fmt.CRIT if firing["critical"] else fmt.WARN)
                for sev, style in (("critical", fmt.CRIT), ("warning", fmt.WARN), ("info", "cyan")):
                    if firing.get(sev):
                        t.append(f" {firing[sev]}{sev[0]}" if short else f" {firing[sev]} {sev}", style=style)
                if not short:
                    t.append(" (a)", style="dim")
        if app.backing_problem:
            t.append(f"  {app.backing_problem.split(':')[0]}", style=fmt.CRIT)  # the notice has the rest
        if fleet is not None and not is_replay(src):
            age = app.clock() - fleet.taken_at
            if src is not None and not src.paused and age > 3 * max(src.refresh, 1.0):
                ago = fmt.ago(app.clock(), fleet.taken_at)
                t.append(f"  stale {ago}" if short else f"  no new data for {ago}", style=fmt.CRIT)
        return t


class DeckScreen(Screen[None]):
    """A screen fed with FleetSnapshots. Subclasses implement ``show_fleet``."""

    deck_name: ClassVar[str] = ""
    deck_title: ClassVar[str] = ""

    @property
    def deck(self) -> DeckHost:
        """The console this screen is part of."""
        host = host_of(self.app)
        assert host is not None, "a deck screen runs in the console app"
        return host

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        """Redraw from ``fleet``; called on every snapshot while this screen is active."""

    def refresh_top(self) -> None:
        for bar in self.query(TopBar):
            bar.draw(self.deck, self.title_text())

    def title_text(self) -> str:
        return self.deck_title

    def selected_engine(self) -> str | None:
        return None

    def explain_target(self) -> tuple[str, str | None]:
        """(metric key, engine name) for the explain popup."""
        return ("phase", self.selected_engine())

    def deck_back(self) -> bool:
        """Handle Escape locally (close a filter...); True when handled."""
        return False

    def home_focus(self) -> Widget | None:
        """Where Escape from a text box puts the focus (None: nowhere in particular)."""
        return None

    def layout_changed(self, name: str) -> None:
        """The app switched to layout ``name`` (compact, default, wide)."""

    def detail_engine(self) -> str | None:
        """The engine whose every raw series this screen shows (the hub parses them only then)."""
        return None

    def on_screen_resume(self) -> None:
        # Also on a return to a kept screen, and when a pop-up over it closes.
        if self.deck.source is not None:
            self.deck.source.set_detail(self.detail_engine())
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)
        self.refresh_top()


def console_engines(app: DeckHost, *, forward: bool = True) -> list[EngineTarget]:
    """The engines this console knows: its configured instances (else the local engines the fleet
    snapshot shows), then the remote hosts' engines, each at a local port forwarded over ssh to its
    port there (the source's ``engine_url``; ``forward=False``: their own URLs, no ssh started);
    those from the snapshot have no API key."""
    profiles = app.profiles
    engines = [] if app.fleet is None else [e for e in app.fleet.engines if e.profile in profiles]
    local = [inst.target for inst in app.instances.values()] if app.instances else [
        EngineTarget(e.name, profiles[e.profile], e.url) for e in engines if not e.host]
    url_of = getattr(app.source, "engine_url", None) if forward else None  # a RemoteFleet's
    remote = [EngineTarget(e.name, profiles[e.profile], url_of(e) if url_of else e.url) for e in engines if e.host]
    return local + remote
