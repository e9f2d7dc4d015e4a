"""Engine control as the console sees it: the ``LifecycleControl`` protocol.

The app, its screens and the console launcher call engine control only through this protocol;
``console.ui.control_lifecycle.ManagerControl`` implements it on top of console/lifecycle. A console
without one (monitor-only engines) still has the mutating actions (so keys, help and read-only
behave the same) but they say plainly that this console cannot control the engine, and do nothing.
"""

from __future__ import annotations

from typing import Literal, Protocol

from console.model import LifecycleView


class LifecycleControl(Protocol):
    def can_control(self, engine: str) -> bool:
        """Whether ``engine`` is managed (started by enginedeck) and so can be started/stopped."""
        ...

    # Blocking: the app calls these from a worker thread; a failure raises with a one-line message.
    def start(self, engine: str) -> None: ...

    def stop(self, engine: str) -> None: ...

    def restart(self, engine: str) -> None: ...

    def launch_command(self, engine: str) -> str | None:
        """The command line the engine is (or would be) started with, secrets masked; None if unknown."""
        ...

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        """The last ``n`` log lines from memory (never a blocking call), or None when there are none."""
        ...

    def phase_of(self, engine: str) -> LifecycleView | None:
        """The lifecycle's view of the engine while it starts, runs or stops (never blocks); None when
        it has none. The telemetry hub shows it over what the engine's own endpoints say."""
        ...

    def pids_of(self, engine: str) -> tuple[int, ...]:
        """The engine's current process ids, where the lifecycle knows them (for CPU and RSS)."""
        ...

    def on_terminal_loss(self, policy: Literal["keep", "stop"], reason: str, done_by: float) -> None:
        """Apply ``[console] on_terminal_loss`` to the managed engines, done by ``done_by``
        (``time.monotonic``): the terminal is gone or the console was told to end."""
        ...

    def close(self) -> None:
        """The console ends: stop waiting on and watching the engines."""
        ...


def not_managed_message(engine: str, verb: str, adhoc: bool) -> str:
    """What `X`/`U`/`R` say on an engine enginedeck does not manage: why, and how to make it so."""
    if adhoc:
        where = "attached by URL"
        how = ('add it to the configuration (`enginedeck config path`) as [engines.NAME] with managed = "process" '
               'or "docker"; a container already serving it can then be taken over with `enginedeck adopt NAME`')
    else:
        where = "monitor-only in the configuration"
        how = (f'set managed = "process" (with a command) or managed = "docker" in [engines.{engine}]; a container '
               f"already serving it can then be taken over with `enginedeck adopt {engine}`")
    return (f"{engine} is not managed by enginedeck ({where}), so enginedeck cannot {verb} it; nothing was done. "
            f"To manage it, {how}.")
