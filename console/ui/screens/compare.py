"""A/B compare: the same metric of two engines overlaid on one chart, same axes, a legend with both
names and a verdict per chart (console.ui.widgets.pairplot draws them).

Opened from the overview with ``c`` (the engine marked with ``m`` and the one under the cursor, or
the one under the cursor and the next one with data in most of the charts), from the playground's
split view and from the bench, each with its own two engines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, VerticalScroll
from textual.widgets import Static

from console.model import FleetSnapshot
from console.telemetry.metrics.history import History
from console.ui import format as fmt
from console.ui.actions import Action
from console.ui.fleet_panels import short_name
from console.ui.host import DeckHost
from console.ui.screens import ScreenSpec, register_screen
from console.ui.screens.base import DeckScreen, TopBar
from console.ui.widgets.footer import DeckFooter
from console.ui.widgets.pairchart import PairChart
from console.ui.widgets.pairplot import BOTH_GLYPH, CLIP_UP, LEGEND_GLYPHS, MIN_NAME, Better
from console.ui.widgets.plot import (
    COUNT,
    DEFAULT_WINDOW,
    FRACTION_PCT,
    SECONDS,
    SERIES_STYLES,
    TOKENS_PER_S,
    WINDOWS,
    Series,
    Unit,
)
from console.ui.widgets.timechart import TimeChart, fit_grid_rows

SEPARATOR = "\t"  # between the two engine names of the screen's target
# (history key, title, unit, which way is better: latency and queue lower, throughput higher, KV use neither)
COMPARE_CHARTS: tuple[tuple[str, str, Unit, Better], ...] = (
    ("ttft_p50", "TTFT p50", SECONDS, "lower"),
    ("ttft_p99", "TTFT p99", SECONDS, "lower"),
    ("itl_p50", "ITL p50", SECONDS, "lower"),
    ("generation_tps", "generation", TOKENS_PER_S, "higher"),
    ("kv_usage", "KV cache", FRACTION_PCT, None),
    ("waiting", "queue (waiting)", COUNT, "lower"),
)
# An engine with data in fewer of the charts than this is not picked as the second one by itself.
MOST_CHARTS = len(COMPARE_CHARTS) // 2 + 1


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
            for key, title, unit, better in COMPARE_CHARTS:
                c = PairChart(title, unit, better, id=f"cmp-{key}", classes="chart")
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
            if self.deck.fleet is not None:  # the head line is fitted to the new width
                self._show_head(self.deck.fleet)

    def _show_head(self, fleet: FleetSnapshot) -> None:
        head = self.query_one("#compare-head", Static)
        head.update(compare_head(fleet, self.engines, head.size.width or self.app.size.width - 2))

    def show_fleet(self, fleet: FleetSnapshot) -> None:
        self._show_head(fleet)
        src = self.deck.source
        if src is None:
            return
        end = fleet.taken_at
        for key, *_ in COMPARE_CHARTS:
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


def compare_head(fleet: FleetSnapshot, engines: tuple[str, str], width: int) -> Text:
    """One line that never wraps: each engine's glyph, name and phase (and model, where there is room),
    and the key to the overlap and clip marks. Models go first, then the key, then the names are cut
    in their middle."""
    phases = []
    for name in engines:
        e = fleet.engine(name)
        phases.append((Text("not in the fleet", style=fmt.WARN) if e is None else fmt.phase(e),
                       "" if e is None or not e.identity.models else fmt.shown(e.identity.models[0])))
    key = f"   {BOTH_GLYPH} both  {CLIP_UP} clipped"
    names = [fmt.shown(n) for n in engines]

    def line(shown_names: list[str], models: bool, with_key: bool) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        for k, name in enumerate(shown_names):
            if k:
                t.append("  vs  ", style="dim")
            t.append(f"{LEGEND_GLYPHS[k]} ", style=SERIES_STYLES[k])
            t.append(name, style="bold")
            t.append(" ")
            t.append_text(phases[k][0])
            if models and phases[k][1]:
                t.append(" " + phases[k][1], style="dim")
        if with_key:
            t.append(key, style="dim")
        return t

    for models, with_key in ((True, True), (False, True), (False, False)):
        t = line(names, models, with_key)
        if t.cell_len <= width:
            return t
    t = line(names, False, False)
    over = t.cell_len - width
    cut = list(names)
    while over > 0:
        k = 0 if len(cut[0]) >= len(cut[1]) else 1
        if len(cut[k]) <= MIN_NAME:
            break
        cut[k] = fmt.fit_name(names[k], len(cut[k]) - 1)
        over -= 1
    t = line(cut, False, False)
    t.truncate(width, overflow="ellipsis")
    return t


def charts_with_data(history: History, name: str, end: float, window: float) -> int:
    """How many of the compare charts ``name`` has data for in the ``window`` seconds up to ``end``."""
    return sum(1 for key, *_ in COMPARE_CHARTS
               if any(r[3] == r[3] for r in history.window((name, key), end, window)))


class NoComparePair(Exception):
    """No second engine to compare with; the message says why."""


def _screen(app: DeckHost, target: str | None) -> CompareScreen:
    assert target is not None
    return CompareScreen(target)


def pair_for(app: DeckHost) -> tuple[str, str] | None:
    """The two engines the current screen compares: its own ``compare_pair`` (the overview's mark and
    cursor, the playground's split panes, the bench's engines). Raises NoComparePair with the reason
    when the screen has engines but none to compare with."""
    pick: Callable[[], tuple[str, str] | None] | None = getattr(app.screen, "compare_pair", None)
    return pick() if pick is not None else None


async def open_compare(app: DeckHost) -> None:
    try:
        pair = pair_for(app)
    except NoComparePair as no_pair:
        app.screen.notify(str(no_pair), severity="warning")
        return
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
