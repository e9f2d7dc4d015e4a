"""A/B compare: the same metric of two engines overlaid on one chart, same axes, a legend with names.

Opened from the overview with ``c`` (the engine marked with ``m`` and the one under the cursor, or
the one under the cursor and the next), from the playground's split view and from the bench, each
with its own two engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from console.model import FleetSnapshot
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.fleet_panels import short_name
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.plot import (
    COUNT,
    DEFAULT_WINDOW,
    FRACTION_PCT,
    LEGEND_GLYPHS,
    SECONDS,
    SERIES_STYLES,
    TOKENS_PER_S,
    WINDOWS,
    Series,
    Unit,
)
from console.ui.widgets.timechart import TimeChart, fit_grid_rows

SEPARATOR = "\t"  # between the two engine names of the screen's target
# (history key, title, unit)
COMPARE_CHARTS: tuple[tuple[str, str, Unit], ...] = (
    ("ttft_p50", "TTFT p50", SECONDS),
    ("ttft_p99", "TTFT p99", SECONDS),
    ("itl_p50", "ITL p50", SECONDS),
    ("generation_tps", "generation", TOKENS_PER_S),
    ("kv_usage", "KV cache", FRACTION_PCT),
    ("waiting", "queue (waiting)", COUNT),
)


def compare_target(a: str, b: str) -> str:
    return a + SEPARATOR + b


class CompareScreen(DeckScreen):
    deck_name = "compare"
    deck_title = "compare"

    def __init__(self, target: str) -> None:
        super().__init__()
        a, _, b = target.partition(SEPARATOR)
        self.engines = (a, b)
        self.window = DEFAULT_WINDOW

    def title_text(self) -> str:
        return f"compare {short_name(self.engines[0])} vs {short_name(self.engines[1])}"

    def compose(self) -> ComposeResult:
        yield TopBar()
        yield Static(id="compare-head")
        with VerticalScroll(id="compare-scroll"), Grid(id="compare-grid"):
            for key, title, unit in COMPARE_CHARTS:
                c = TimeChart(title, unit, id=f"cmp-{key}", classes="chart")
                c.metric = key
                c.can_focus = True
                yield c
        yield DeckFooter()

    def on_mount(self) -> None:
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit)

    def _fit(self) -> None:
        if self.is_mounted:
            fit_grid_rows(self.query_one("#compare-grid", Grid), self.query_one("#compare-scroll", VerticalScroll),
                          len(COMPARE_CHARTS))

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        head = Text()
        for k, name in enumerate(self.engines):
            e = fleet.engine(name)
            if k:
                head.append("   vs   ", style="dim")
            head.append(f"{LEGEND_GLYPHS[k]} ", style=SERIES_STYLES[k])
            head.append(fmt.shown(name), style="bold")
            if e is None:
                head.append("  not in the fleet", style=fmt.WARN)
            else:
                head.append("  ")
                head.append_text(fmt.phase(e))
                if e.identity.models:
                    head.append("  " + fmt.shown(e.identity.models[0]), style="dim")
        head.append(f"   (same axes; {LEGEND_GLYPHS[0]} first, {LEGEND_GLYPHS[1]} second, ▓ both)", style="dim")
        self.query_one("#compare-head", Static).update(head)
        src = self.deck.source
        if src is None:
            return
        end = fleet.taken_at
        for key, _title, _unit in COMPARE_CHARTS:
            series = [Series(name, src.history.window((name, key), end, self.window)) for name in self.engines]
            self.query_one(f"#cmp-{key}", TimeChart).set_data(series, end=end, window=self.window)

    def step_window(self, step: int) -> None:
        spans = [s for s, _ in WINDOWS]
        i = spans.index(self.window) if self.window in spans else 1
        self.window = spans[(i + step) % len(spans)]
        if self.deck.fleet is not None:
            self.show_fleet(self.deck.fleet)

    def selected_engine(self) -> str | None:
        return self.engines[0]

    def explain_target(self) -> tuple[str, str | None]:
        focused = self.focused
        metric = focused.metric if isinstance(focused, TimeChart) else COMPARE_CHARTS[0][0]
        return (metric, self.engines[0])


def _screen(app: DeckHost, target: str | None) -> CompareScreen:
    assert target is not None
    return CompareScreen(target)


def pair_for(app: DeckHost) -> tuple[str, str] | None:
    """The two engines the current screen compares: its own ``compare_pair`` (the overview's mark and
    cursor, the playground's split panes, the bench's engines)."""
    pick: Callable[[], tuple[str, str] | None] | None = getattr(app.screen, "compare_pair", None)
    return pick() if pick is not None else None


async def open_compare(app: DeckHost) -> None:
    pair = pair_for(app)
    if pair is None:
        app.screen.notify("compare needs two engines", severity="warning")
        return
    await app.show_screen("compare", compare_target(*pair))


ACTIONS: Sequence[Action] = (
    Action("compare", "c", "Compare A/B: two engines' charts overlaid (m marks the first)", "Navigate", open_compare,
           screens=("overview", "bench"), short="A/B"),
    Action("pg_compare", "A", "Compare A/B: the split view's two engines on one chart each", "Playground",
           open_compare, screens=("playground",), short="A/B", footer=False),
)

register_screen(ScreenSpec("compare", "Compare A/B", _screen, tuple(ACTIONS)))
