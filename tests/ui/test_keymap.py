"""Remapped keys (`[keys]` in config.toml) as the user meets them: the new key acts, the old one no
longer does, and the footer, help and the palette name the new key; read-only refuses the same actions
whatever their keys; the registry refuses unknown ids and keys two live actions would share."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from console.profiles import load_profiles
from console.ui.actions import Action, ActionRegistry, KeyMapError
from console.ui.app import DeckApp, UiOptions
from console.ui.screens.modals import HelpScreen
from console.ui.widgets.footer import DeckFooter
from tests.ui.frozen import FrozenSource, clock


def _app(keys: Mapping[str, Sequence[str]], **options: Any) -> DeckApp:
    return DeckApp(FrozenSource(), options=UiOptions(simulated=True, **options), profiles=load_profiles(),
                   clock=clock, keys=keys)


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


def _footer(app: DeckApp) -> dict[str, str]:
    return {k.description: k.key_display for k in app.screen.query_one(DeckFooter).shown()}


def _help_text(app: DeckApp) -> str:
    assert isinstance(app.screen, HelpScreen)
    table = app.screen.query_one("#help-table", Static)
    from rich.console import Console

    console = Console(width=120, file=io.StringIO(), record=True)
    console.print(table.content)
    return console.export_text()


def _help_rows(app: DeckApp) -> dict[str, str]:
    """description -> the key help shows for it."""
    cells = [re.split(r"\s{2,}", line.strip()) for line in _help_text(app).splitlines()]
    return {c[1]: c[0] for c in cells if len(c) >= 2}


async def test_a_remapped_key_acts_and_the_old_one_no_longer_does() -> None:
    app = _app({"pause": ["z"], "help": ["h"], "overview": ["ctrl+o"], "gpus": ["f11"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        source = app.source
        assert source is not None
        for old in ("p", "space"):
            await pilot.press(old)
            await _settle(pilot)
            assert not source.paused, old
        await pilot.press("z")
        await _settle(pilot)
        assert source.paused
        await pilot.press("z")
        await _settle(pilot)
        assert not source.paused
        # A screen key: g no longer opens the GPUs, f11 does; ctrl+o goes back.
        await pilot.press("g")
        await _settle(pilot)
        assert app.screen_name == "overview"
        await pilot.press("f11")
        await _settle(pilot)
        assert app.screen_name == "gpus"
        await pilot.press("ctrl+o")
        await _settle(pilot)
        assert app.screen_name == "overview"
        await pilot.press("question_mark")
        await _settle(pilot)
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        await _settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("h")  # the help key closes it again
        await _settle(pilot)
        assert not isinstance(app.screen, HelpScreen)


async def test_the_explain_key_closes_the_explain_pop_up_wherever_it_is() -> None:
    from console.ui.screens.modals import ExplainScreen

    app = _app({"explain": ["ctrl+e"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await pilot.press("e")
        await _settle(pilot)
        assert not isinstance(app.screen, ExplainScreen)
        await pilot.press("ctrl+e")
        await _settle(pilot)
        assert isinstance(app.screen, ExplainScreen)
        await pilot.press("ctrl+e")
        await _settle(pilot)
        assert not isinstance(app.screen, ExplainScreen)


async def test_footer_help_and_palette_show_the_new_key() -> None:
    app = _app({"pause": ["z"], "help": ["h"], "explain": [], "filter": ["f"]})
    async with app.run_test(size=(120, 24)) as pilot:
        await _settle(pilot)
        footer = _footer(app)
        assert footer["pause"] == "z" and footer["help"] == "h" and footer["filter"] == "f"
        assert "explain" not in footer  # unbound: nothing to press
        await pilot.press("h")
        await _settle(pilot)
        rows = _help_rows(app)
        assert rows["Pause / resume collection"] == "z"
        assert rows["Help: every key"] == "h"
        assert rows["Filter engines"] == "f"
        assert rows["Explain the metric under the cursor"] == "unbound"
        await pilot.press("h")
        await _settle(pilot)
        from console.ui.palette import ActionsProvider

        provider = ActionsProvider(app.screen)
        labels = [str(hit.prompt) async for hit in provider.discover()]
        assert "Pause / resume collection  (z)" in labels
        assert "Explain the metric under the cursor" in labels  # still there, to run from the palette


async def test_footer_at_80_columns_with_a_remap() -> None:
    app = _app({"pause": ["ctrl+space"], "quit": ["ctrl+x"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        footer = _footer(app)
        assert footer.get("quit") == "^x" and "q" not in footer.values()
        assert app.screen.query_one(DeckFooter).render().cell_len <= 80


async def test_quit_on_a_remapped_ctrl_key_works_from_a_text_box() -> None:
    app = _app({"quit": ["ctrl+x"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        await pilot.press("slash")  # the overview's filter box
        await _settle(pilot)
        calls: list[object] = []
        app.exit = lambda *a, **k: calls.append(a)  # type: ignore[method-assign]
        await pilot.press("q")
        await _settle(pilot)
        assert not calls  # q is the box's letter, and no longer quit's anyway
        await pilot.press("ctrl+x")
        await _settle(pilot)
        assert calls


async def test_read_only_refuses_a_remapped_engine_action() -> None:
    app = _app({"stop": ["ctrl+y"]}, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        notes: list[str] = []
        app.notify = lambda message, *a, **k: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("ctrl+y")
        await _settle(pilot)
        assert any("read-only mode" in n and "stop" in n for n in notes), notes
        assert "stop" not in [a.id for a in app.registry.visible(read_only=True)]


async def test_ctrl_c_names_the_users_quit_key() -> None:
    app = _app({"quit": ["ctrl+x"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        notes: list[str] = []
        app.notify = lambda message, *a, **k: notes.append(str(message))  # type: ignore[method-assign]
        await pilot.press("ctrl+c")
        await _settle(pilot)
        assert notes == ["quit: ^x"]


async def test_ctrl_c_can_be_the_users_quit_key() -> None:
    app = _app({"quit": ["q", "ctrl+c"]})
    async with app.run_test(size=(80, 24)) as pilot:
        await _settle(pilot)
        calls: list[object] = []
        app.exit = lambda *a, **k: calls.append(a)  # type: ignore[method-assign]
        await pilot.press("ctrl+c")
        await _settle(pilot)
        assert calls


# -- the registry's own rules ------------------------------------------------------------------------


def _default_registry() -> ActionRegistry:
    return DeckApp(None).registry


def test_the_default_keys_share_a_key_between_live_actions_only_by_design() -> None:
    """Only back and leave_box share a key while both can be active (esc: leave_box is the priority
    one in a text box); the same key on two screens is fine (i, r, x, s, /)."""
    reg = _default_registry()
    live = {(a.id, b.id) for a, b, _ in reg.shared_keys() if a.active_with(b)}
    assert live == {("back", "leave_box")}
    assert len(reg.rebound({})) == len(reg)
    moved = reg.rebound({"back": ["backspace", "escape"]})
    assert moved.get("back").key_list == ["backspace", "escape"] and moved.get("leave_box").keys == "escape"


@pytest.mark.parametrize(
    ("keys", "action", "says"),
    [
        ({"qiut": ["x"]}, "qiut", "did you mean 'quit'?"),
        ({"no_such_thing_at_all": ["x"]}, "no_such_thing_at_all", "no such action (`enginedeck config keys`"),
        ({"pause": ["e"]}, "pause", "'e' is also the key of 'explain' (everywhere)"),
        ({"sort": ["p"]}, "sort", "'p' is also the key of 'pause' (everywhere)"),
        ({"pg_cycle": ["i"]}, "pg_cycle", "'i' is also the key of 'pg_prompt' on playground"),
        ({"pause": ["slash"]}, "pause", "'slash' is also the key of 'filter' on overview"),
        ({"restart": ["r"]}, "restart", "'r' is a navigation-like key"),
        ({"start": ["enter"]}, "start", "'enter' is a navigation-like key"),
    ],
)
def test_unknown_ids_and_keys_live_actions_would_share_are_refused(
    keys: dict[str, list[str]], action: str, says: str
) -> None:
    with pytest.raises(KeyMapError) as exc:
        _default_registry().rebound(keys)
    assert exc.value.action == action and says in exc.value.problem and "\n" not in str(exc.value)


def test_the_same_key_on_screens_never_shown_together_is_allowed() -> None:
    reg = _default_registry().rebound({"sort": ["i"], "bench_save": ["ctrl+y"], "stop": ["ctrl+x"]})
    assert reg.get("sort").keys == "i" and reg.get("bench_form").keys == "i"
    assert reg.get("stop").mutating  # read-only keeps refusing it, whatever its key


def test_text_box_places_keep_actions_apart() -> None:
    """An action only outside a text box and one only inside can share a key."""

    def noop(_: object) -> None:
        return None

    reg = ActionRegistry([
        Action("open_box", "slash", "", "G", noop, text_box="outside"),
        Action("leave", "escape", "", "G", noop, text_box="inside"),
        Action("other", "z", "", "G", noop),
    ])
    assert reg.rebound({"leave": ["slash"]}).get("leave").keys == "slash"
    with pytest.raises(KeyMapError, match="also the key of 'open_box'"):
        reg.rebound({"other": ["slash"]})
    remapped = reg.rebound({"other": ["plus"]})
    assert remapped.get("other").key_display is None
