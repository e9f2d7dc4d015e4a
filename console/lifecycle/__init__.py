"""Engine lifecycle: start, watch and stop engine containers and processes.

Entry point: ``LifecycleManager`` (``manager``: the actions, each a Future, audited). By job:
``backend`` (the ``EngineBackend`` protocol: launch, find, list; implemented by
``docker_backend.DockerEngines`` and ``process_backend.ProcessEngines``, with ``process_records``),
``watch`` (supervisor and log follower per running engine), ``stopping`` (SIGTERM, countdown,
SIGKILL, GPU release), ``inventory`` (`ps`: what runs on the host, quick probes), ``adoption``
(containers handed to enginedeck), ``slot`` (one instance's state and locks), ``phases`` (the pure
phase machine), ``state``, ``logs`` (bounded log buffer), ``audit``, ``launch`` (templating of the
launch), ``terminal_loss``, ``cli_support`` (the headless commands' shared path),
``remote_docker`` (a remote host's Docker engines, through its forwarded socket), ``probe`` (the
readiness probe).

May import: the core (config, profiles, model, secrets, paths), ``console.telemetry.gpu.nvml``
(GPU release), ``console.telemetry.engine.scrape`` and ``console.transport`` (the readiness probe
fetches and reads bodies as the scraper does) and ``console.remote.tunnel`` (the ssh forwards);
never Textual or ``console.ui``.
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
