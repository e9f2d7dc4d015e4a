"""The one action registry: key bindings, the footer, the help screen and the command palette all
derive from it, so they can never drift apart.

An action is data: an id, its key(s), a description, a group, where it is available, whether it
changes anything outside the console (``mutating``), and a handler. ``--read-only`` removes every
mutating action from help and the palette; its key stays bound only to say that it is disabled.

This module imports nothing from Textual so it can be reasoned about (and tested) on its own; the
handler receives the running console as its ``DeckHost`` (console/ui/host.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
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

    def available_on(self, screen: str) -> bool:
        return not self.screens or screen in self.screens


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
    for k in keys.split(","):
        k = k.strip()
        k = names.get(k, k)
        if k.startswith("ctrl+"):
            k = "^" + k.removeprefix("ctrl+")
        out.append(k)
    return "/".join(out)


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
            for key in action.keys.split(","):
                key = key.strip()
                if key in _NAV_KEYS or (len(key) == 1 and key.islower()):
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

    def visible(self, *, read_only: bool, screen: str | None = None) -> list[Action]:
        """What help and the palette list: never a mutating action in read-only mode."""
        return [
            a
            for a in self._actions.values()
            if not (read_only and a.mutating) and (screen is None or a.available_on(screen))
        ]

    def groups(self, *, read_only: bool) -> dict[str, list[Action]]:
        out: dict[str, list[Action]] = {}
        for a in self.visible(read_only=read_only):
            out.setdefault(a.group, []).append(a)
        return out
