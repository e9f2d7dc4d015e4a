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
