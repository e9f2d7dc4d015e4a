"""The immutable state of one engine instance as the lifecycle layer sees it.

``InstanceState`` is what the TUI and the headless commands read (``LifecycleManager.status`` and
``subscribe`` callbacks). Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from console.model import Phase

# Phases from which the engine is no longer running.
TERMINAL = frozenset({Phase.EXITED, Phase.FAILED})
# Phases of a start in progress (start was asked for, not yet ready or ended).
STARTING_PHASES = frozenset({Phase.PULLING, Phase.CREATING, Phase.STARTING, Phase.LOADING})
# Phases in which the engine runs (a stop makes sense).
RUNNING_PHASES = frozenset(
    {Phase.CREATING, Phase.STARTING, Phase.LOADING, Phase.READY, Phase.DEGRADED, Phase.UNHEALTHY}
)


# How a run ended: stopped by this enginedeck on request; stopped or restarted from outside it (a
# clean exit, SIGTERM or SIGINT nobody here asked for); crashed (any other exit code, a signal,
# OOMKilled); failed to start; given up by enginedeck (a start that made no progress); or ended
# with no exit code to tell (a process another enginedeck started, a container removed).
ENDINGS = ("stopped", "outside", "crashed", "failed", "gave-up", "unknown")
# Exit codes of a requested end: clean exit, SIGINT (130), SIGTERM (143).
REQUESTED_EXIT_CODES = frozenset({0, 130, 143})


class Backend(StrEnum):
    DOCKER = "docker"
    PROCESS = "process"
    NONE = "none"  # monitor-only URL instance: nothing to start or stop


@dataclass(frozen=True, slots=True)
class InstanceState:
    """Lifecycle state of one instance at one moment.

    ``since`` is the monotonic time the phase was entered (for "loading for 42 s"); ``updated``
    the monotonic time of this state. ``countdown`` is the whole seconds left before a stop turns
    into a kill (None when no stop is in progress). ``warning`` is a visible, non-fatal problem,
    e.g. "loading for 1900 s (timeout 1800 s) but the log is still moving: not killing it".
    """

    name: str
    phase: Phase = Phase.UNKNOWN
    detail: str = ""
    since: float = 0.0
    updated: float = 0.0
    backend: Backend = Backend.NONE
    exit_code: int | None = None
    oom_killed: bool = False
    last_log_lines: tuple[str, ...] = ()
    countdown: int | None = None
    progress: float | None = None  # pull progress, 0-100
    warning: str = ""
    # Newest log line, shown as evidence that a load is progressing.
    evidence: str = ""
    # Where it runs: container id (short) or process id, and the published address.
    container_id: str | None = None
    pid: int | None = None
    address: str = ""
    gpus: str = ""
    # Config hash the running engine was started with, and whether the config changed since.
    config_hash: str = ""
    config_changed: bool = False
    # Monitor-only: found running but not started by enginedeck (adopt to control it).
    monitor_only: bool = False
    # How the last run ended ("" while running or never started), see ``ENDINGS``.
    ended: str = ""
    history: tuple[tuple[Phase, float], ...] = field(default=())

    @property
    def running(self) -> bool:
        return self.phase in RUNNING_PHASES or self.phase is Phase.STOPPING

    def saw(self, phase: Phase) -> bool:
        """Whether this instance passed through ``phase`` since the last start."""
        return any(p is phase for p, _ in self.history) or self.phase is phase

    def one_line(self) -> str:
        """A one-line human summary: phase, detail and any countdown or warning."""
        parts = [self.phase.value]
        if self.progress is not None and self.phase is Phase.PULLING:
            parts.append(f"{self.progress:.0f}%")
        if self.countdown is not None:
            parts.append(f"kill in {self.countdown} s")
        if self.detail:
            parts.append(self.detail)
        if self.warning:
            parts.append(f"WARNING: {self.warning}")
        return " - ".join(parts)
