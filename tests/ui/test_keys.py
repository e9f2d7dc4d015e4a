"""Keys in every focus state (issue 10 item 9): no screen opens in a text box; quit, help, screen
switch and back work from every screen whatever has the focus, without a letter ever landing in a
box; every F-key action has a plain letter; the footer at 80 columns shows the screen's keys whole."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Input, TabbedContent

from console.ui.actions import display_key
from console.ui.app import DeckApp
from console.ui.screens.base import DeckScreen
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.modals import ExplainScreen, HelpScreen
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.footer import DeckFooter
from tests.ui.conftest import AppFactory

SCREENS = ("overview", "engine", "gpus", "playground", "bench")


async def _open(app: DeckApp, pilot: Pilot[Any], name: str) -> None:
    await pilot.pause()
    if name != "overview":
        await app.show_screen(name, "vllm-a" if name == "engine" else None)
    await pilot.pause()
    await pilot.pause()
    assert isinstance(app.screen, DeckScreen) and app.screen.deck_name == name


def _quit_calls(app: DeckApp) -> list[object]:
    calls: list[object] = []
    app.exit = lambda *a, **k: calls.append(a)  # type: ignore[method-assign]
    return calls


def _ident(chain: list[Widget], w: Widget) -> str:
    """A widget's name that survives reopening the screen: type, id, and which of its kind it is."""
    same = [x for x in chain if type(x) is type(w) and x.id == w.id]
    return f"{type(w).__name__}#{w.id}/{same.index(w)}"


async def _focus_states(app: DeckApp, pilot: Pilot[Any]) -> list[tuple[str, str]]:
    """Every widget the user can focus on this screen, as (tab of the engine screen, widget name);
    "filter" is the overview's filter box (shown by /)."""
    screen = app.screen
    out: list[tuple[str, str]] = []
    tabs = screen.query(TabbedContent)
    for tab in list(tabs.first().query("TabPane")) if tabs else [None]:
        if tab is not None:
            screen.set_focus(None)  # as the tab keys do: a focused widget keeps its pane shown
            tabs.first().active = str(tab.id)
            await _settle(pilot)
        chain = screen.focus_chain
        out.extend((str(tab.id) if tab else "", _ident(chain, w)) for w in chain)
    if isinstance(screen, OverviewScreen):
        out.append(("", "filter"))
    return out


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


async def _focus(app: DeckApp, pilot: Pilot[Any], tab: str, ident: str) -> Widget:
    tabs = app.screen.query(TabbedContent)
    if tab:
        app.screen.set_focus(None)
        tabs.first().active = tab
        await _settle(pilot)
    if ident == "filter":
        await pilot.press("slash")
        await pilot.pause()
        widget: Widget = app.screen.query_one("#filter", Input)
    else:
        chain = app.screen.focus_chain
        found = [w for w in chain if _ident(chain, w) == ident]
        assert found, (tab, ident, chain)
        widget = found[0]
    widget.focus()
    await pilot.pause()
    assert app.focused is widget, (tab, ident, widget)
    return widget


@pytest.mark.parametrize("name", SCREENS)
async def test_no_screen_opens_with_focus_in_a_text_box(make_app: AppFactory, name: str) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, name)
        assert not isinstance(app.focused, Input), f"{name} opens typing into {app.focused!r}"
        # and after a pop-up closes, the focus is where it was
        await pilot.press("f1")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.focused, Input)


@pytest.mark.parametrize("name", SCREENS)
async def test_quit_help_back_and_screen_keys_from_every_focus_state(make_app: AppFactory, name: str) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, name)
        states = await _focus_states(app, pilot)
        assert states, f"nothing focusable on {name}"
        boxes = 0
        for tab, ident in states:
            if name != app.screen_name:
                await _open(app, pilot, name)
            widget = await _focus(app, pilot, tab, ident)
            label = f"{tab}:{widget!r}"
            typing = isinstance(widget, Input)
            boxes += typing
            before = widget.value if isinstance(widget, Input) else None

            # quit: ctrl+q from anywhere, never a "q" in the box
            calls = _quit_calls(app)
            await pilot.press("ctrl+q")
            assert calls, f"ctrl+q did not quit from {label} on {name}"
            if isinstance(widget, Input):
                widget.value = ""
                await pilot.press("q")
                assert widget.value == "q", "q does not type in a text box"
                widget.value = before or ""
                assert len(calls) == 1, "q in a text box quit"
            del app.exit  # the class's exit again

            # help: f1 from anywhere (? outside a box), esc closes it
            await pilot.press("f1")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen), label
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen_name == name and app.focused is widget, label

            # back / screen switch: esc leaves a box first (focus stays on this screen), then g goes
            if typing:
                await pilot.press("escape")
                await pilot.pause()
                assert app.screen_name == name and not isinstance(app.focused, Input), label
            await pilot.press("g")
            await pilot.pause()
            assert isinstance(app.screen, GpuScreen), f"g from {label} on {name}"
            await pilot.press("escape" if name != "overview" else "o")
            await pilot.pause()
            assert isinstance(app.screen, OverviewScreen), label
        if name in ("overview", "engine", "playground", "bench"):
            assert boxes, f"{name}: its text boxes were not tried"


async def test_screen_keys_and_quit_work_over_pop_ups(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, "overview")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GpuScreen)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        calls = _quit_calls(app)
        await pilot.press("ctrl+q")
        assert calls


def test_every_f_key_action_has_a_plain_letter(make_app: AppFactory) -> None:
    app = make_app()
    fkeys = 0
    for a in app.registry:
        keys = [k.strip() for k in a.keys.split(",")]
        if any(k.startswith("f") and k[1:].isdigit() for k in keys):
            fkeys += 1
            # a key a laptop has without Fn: one printable character (a letter, or ? for help)
            assert any(len(display_key(k)) == 1 for k in keys), f"{a.id} ({a.keys}) has no plain key"
    assert fkeys >= 9  # help, the playground's and the bench's


# The keys that matter on each screen: what its footer must show at 80 columns.
FOOTER_80 = {
    # The other screens by name and key (issue 29): GPUs, playground, bench, alerts.
    "overview": ["⏎", "/", "c", "g", "P", "B", "a", "q", "?"],
    "engine": ["[ ]", "/", "q", "?", "e"],
    "gpus": ["q", "?", "e"],
    "playground": ["i", "n", "v", "c", "r", "x", "q", "?"],
    "bench": ["i", "r", "x", "s", "q", "?", "e"],
}


@pytest.mark.parametrize("name", SCREENS)
async def test_footer_at_80_columns_shows_the_screens_keys(make_app: AppFactory, name: str) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, name)
        await pilot.pause()
        footer = app.screen.query_one(DeckFooter)
        shown = [k.key_display for k in footer.shown()]
        for key in FOOTER_80[name]:
            assert key in shown, f"{name}: {key!r} not in the footer {shown}"
        # whole keys only: every key shown is drawn whole on the line, nothing past the right edge
        line = footer.render()
        assert line.cell_len <= 80, (name, line.plain)
        for k in footer.shown():
            assert f"{k.key_display} {k.description}" in line.plain, (name, k, line.plain)


async def test_keys_typed_ahead_act_in_order(make_app: AppFactory) -> None:
    """Keys that arrive together (a fast typist, a paste, a slow machine) act in the order typed:
    "down down down enter" opens the row the cursor moved to, not the one it left."""
    from textual import events

    from console.ui.screens.engine import EngineScreen

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        for key in ("down", "down", "down", "enter"):
            app.post_message(events.Key(key, None))  # all queued before any is handled
        await _settle(pilot)
        await _settle(pilot)
        assert isinstance(app.screen, EngineScreen) and app.screen.engine == "vllm-a"


async def _type_ahead(app: DeckApp, pilot: Pilot[Any], keys: list[str]) -> None:
    from textual import events

    for key in keys:  # all queued before any is handled, as from a fast typist on a busy machine
        char = {"space": " "}.get(key, key if len(key) == 1 else None)
        app.post_message(events.Key(key, char))
    await _settle(pilot)
    await _settle(pilot)


async def test_text_typed_right_after_the_key_that_opens_a_box_goes_into_the_box(make_app: AppFactory) -> None:
    """'i' then a prompt, '/' then a filter: the letters after the key land in the box, none of them
    runs a command (s would sort, g open the GPUs, p pause...)."""
    from console.ui.screens.playground import PlaygroundScreen

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, "overview")
        await _type_ahead(app, pilot, ["slash", *"sglang"])
        assert isinstance(app.screen, OverviewScreen)
        assert app.screen.query_one("#filter", Input).value == "sglang"
        await pilot.press("escape")
        await _open(app, pilot, "playground")
        await _type_ahead(app, pilot, ["i", *"explain paging", "space", *"please"])
        assert isinstance(app.screen, PlaygroundScreen)
        assert app.screen.query_one("#pg-prompt", Input).value == "explain paging please"
        assert app.source is not None and not app.source.paused
        await pilot.press("escape")
        await _open(app, pilot, "bench")
        await _type_ahead(app, pilot, ["i", "ctrl+a", *"vllm-a"])  # ctrl+a: the field's start
        assert app.screen.query_one("#bench-engines", Input).value.startswith("vllm-a")


async def test_escape_then_q_typed_fast_in_a_text_box_quits(make_app: AppFactory) -> None:
    """esc leaves the box before the keys typed after it are handled: "esc q" quits, never types q."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, "playground")
        await pilot.press("i")
        prompt = app.screen.query_one("#pg-prompt", Input)
        assert app.focused is prompt
        calls = _quit_calls(app)
        await _type_ahead(app, pilot, ["escape", "q"])
        assert calls and prompt.value == ""


async def test_escape_and_q_arriving_as_one_sequence_quits_from_a_text_box(make_app: AppFactory) -> None:
    """A terminal sends esc and q typed within ~0.1 s as one sequence, which Textual reads as alt+q."""
    from textual._xterm_parser import XTermParser

    parser = XTermParser()
    (key,) = [*parser.feed("\x1bq"), *parser.feed("")]
    assert getattr(key, "key", "") == "alt+q"
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(app, pilot, "playground")
        await pilot.press("i")
        prompt = app.screen.query_one("#pg-prompt", Input)
        calls = _quit_calls(app)
        await pilot.press("alt+q")
        assert calls and prompt.value == ""


async def test_a_key_press_makes_collection_step_aside(make_app: AppFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from console.ui.input_gate import GATE

    holds: list[float] = []
    collecting: list[bool] = []
    real = GATE.hold

    def hold(seconds: float = 0.25, *, pause_gc: bool = False) -> None:
        holds.append(seconds)
        real(seconds, pause_gc=pause_gc)
        collecting.append(gc.isenabled())

    monkeypatch.setattr(GATE, "hold", hold)
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        before = len(holds)
        paused_before = GATE.gc_paused
        await pilot.press("g")
        assert len(holds) == before + 1, "a key did not make collection step aside"
        assert collecting[-1] is False, "the garbage collector ran on during the key"
        assert isinstance(app.screen, GpuScreen)
        await pilot.pause(0.4)  # the hold is over: collection is back on
        assert gc.isenabled() and not GATE.gc_held and GATE.gc_paused > paused_before
