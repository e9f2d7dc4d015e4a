"""Remote hosts: ``[hosts.NAME] ssh = "user@host"`` and ``enginedeck attach ssh://[user@]HOST[:PORT]``.

A host is watched through the user's own OpenSSH client (so ``~/.ssh/config``, ControlMaster,
ProxyJump and agents apply), running ``enginedeck status --json --watch SECS`` there; this module
only says what to run. Nothing here starts a process (``console.remote`` does).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from console.errors import UserError

DEFAULT_COMMAND = "enginedeck"
# How to get enginedeck on a host that lacks it (said in the host's reason).
INSTALL_HINT = "install it there with `pipx install enginedeck` (or run it as `uvx enginedeck`)"
# Runners tried, in this order, when the default command is not found there (probed with `command -v`).
RUNNERS = (("uvx", "uvx enginedeck"), ("pipx", "pipx run enginedeck"))

_HOST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# What ssh takes as a destination: an ssh_config alias, a DNS name, IPv4, or [IPv6]; optional user@.
_USER = r"[A-Za-z0-9_.][A-Za-z0-9_.-]*"
_HOST = r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+\])"
_DEST = re.compile(rf"^(?:(?P<user>{_USER})@)?(?P<host>{_HOST})(?::(?P<port>[0-9]+))?$")


@dataclass(frozen=True)
class HostTarget:
    """One remote host: its name (the host column), where ssh goes, and what it runs there."""

    name: str
    destination: str  # [user@]host, as given to ssh (an ssh_config alias works)
    port: int | None = None
    command: str = DEFAULT_COMMAND  # the remote enginedeck command line
    ssh_options: tuple[str, ...] = field(default_factory=tuple)  # extra ssh arguments, before the destination
    period: float = 1.0  # seconds between the remote's documents

    @property
    def display(self) -> str:
        """The destination as the user wrote it ([user@]host[:port])."""
        return self.destination + (f":{self.port}" if self.port else "")

    def remote_command(self, command: str | None = None) -> str:
        """The command line run on the host (one string: ssh hands it to the remote shell)."""
        return f"{command or self.command} status --json --watch {self.period:g} --sample 0"

    def ssh_argv(self, remote: str, *, ssh: str = "ssh") -> list[str]:
        """The ssh command line: batch mode (never a password prompt in the console), keep-alives so
        a dead link ends the stream, the user's options, then the destination and ``--``."""
        alive = max(1, round(2 * self.period))
        argv = [ssh, "-o", "BatchMode=yes", "-o", f"ServerAliveInterval={alive}", "-o", "ServerAliveCountMax=2",
                "-o", "ConnectTimeout=10", *self.ssh_options]
        if self.port:
            argv += ["-p", str(self.port)]
        return [*argv, self.destination, "--", remote]

    def forward_argv(self, forwards: list[str], *, ssh: str = "ssh") -> list[str]:
        """``ssh -N`` holding the ``-L`` ``forwards`` (``LOCAL:REMOTE`` specs) open: batch mode, keep-alives,
        exit when a forward cannot be bound, a stale local socket file replaced; no remote command."""
        argv = [ssh, "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2", "-o", "ConnectTimeout=10",
                *self.ssh_options]
        for spec in forwards:
            argv += ["-L", spec]
        if self.port:
            argv += ["-p", str(self.port)]
        return [*argv, self.destination]


def parse_destination(text: str, *, where: str = "ssh") -> tuple[str, int | None]:
    """``[user@]host[:port]`` -> (``[user@]host``, port). Rejects what ssh would read as an option."""
    m = _DEST.match(text.strip())
    if not m or text.strip().startswith("-"):
        raise UserError(f"{where} {text!r}: expected [user@]host[:port], e.g. gpu@node1 or node1:2222")
    port = None
    if m.group("port"):
        port = int(m.group("port"))
        if not 1 <= port <= 65535:
            raise UserError(f"{where} {text!r}: port {port} is out of range (1-65535)")
    user = m.group("user")
    host = m.group("host").strip("[]") if m.group("host").startswith("[") else m.group("host")
    return (f"{user}@{host}" if user else host), port


def parse_ssh_url(url: str, *, period: float = 1.0) -> HostTarget:
    """``ssh://[user@]HOST[:PORT]`` (what ``attach`` takes) -> a host named after HOST."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or parts.scheme != "ssh" or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise UserError(f"{url!r}: expected ssh://[user@]HOST[:PORT], e.g. ssh://gpu@node1")
    netloc = parts.netloc
    destination, port = parse_destination(netloc, where="attach")
    host = parts.hostname
    name = host if _HOST_NAME.match(host) else re.sub(r"[^A-Za-z0-9_.-]", "-", host).strip("-") or "host"
    return HostTarget(name=name, destination=destination, port=port, period=period)


def check_command(command: str, *, where: str = "command") -> str:
    """The remote command line: shell words (checked by ``shlex``), not empty, no option first."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise UserError(f"{where} {command!r}: {exc}") from None
    if not words or words[0].startswith("-"):
        raise UserError(f"{where} {command!r}: give the enginedeck command line, e.g. \"enginedeck\" or "
                        "\"uvx enginedeck\"")
    return command


def split_engine_name(engine: str) -> tuple[str, str] | None:
    """A remote engine's ``HOST/NAME`` -> (HOST, NAME); None for a local engine's name."""
    host, sep, name = engine.partition("/")
    return (host, name) if sep and host and name else None


def host_name_ok(name: str) -> bool:
    return bool(_HOST_NAME.match(name))
