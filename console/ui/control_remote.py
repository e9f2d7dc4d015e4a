"""Engine control over this machine's engines and the remote hosts' Docker engines (``HOST/NAME``).

``HostsControl`` is the console's ``LifecycleControl`` when it watches hosts over SSH: a local
engine's call goes to this machine's control (if any); ``HOST/NAME`` goes to that host's manager
(``console.lifecycle.remote_docker``), built at the first action on the host (its configuration
read over ssh, its Docker socket forwarded; in the worker thread that runs the action). The
console's confirmation and read-only mode apply as for a local engine (they come before any call
here); the host's own ``[console] read_only`` refuses too. The terminal-loss policy acts on this
machine's engines only: a remote host's containers stay as they are.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from console.errors import UserError
from console.hosts import HostTarget, split_engine_name
from console.model import LifecycleView
from console.remote.tunnel import Tunnels
from console.ui.control import LifecycleControl

if TYPE_CHECKING:  # the lifecycle package loads at the first remote action (`attach` starts faster)
    from console.config import Config
    from console.ui.control_lifecycle import ManagerControl


class HostsControl:
    """``local`` (None: no local engine control) plus every host of ``hosts``, their tunnels in ``tunnels``."""

    def __init__(self, local: LifecycleControl | None, hosts: Sequence[HostTarget], tunnels: Tunnels) -> None:
        self.local = local
        self.tunnels = tunnels
        self._targets = {h.name: h for h in hosts}
        self._lock = threading.Lock()
        self._host_locks = {h.name: threading.Lock() for h in hosts}
        self._configs: dict[str, Config] = {}  # the host's own configuration, once read
        self._controls: dict[str, ManagerControl] = {}
        self._closed = False

    # -- routing ---------------------------------------------------------------------------------

    def _remote_name(self, engine: str) -> tuple[str, str] | None:
        parts = split_engine_name(engine)
        return parts if parts is not None and parts[0] in self._targets else None

    def _known(self, host: str) -> ManagerControl | None:
        with self._lock:
            return self._controls.get(host)

    def _control(self, host: str, name: str, verb: str) -> ManagerControl:
        """The host's control (built on first use: blocking, worker thread only), ``name`` checked."""
        from console.lifecycle.audit import AuditLog
        from console.lifecycle.remote_docker import docker_instance, fetch_config, remote_manager
        from console.ui.control_lifecycle import ManagerControl

        with self._host_locks[host]:
            ctl = self._known(host)
            if ctl is None:
                if self._closed:
                    raise UserError(f"{host}/{name}: {verb}: the console is closing")
                target = self._targets[host]
                config = fetch_config(target)
                manager = remote_manager(config, target, self.tunnels)
                # Containers started earlier there (by label), found through the tunnel, before the action
                # (which an unfinished refresh would refuse); a failure here is the action's to report.
                for fut in manager.refresh_all().values():
                    with contextlib.suppress(Exception):
                        fut.result(timeout=60)
                ctl = ManagerControl(manager, manager.config)
                with self._lock:
                    self._configs[host], self._controls[host] = config, ctl
            config = self._configs[host]
        docker_instance(config, host, name)
        if config.console.read_only:
            AuditLog().record(verb, f"{host}/{name}", "refused", "read-only mode in the host's configuration")
            raise UserError(f"{host}/{name}: {verb} refused: [console] read_only = true in {host}'s configuration")
        return ctl

    # -- LifecycleControl ------------------------------------------------------------------------

    def can_control(self, engine: str) -> bool:
        remote = self._remote_name(engine)
        if remote is None:
            return self.local is not None and self.local.can_control(engine)
        ctl = self._known(remote[0])
        # Before the host's configuration is read, every engine of it may be: the action says if not.
        return ctl is None or ctl.can_control(remote[1])

    def start(self, engine: str) -> None:
        self._act(engine, "start")

    def stop(self, engine: str) -> None:
        self._act(engine, "stop")

    def restart(self, engine: str) -> None:
        self._act(engine, "restart")

    def _act(self, engine: str, verb: str) -> None:
        remote = self._remote_name(engine)
        if remote is None:
            if self.local is None:
                raise UserError(f"{engine}: this console does not control it")
            getattr(self.local, verb)(engine)
            return
        host, name = remote
        getattr(self._control(host, name, verb), verb)(name)

    def launch_command(self, engine: str) -> str | None:
        remote = self._remote_name(engine)
        if remote is None:
            return self.local.launch_command(engine) if self.local else None
        ctl = self._known(remote[0])
        return ctl.launch_command(remote[1]) if ctl else None

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        remote = self._remote_name(engine)
        if remote is None:
            return self.local.log_tail(engine, n) if self.local else None
        ctl = self._known(remote[0])
        return ctl.log_tail(remote[1], n) if ctl else None

    def phase_of(self, engine: str) -> LifecycleView | None:
        remote = self._remote_name(engine)
        if remote is None:
            return self.local.phase_of(engine) if self.local else None
        ctl = self._known(remote[0])
        return ctl.phase_of(remote[1]) if ctl else None

    def pids_of(self, engine: str) -> tuple[int, ...]:
        if self._remote_name(engine) is not None:
            return ()  # a remote host's process ids mean nothing here
        return self.local.pids_of(engine) if self.local else ()

    def on_terminal_loss(self, policy: Literal["keep", "stop"], reason: str, done_by: float) -> None:
        if self.local is not None:
            self.local.on_terminal_loss(policy, reason, done_by)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            controls = list(self._controls.values())
        for ctl in controls:
            ctl.close()
        if self.local is not None:
            self.local.close()
        self.tunnels.close_all()
