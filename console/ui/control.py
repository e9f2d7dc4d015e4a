"""The hook through which the console asks for engine start/stop/restart.

HOOK, not an implementation: console/lifecycle provides the real thing. Until a ``LifecycleControl``
is passed to the app, the mutating actions exist (so keys, help and read-only behave as they will)
but say plainly that this console cannot control engines, and do nothing.
"""

from __future__ import annotations

from typing import Protocol


class LifecycleControl(Protocol):
    def can_control(self, engine: str) -> bool:
        """Whether ``engine`` is managed (started by enginedeck) and so can be started/stopped."""
        ...

    def start(self, engine: str) -> None: ...

    def stop(self, engine: str) -> None: ...

    def restart(self, engine: str) -> None: ...

    def launch_command(self, engine: str) -> str | None:
        """The command line the engine is (or would be) started with, secrets masked; None if unknown."""
        ...

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        """The last ``n`` log lines from memory (never a blocking call), or None when there are none."""
        ...
