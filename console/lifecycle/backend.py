"""What the manager needs from whatever runs an engine (a container, a process): the running
engine (``Handle``) and the backend that launches, finds and lists engines (``EngineBackend``).

The manager holds one backend per kind and never asks which kind it holds: a difference between
containers and processes is a method or an attribute here, implemented in ``docker_backend`` and
``process_backend``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from console.lifecycle.logs import LogBuffer
from console.lifecycle.state import Backend

if TYPE_CHECKING:  # types only: the backends import the config and profile modules anyway
    from console.config import EngineInstance
    from console.lifecycle.launch import LaunchSpec
    from console.profiles import EngineProfile


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

    @property
    def container_id(self) -> str | None:
        """The container's short id (None for a process)."""
        ...

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


@dataclass(frozen=True, slots=True)
class Found:
    """An engine of a configured instance found on the host: started earlier (by this or another
    enginedeck), adopted, or started again from outside."""

    handle: Handle
    running: bool
    address: str = ""
    gpus: str = ""
    config_hash: str = ""
    detail: str = ""  # what the state says of a running one ("running (found by label)")
    exit: ExitInfo | None = None  # how an ended one ended
    adopted: bool = False  # an adopted container: stopped, but never removed by enginedeck


@dataclass(frozen=True, slots=True)
class Listed:
    """One engine a backend finds on this host, for `ps`: one an enginedeck started (``managed``)
    or one it recognises as an engine (monitor-only until adopted)."""

    ident: str  # container short id, or "pid N"
    name: str  # container name, the record's instance name, or "pid N"
    managed: bool
    instance: str | None  # the instance a managed engine was started for
    status: str  # "running", "exited", or the backend's own word ("created", "paused")
    address: str  # where it listens ("host:port") or publishes ("host:port->port/tcp"), comma-separated
    gpus: str = ""
    image: str = ""  # image, or the command line (secrets masked)
    profile: str = ""
    config_hash: str = ""
    exit_code: int | None = None
    oom_killed: bool = False


@dataclass(frozen=True, slots=True)
class Listing:
    engines: tuple[Listed, ...] = ()
    error: str | None = None  # why the backend could not be asked (its rows then lack runtime data)


PullProgress = Callable[[float, str], None]
# Why `adopt` refuses an instance whose engine is no container (format with name=).
NOT_ADOPTABLE = '{name}: only containers can be adopted (set managed = "docker")'


class EngineBackend(Protocol):
    """Launches, finds and lists the engines of one kind. Methods block (Docker API calls, process
    table scans): the manager calls them in worker threads. Errors are ``LifecycleError``s."""

    kind: Backend
    noun: str  # what it starts, for people: "container", "process"
    # An engine that crashed after it was ready is kept for inspection until `down`/`remove`.
    keeps_crashed: bool
    can_adopt: bool

    def launch(self, spec: LaunchSpec) -> Handle:
        """Start the engine; on failure nothing of this launch is left."""
        ...

    def attach(self, inst: EngineInstance) -> Found | None:
        """The engine of ``inst`` started earlier (running or ended), if there is one."""
        ...

    def replacement(self, inst: EngineInstance, old: Handle | None, *, adopted: bool) -> Found | None:
        """A running engine of ``inst`` started outside this enginedeck after ``old`` ended (a
        headless `restart`, `docker start`), or None."""
        ...

    def release(self, old: Handle) -> None:
        """Forget an ended run whose engine was replaced from outside (never the new one's records)."""
        ...

    def foreign(self, inst: EngineInstance) -> str | None:
        """The id of an engine serving ``inst``'s port that no enginedeck started (adopt it first)."""
        ...

    def adopt(self, inst: EngineInstance, ident: str | None) -> str:
        """Take ``ident`` (or the one ``foreign`` finds) as ``inst``'s engine; returns what was adopted."""
        ...

    def remove_leftovers(self, inst: EngineInstance) -> str:
        """Remove what an ended engine of ``inst`` left; returns what was removed. Refuses a running one."""
        ...

    def image(self, inst: EngineInstance) -> str | None:
        """The image ``inst`` runs, or None where it runs none."""
        ...

    def pull(self, image: str, progress: PullProgress) -> None: ...

    def listing(self, instances: Sequence[EngineInstance], profiles: Mapping[str, EngineProfile]) -> Listing:
        """Engines of this kind on the host: every managed one, and recognised ones (by ``profiles``)."""
        ...

    def close(self) -> None: ...
