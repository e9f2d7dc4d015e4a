"""One configured instance as the lifecycle holds it: its phase machine and log buffer, the
backend that runs it, the engine it watches now, and the locks that serialise actions on it."""

from __future__ import annotations

import threading

from console.config import EngineInstance
from console.lifecycle.backend import EngineBackend, Handle
from console.lifecycle.errors import ActionRefused
from console.lifecycle.launch import LaunchSpec
from console.lifecycle.logs import LogBuffer
from console.lifecycle.phases import PhaseMachine
from console.lifecycle.state import InstanceState


class Slot:
    """``lock`` guards the machine and the flags (held briefly); ``op`` is held for a whole
    mutating action (start, stop, ...), so two never run at once on one instance."""

    def __init__(
        self, inst: EngineInstance, machine: PhaseMachine, logs: LogBuffer, backend: EngineBackend | None
    ) -> None:
        self.inst = inst
        self.machine = machine
        self.logs = logs
        self.backend = backend  # None: a monitor-only URL instance, nothing to start or stop
        self.lock = threading.RLock()
        self.op = threading.Lock()
        self.handle: Handle | None = None
        self.spec: LaunchSpec | None = None
        self.generation = 0  # bumped by every start/stop/reattach: a supervisor of an older one ends
        self.stopping = False
        self.has_gpus = False
        self.gpu_pids: set[int] = set()
        self.log_thread: threading.Thread | None = None
        self.log_stop = threading.Event()
        self.adopted = False  # an adopted container is stopped but never removed by enginedeck
        self.published: InstanceState | None = None

    @property
    def state(self) -> InstanceState:
        with self.lock:
            return self.machine.state

    def begin(self, wait: float = 0.0) -> None:
        """Take ``op`` for an action (waiting up to ``wait`` s); refused while another one runs.
        The caller releases ``op``."""
        if not (self.op.acquire(timeout=wait) if wait > 0 else self.op.acquire(blocking=False)):
            raise ActionRefused(
                f"{self.inst.name}: another action is in progress ({self.machine.state.phase.value}); try again"
            )
