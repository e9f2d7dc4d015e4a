"""What the console's screens, widgets, pop-ups, command palette and actions use of the running app.

They depend on the ``DeckHost`` protocol, never on the app module: ``console.ui.app.DeckApp``
implements it and imports them, not the other way round. A screen or widget reaches the host of the
app it runs in with ``host_of(self.app)``; ``HostApp`` is how the app says it is one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.screen import Screen

    from console.config import EngineInstance
    from console.model import FleetSnapshot
    from console.profiles import EngineProfile
    from console.telemetry.source import FleetSource
    from console.ui.actions import ActionRegistry
    from console.ui.control import LifecycleControl


@dataclass(frozen=True, slots=True)
class UiOptions:
    read_only: bool = False
    layout: str = "auto"
    mouse: bool = True
    simulated: bool = False
    title: str = ""
    alert_bell: bool = False  # ring the terminal bell when an alert starts firing
    bench_dir: str | None = None  # [console] bench_dir: where the bench's `s` saves (console/paths.py)
    # Why read-only mode is on, as the refusals say it ("replay"); empty: "read-only mode".
    read_only_reason: str = ""
    # Shown on the no-configuration screen (None = engines are configured).
    setup_config_path: str | None = None
    # Warnings to show once the console is up (a replayed recording's torn segments).
    notices: tuple[str, ...] = ()


class DeckHost(Protocol):
    """The running console as its parts see it: read-only state, navigation and actions."""

    @property
    def options(self) -> UiOptions: ...

    @property
    def registry(self) -> ActionRegistry:
        """Every action: keys, footer, help and the palette come from it."""
        ...

    @property
    def fleet(self) -> FleetSnapshot | None:
        """The latest snapshot (None before the first one)."""
        ...

    @property
    def source(self) -> FleetSource | None:
        """Where snapshots come from (pause, refresh, history); None on the setup screen."""
        ...

    @property
    def profiles(self) -> Mapping[str, EngineProfile]: ...

    @property
    def instances(self) -> Mapping[str, EngineInstance]:
        """The engines this console was started for, by name (empty when it only knows the fleet)."""
        ...

    @property
    def lifecycle(self) -> LifecycleControl | None:
        """Engine control (start/stop/restart, launch command, logs); None when there is none."""
        ...

    @property
    def backing_problem(self) -> str:
        """Why what the data depends on is gone (the demo's simulators), or ''."""
        ...

    @property
    def recording_active(self) -> bool:
        """Whether the console is recording (the top bar shows ● REC)."""
        ...

    @property
    def layout_name(self) -> str:
        """The layout in effect (compact, default, wide)."""
        ...

    @property
    def screen(self) -> Screen[object]:
        """The active screen (an action acts on it)."""
        ...

    def clock(self) -> float:
        """Now, in the time of the snapshots (``FleetSnapshot.taken_at``)."""
        ...

    async def show_screen(self, name: str, target: str | None = None) -> None:
        """Go to screen ``name`` (for the engine ``target``, or the one under the cursor)."""
        ...

    async def run_deck_action(self, action_id: str) -> None:
        """Run a registry action as its key would (read-only and screen rules apply)."""
        ...


class HostApp:
    """Mixed into the console's App, which is the ``DeckHost`` of everything it shows."""

    def deck_host(self) -> DeckHost:
        raise NotImplementedError


def host_of(app: object) -> DeckHost | None:
    """The console behind ``app`` (a widget's ``self.app``); None for any other app."""
    return app.deck_host() if isinstance(app, HostApp) else None
