"""The command palette, fed from the action registry (read-only hides mutating actions)."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.ui.actions import Action, display_key
from console.ui.host import host_of
from console.ui.screens.base import DeckScreen
from console.ui.timeline import REPLAY_GROUP, replay_of


def _label(a: Action) -> str:
    keys = display_key(a.keys)  # as [keys] in config.toml left them; an unbound action has none
    return f"{a.description}  ({keys})" if keys else a.description


class ActionsProvider(Provider):
    def _actions(self) -> list[Action]:
        host = host_of(self.app)
        if host is None:
            return []
        # Textual hands providers the screen the palette was opened from.
        screen = self.screen
        name = (screen.deck_name if isinstance(screen, DeckScreen) else "") or type(screen).__name__
        return [
            a
            for a in host.registry.visible(read_only=host.options.read_only,
                                           hidden_groups=() if replay_of(host) else (REPLAY_GROUP,))
            if a.id != "palette" and a.available_on(name)
        ]

    def _run(self, action_id: str) -> None:
        host = host_of(self.app)
        if host is not None:
            self.app.call_later(host.run_deck_action, action_id)

    async def discover(self) -> Hits:
        for a in self._actions():
            yield DiscoveryHit(
                _label(a),
                partial(self._run, a.id),
                text=a.description,
                help=f"{a.group}" + (" · changes engine state, asks first" if a.mutating else ""),
            )

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for a in self._actions():
            label = _label(a)
            score = matcher.match(f"{a.description} {a.id} {a.group}")
            if score > 0:
                yield Hit(score, matcher.highlight(label), partial(self._run, a.id), text=a.description,
                          help=a.group)
