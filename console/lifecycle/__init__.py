"""Engine lifecycle: start, watch and stop engine containers and processes (no UI imports).

Entry point: ``LifecycleManager`` (console.lifecycle.manager). Pieces: ``phases`` (the pure
phase machine), ``logs`` (bounded log buffer), ``audit`` (audit log), ``launch`` (templating
of the launch), ``docker_backend`` / ``process_backend``.
"""

from console.lifecycle.audit import AuditEntry, AuditLog
from console.lifecycle.errors import LifecycleError, LifecycleTimeout
from console.lifecycle.logs import LogBuffer, LogLine, LogUpdate
from console.lifecycle.state import Backend, InstanceState

__all__ = [
    "AuditEntry",
    "AuditLog",
    "Backend",
    "InstanceState",
    "LifecycleError",
    "LifecycleTimeout",
    "LogBuffer",
    "LogLine",
    "LogUpdate",
]
