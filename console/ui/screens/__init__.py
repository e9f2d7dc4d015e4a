"""Screen registry. A screen module calls ``register_screen(ScreenSpec(...))`` at import, bringing
its own actions into the one action registry; adding a screen is one new module plus its name in
``SCREEN_MODULES``. For example, ``console/ui/screens/playground.py``::

    class PlaygroundScreen(DeckScreen):          # console.ui.screens.base.DeckScreen
        deck_name = "playground"
        def show_fleet(self, fleet): ...         # called with every snapshot while shown

    register_screen(ScreenSpec(
        "playground", "Playground", lambda app, target: PlaygroundScreen(target),
        actions=(Action("playground", "4", "Playground: stream a prompt", "Navigate",
                        lambda app: app.show_screen("playground")),),
        needs_engine=True,                       # opened for the engine under the cursor
    ))

Its actions then appear in the footer, help and the palette, and obey ``--read-only``. A screen may
import Textual, ``console.ui`` (the host protocol, actions, formatting), ``console.ui.widgets``, the
core, ``console.client`` and ``console.transport`` (the playground's and the bench's requests) and
``console.telemetry.metrics.history`` (the charts' series), and
reaches the app only through ``console.ui.host.DeckHost``; no screen imports ``console.ui.app``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.ui.actions import Action

if TYPE_CHECKING:
    from console.ui.host import DeckHost
    from console.ui.screens.base import DeckScreen

# One line per screen module (console.ui.screens.<name>), in navigation order.
SCREEN_MODULES: tuple[str, ...] = ("overview", "engine", "gpus", "playground", "bench", "alerts", "compare")


@dataclass(frozen=True, slots=True)
class ScreenSpec:
    name: str
    title: str
    # factory(host, target) -> the screen; target is e.g. the engine name for the detail screen.
    factory: Callable[[DeckHost, str | None], DeckScreen]
    actions: tuple[Action, ...] = ()
    needs_engine: bool = False  # opened for the engine under the cursor
    # Kept when left and shown again on return instead of being built anew (composing, mounting
    # and styling a screen is most of a key's way to it). Only for screens with nothing running
    # while hidden: a kept screen gets no snapshots until it is shown again.
    kept: bool = False


_SCREENS: dict[str, ScreenSpec] = {}


def register_screen(spec: ScreenSpec) -> None:
    _SCREENS[spec.name] = spec


def screen_specs() -> dict[str, ScreenSpec]:
    for mod in SCREEN_MODULES:
        importlib.import_module(f"console.ui.screens.{mod}")
    # In navigation order, whatever order the modules were first imported in.
    return {name: _SCREENS[name] for name in sorted(_SCREENS, key=_nav_order)}


def _nav_order(name: str) -> int:
    return SCREEN_MODULES.index(name) if name in SCREEN_MODULES else len(SCREEN_MODULES)
