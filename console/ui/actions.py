"""The one action registry: key bindings, the footer, the help screen and the command palette all
derive from it, so they can never drift apart.

An action is data: an id, its key(s), a description, a group, where it is available, whether it
changes anything outside the console (``mutating``), and a handler. ``--read-only`` removes every
mutating action from help and the palette; its key stays bound only to say that it is disabled.

This module imports nothing from Textual so it can be reasoned about (and tested) on its own; the
handler receives the running console as its ``DeckHost`` (console/ui/host.py).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.ui.host import DeckHost

# A handler gets the console it runs in and may be async.
Handler = Callable[["DeckHost"], "Awaitable[None] | None"]

# Keys a destructive action must never use: navigation habits (vim motions, arrows, paging) and
# anything a finger might hit while scrolling (k9s #1121/#1391).
_NAV_KEYS = frozenset(
    {
        *("h", "j", "k", "l", "g", "G", "w", "b", "u", "d", "f", "n", "N"),
        *("up", "down", "left", "right", "pageup", "pagedown", "home", "end"),
        *("space", "enter", "escape", "tab"),
        *("ctrl+d", "ctrl+u", "ctrl+f", "ctrl+b", "ctrl+k", "ctrl+j", "ctrl+n", "ctrl+p", "ctrl+c"),
    }
)


@dataclass(frozen=True, slots=True)
class Action:
    id: str
    keys: str  # Textual key names, comma-separated ("space,p")
    description: str
    group: str
    handler: Handler
    mutating: bool = False
    screens: tuple[str, ...] = ()  # screen names where it applies; empty = everywhere
    footer: bool = True  # shown in the footer (help and palette list every action regardless)
    key_display: str | None = None
    short: str = ""  # footer label (the description when empty)
    # Where focus may be: "any", "outside" a text box (its letters are the box's), or only "inside"
    # one (leave it). An "outside"/"inside" action that moves the focus is checked before the focused
    # widget sees the key (``priority``), so that keys typed right after it go where it put the focus.
    text_box: str = "any"
    priority: bool = False
    # Screens whose footer shows this action although ``footer`` is False (the overview names the
    # other screens' keys); and its place there: lower first, the registry's order within.
    footer_screens: tuple[str, ...] = ()
    footer_rank: int = 0

    def available_on(self, screen: str) -> bool:
        return not self.screens or screen in self.screens

    @property
    def key_list(self) -> list[str]:
        """Its keys, one per item ([] when the user unbound it)."""
        return [k.strip() for k in self.keys.split(",") if k.strip()]

    def active_with(self, other: Action) -> bool:
        """Whether a key press could find both enabled: a screen in common (or a global one), and a
        place of the focus in common (in or outside a text box)."""
        screens = not self.screens or not other.screens or bool(set(self.screens) & set(other.screens))
        return screens and {self.text_box, other.text_box} != {"inside", "outside"}


def display_key(keys: str) -> str:
    """Human form of a Textual key spec: ``question_mark`` -> ``?``, ``ctrl+r`` -> ``^r``."""
    names = {
        "question_mark": "?",
        "slash": "/",
        "plus": "+",
        "minus": "-",
        "space": "space",
        "escape": "esc",
        "enter": "enter",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "full_stop": ".",
        "equals_sign": "=",
    }
    out = []
    for k in (k.strip() for k in keys.split(",")):
        if not k:
            continue  # an action the user unbound
        k = names.get(k, k)
        if len(k) > 1 and "+" not in k:
            k = _char_of(k) or k  # number_sign -> #, as Textual's footer shows it
        if k.startswith("ctrl+"):
            k = "^" + k.removeprefix("ctrl+")
        out.append(k)
    return "/".join(out)


def _nav_like(key: str) -> bool:
    return key in _NAV_KEYS or (len(key) == 1 and key.islower())


def _char_of(name: str) -> str | None:
    try:
        char = unicodedata.lookup(name.replace("_", " ").upper())
    except KeyError:
        return None
    return char if char.isprintable() and not char.isspace() else None


class KeyMapError(ValueError):
    """A ``[keys]`` entry the registry cannot take: ``action`` names the entry."""

    def __init__(self, action: str, problem: str) -> None:
        super().__init__(f"{action}: {problem}")
        self.action = action
        self.problem = problem


class ActionRegistry:
    """Ordered actions by id. Registration rejects a destructive action on a navigation key."""

    def __init__(self, actions: Iterable[Action] = ()) -> None:
        self._actions: dict[str, Action] = {}
        for a in actions:
            self.register(a)

    def register(self, action: Action) -> None:
        if action.id in self._actions:
            raise ValueError(f"action {action.id!r} registered twice")
        if action.mutating:
            for key in action.key_list:
                if _nav_like(key):
                    raise ValueError(f"mutating action {action.id!r} may not use the navigation-like key {key!r}")
        self._actions[action.id] = action

    def get(self, action_id: str) -> Action:
        return self._actions[action_id]

    def __contains__(self, action_id: object) -> bool:
        return action_id in self._actions

    def __iter__(self) -> Iterator[Action]:
        return iter(self._actions.values())

    def __len__(self) -> int:
        return len(self._actions)

    def rebound(self, keys: Mapping[str, Sequence[str]]) -> ActionRegistry:
        """A copy with the user's keys (``[keys]`` in config.toml): each replaces that action's own,
        an empty list unbinds it. ``KeyMapError`` for an unknown action, a destructive action on a
        navigation key, or a key two actions would share while both can be active. Actions that
        share a key by design (esc: back, and leave_box in a text box) may go on sharing one."""
        for aid in keys:
            if aid not in self._actions:
                close = difflib.get_close_matches(aid, list(self._actions), n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise KeyMapError(aid, f"no such action ({hint}`enginedeck config keys` lists them)")
        out = ActionRegistry()
        for a in self:
            if a.id in keys:
                # The key's own display only fits the key it was written for.
                a = replace(a, keys=",".join(keys[a.id]), key_display=None)
            nav = [k for k in a.key_list if _nav_like(k)] if a.mutating else []
            if nav:
                raise KeyMapError(a.id, f"{nav[0]!r} is a navigation-like key, and this action changes an engine: "
                                        "give it a capital letter or a ctrl+ key")
            out.register(a)
        layered = self._shared_pairs()
        for a, b, key in out.shared_keys():
            if frozenset((a.id, b.id)) in layered or not a.active_with(b):
                continue
            changed = a if a.id in keys else b
            other = b if changed is a else a
            where = f" on {', '.join(other.screens)}" if other.screens else " (everywhere)"
            raise KeyMapError(changed.id, f"{key!r} is also the key of {other.id!r}{where}; give one of them "
                                          "another key")
        return out

    def shared_keys(self) -> Iterator[tuple[Action, Action, str]]:
        """Each two actions with a key in common, and the key."""
        by_key: dict[str, list[Action]] = {}
        for a in self:
            for key in a.key_list:
                by_key.setdefault(key, []).append(a)
        for key, actions in by_key.items():
            for i, a in enumerate(actions):
                for b in actions[i + 1 :]:
                    yield a, b, key

    def _shared_pairs(self) -> set[frozenset[str]]:
        return {frozenset((a.id, b.id)) for a, b, _ in self.shared_keys()}

    def visible(self, *, read_only: bool, screen: str | None = None,
                hidden_groups: Iterable[str] = ()) -> list[Action]:
        """What help and the palette list: never a mutating action in read-only mode, nor the
        actions of ``hidden_groups`` (the replay's keys in a live console)."""
        hidden = frozenset(hidden_groups)
        return [
            a
            for a in self._actions.values()
            if not (read_only and a.mutating) and (screen is None or a.available_on(screen))
            and a.group not in hidden
        ]

    def groups(self, *, read_only: bool, hidden_groups: Iterable[str] = ()) -> dict[str, list[Action]]:
        out: dict[str, list[Action]] = {}
        for a in self.visible(read_only=read_only, hidden_groups=hidden_groups):
            out.setdefault(a.group, []).append(a)
        return out
