"""What the manager needs from a running engine, whatever runs it (container or process)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from console.lifecycle.logs import LogBuffer


@dataclass(frozen=True, slots=True)
class ExitInfo:
    code: int | None
    oom_killed: bool = False


class Handle(Protocol):
    """A started engine. Every method may block briefly; the manager calls them in worker threads."""

    @property
    def ident(self) -> str: ...

    @property
    def pid(self) -> int | None: ...

    def poll(self) -> ExitInfo | None:
        """None while running; the exit once it ended."""
        ...

    def terminate(self) -> None:
        """SIGTERM (to the container's init / the process group)."""
        ...

    def kill(self) -> None:
        """SIGKILL."""
        ...

    def host_pids(self) -> set[int]:
        """Host PIDs of the engine's processes (to check GPU memory release with NVML)."""
        ...

    def follow_logs(self, buffer: LogBuffer, on_chunk: Callable[[], None], stop: threading.Event) -> None:
        """Stream the engine's output into ``buffer`` until it ends (blocking)."""
        ...

    def tail(self, n: int) -> tuple[str, ...]:
        """The last ``n`` log lines (after exit, for the failure report)."""
        ...

    def remove(self) -> None:
        """Release what is left (the stopped container; the registry entry)."""
        ...
