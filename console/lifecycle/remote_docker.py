"""A remote host's Docker engines, started and stopped from here through its forwarded Docker socket.

What the host's engines are is what the host's own configuration says (as for its status stream):
``remote_config`` fetches that file over ssh (``enginedeck config path`` there, then the file
itself) and keeps its ``managed = "docker"`` engines (a process engine belongs to the enginedeck
that runs on that host). ``remote_manager`` builds a ``LifecycleManager`` on them whose only way
to Docker is the host's socket forwarded by ``console.remote.tunnel`` (never DOCKER_HOST), whose
readiness probe reaches each engine's port through a forwarded local port, and whose audit
entries name ``HOST/NAME``. The containers carry the same labels as those the host's own
enginedeck starts, so either one finds them. Tokens passed to an engine (``api_key_env``,
``pass_env``) are read from this machine's environment, as for a local start.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import replace

from console.config import Config, EngineInstance, parse_config
from console.errors import UserError
from console.hosts import HostTarget
from console.lifecycle.audit import AuditEntry, AuditLog
from console.lifecycle.docker_backend import DockerEngines
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import Backend
from console.remote.tunnel import Tunnels
from console.secrets import Scrubber

FETCH_TIMEOUT_S = 30.0
MAX_CONFIG_BYTES = 4 * 2**20


class HostAuditLog(AuditLog):
    """The local audit log, each entry's target named ``HOST/NAME``."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host

    def record(self, action: str, target: str, result: str, detail: str = "", *,
               secrets: Iterable[str] = ()) -> AuditEntry:
        """Append one entry for the engine ``target`` of this host."""
        return super().record(action, f"{self.host}/{target}", result, detail, secrets=secrets)


def fetch_config(target: HostTarget, *, ssh: str = "ssh", timeout: float = FETCH_TIMEOUT_S) -> Config:
    """The host's own enginedeck configuration, read over ssh; a one-line ``UserError`` when it cannot be."""
    remote = f'f=$({target.command} config path) && cat -- "$f"'
    argv = target.ssh_argv(f"sh -c {shlex.quote(remote)}", ssh=ssh)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise UserError(f"{target.name}: no answer over ssh within {timeout:g} s (reading its configuration)") from None
    except OSError as exc:
        raise UserError(f"{target.name}: cannot run {ssh}: {exc.strerror or exc}") from None
    if done.returncode != 0:
        err = [x for x in done.stderr.decode("utf-8", "replace").splitlines()
               if x.strip() and not x.startswith("Warning: Permanently added")]
        why = Scrubber()(err[-1].strip())[:300] if err else f"exit {done.returncode}"
        raise UserError(f"{target.name}: cannot read its enginedeck configuration over ssh: {why}")
    if len(done.stdout) > MAX_CONFIG_BYTES:
        raise UserError(f"{target.name}: its configuration file is larger than {MAX_CONFIG_BYTES} bytes")
    source = f"{target.name}:config.toml"
    try:
        data = tomllib.loads(done.stdout.decode("utf-8", "replace"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    return parse_config(data, source)


def docker_engines(config: Config) -> Config:
    """The configuration with only its ``managed = "docker"`` engines (and no remote hosts of its own)."""
    return replace(config, instances=tuple(i for i in config.instances if i.config.managed == "docker"), hosts=())


def forwarded(inst: EngineInstance, target: HostTarget, tunnels: Tunnels) -> EngineInstance:
    """The instance as this machine reaches it: its URL on a local port forwarded to the host's
    ``127.0.0.1:PORT`` (opened now, ready a moment later: the readiness probe waits anyway)."""
    port = inst.config.port or inst.profile.container.port
    local = tunnels.port(target, port, wait=False)
    return replace(inst, url=f"http://127.0.0.1:{local}")


def remote_manager(config: Config, target: HostTarget, tunnels: Tunnels) -> LifecycleManager:
    """A LifecycleManager for the host's Docker engines in ``config`` (the host's own configuration),
    reaching Docker only through the host's forwarded socket (opened at its first Docker call)."""
    own = docker_engines(config)
    own = replace(own, instances=tuple(forwarded(i, target, tunnels) for i in own.instances))
    docker = DockerEngines(base_url=lambda: tunnels.docker_url(target), where=target.name)
    return LifecycleManager(own, audit=HostAuditLog(target.name), backends={Backend.DOCKER: docker})


def host_target(local: Config, host: str) -> HostTarget:
    """The ``[hosts.HOST]`` of this machine's configuration; a one-line error naming the known ones."""
    for target in local.hosts:
        if target.name == host:
            return target
    known = ", ".join(t.name for t in local.hosts) or "none configured"
    raise UserError(f"no host named {host!r} (known: {known}); add [hosts.{host}] with ssh = \"[user@]host\" "
                    f"to {local.path or 'the configuration'}")


def docker_instance(config: Config, host: str, name: str) -> EngineInstance:
    """The host's engine ``name``, checked to be one enginedeck starts there through Docker."""
    found = next((i for i in config.instances if i.name == name), None)
    if found is None:
        known = ", ".join(i.name for i in config.instances) or "none configured"
        raise UserError(f"{host} has no engine named {name!r} in its configuration (known: {known})")
    if found.config.managed != "docker":
        how = (f'it is managed = "process" there: run `enginedeck up {name}` on {host}' if found.managed
               else "it is monitor-only there")
        raise UserError(f"{host}/{name}: only Docker engines are started and stopped from another machine; {how}")
    return found


@contextlib.contextmanager
def open_remote(local: Config, host: str, name: str) -> Iterator[LifecycleManager]:
    """The manager of ``host``'s Docker engine ``name`` (checked), its tunnels ended on the way out."""
    target = host_target(local, host)
    tunnels = Tunnels()
    try:
        config = fetch_config(target)
        docker_instance(config, host, name)
        manager = remote_manager(config, target, tunnels)
        try:
            yield manager
        finally:
            manager.close()
    finally:
        tunnels.close_all()
