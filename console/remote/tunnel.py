"""SSH tunnels to a remote host: its Docker Engine's socket and its engines' ports, one ``ssh -NL`` each.

``Tunnels`` keeps at most one tunnel per (host, what): a Docker socket (``docker_url``: a unix
socket in a private 0700 folder forwarded to the host's ``/var/run/docker.sock``; ready once the
socket answers Docker's ``GET /_ping``) and one per engine port (``port``: ``127.0.0.1:FREE`` to
the host's ``127.0.0.1:PORT``; ready once it accepts a connection). A tunnel is reused while its
ssh runs, started again when it ended. When ssh exits or the deadline passes before it is ready,
the error is one line with ssh's own reason (scrubbed of secrets). Each ssh is a process group of
its own; ``close_all`` ends every one (the console's quit, its hard exit and the terminal guard).
It uses the user's OpenSSH (``~/.ssh/config``, ProxyJump, agents), never an SSH library, and one
connection for every Docker call (docker-py's ``ssh://`` opens one per call).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO
from urllib.parse import urlsplit, urlunsplit

from console.errors import UserError
from console.hosts import HostTarget
from console.ports import free_port
from console.secrets import Scrubber

DOCKER_SOCKET = "/var/run/docker.sock"
READY_DEADLINE_S = 15.0  # ssh's own ConnectTimeout is 10 s
KILL_WAIT_S = 1.0
DROPS_TO_FAIL = 3  # connections in a row the host closed unanswered: its socket is not there


def docker_ping(path: str, timeout: float = 2.0) -> str:
    """Docker's ``GET /_ping`` on the unix socket at ``path``: "ok" (200), "absent" (no socket to
    connect to yet: ssh is still logging in), "dropped" (closed with no answer: the host could not
    open its end), or "error" (any other answer, or none in ``timeout``)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            try:
                s.connect(path)
            except OSError:
                return "absent"
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            head = s.recv(64)
    except (ConnectionResetError, BrokenPipeError):
        return "dropped"
    except OSError:
        return "error"
    if not head:
        return "dropped"
    return "ok" if head.startswith(b"HTTP/1.") and head[9:12] == b"200" else "error"


def port_open(port: int, timeout: float = 1.0) -> bool:
    """Whether 127.0.0.1:``port`` accepts a TCP connection (ssh listens once it is logged in)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout):
        return True
    return False


LOOPBACK = ("127.0.0.1", "localhost", "0.0.0.0", "::1", "[::1]")


def forwarded_url(url: str, local_port: Callable[[int], int]) -> str:
    """``url`` with a loopback host (as the remote host sees it) replaced by ``127.0.0.1:local_port(PORT)``."""
    parts = urlsplit(url)
    if parts.hostname not in LOOPBACK or parts.hostname is None:
        return url
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{local_port(port)}"))


@dataclass
class Tunnel:
    """One running ``ssh -NL``: what it forwards (``local`` -> ``remote``) and its process."""

    host: str
    local: str  # a socket path, or "127.0.0.1:PORT"
    remote: str
    proc: subprocess.Popen[bytes]
    folder: str | None = None  # the private folder of a socket tunnel (removed on close)
    stderr: deque[str] = field(default_factory=lambda: deque(maxlen=5))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def reason(self) -> str:
        """ssh's last line on stderr (host-key notices left out), already scrubbed."""
        lines = [x for x in self.stderr if not x.startswith("Warning: Permanently added")]
        return lines[-1].removeprefix("ssh: ").rstrip(".") if lines else ""

    def close(self) -> None:
        """SIGTERM to its process group, SIGKILL after ``KILL_WAIT_S``; its private folder removed."""
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(KILL_WAIT_S)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(KILL_WAIT_S)
        if self.proc.stderr is not None:
            with contextlib.suppress(OSError):
                self.proc.stderr.close()
        if self.folder:
            shutil.rmtree(self.folder, ignore_errors=True)


class Tunnels:
    """The tunnels of one console (or command): reused per host, all ended by ``close_all``."""

    def __init__(self, *, ssh: str = "ssh", scrubber: Scrubber | None = None,
                 deadline: float = READY_DEADLINE_S) -> None:
        self._ssh = ssh
        self._scrub = scrubber or Scrubber()
        self.deadline = deadline
        self._lock = threading.Lock()
        self._host_locks: dict[str, threading.Lock] = {}
        self._tunnels: dict[tuple[str, str], Tunnel] = {}
        self.opened = 0  # ssh processes started (tests read it)

    def docker_url(self, target: HostTarget, remote: str = DOCKER_SOCKET) -> str:
        """``unix://...`` of a local socket that reaches ``remote`` on the host (blocks until ready)."""
        t = self._get(target, f"docker:{remote}", lambda: self._open_socket(target, remote))
        return f"unix://{t.local}"

    def port(self, target: HostTarget, remote_port: int, *, wait: bool = True) -> int:
        """A local port on 127.0.0.1 that reaches 127.0.0.1:``remote_port`` on the host; ``wait``:
        block until ssh listens (else return at once: the first connections may be refused)."""
        t = self._get(target, f"port:{remote_port}", lambda: self._open_port(target, remote_port, wait=wait))
        return int(t.local.rpartition(":")[2])

    def tunnels(self) -> list[Tunnel]:
        with self._lock:
            return list(self._tunnels.values())

    def close_all(self) -> None:
        """End every tunnel's ssh (safe from any thread; the terminal guard's last resort calls it)."""
        with self._lock:
            tunnels, self._tunnels = list(self._tunnels.values()), {}
        for t in tunnels:
            with contextlib.suppress(Exception):
                t.close()

    # -- opening ---------------------------------------------------------------------------------

    def _get(self, target: HostTarget, what: str, opener: Callable[[], Tunnel]) -> Tunnel:
        key = (target.name, what)
        with self._lock:
            host_lock = self._host_locks.setdefault(f"{target.name} {what}", threading.Lock())
        with host_lock:  # one opener per (host, what) at a time; other hosts go on
            with self._lock:
                old = self._tunnels.get(key)
            if old is not None and old.alive:
                return old
            if old is not None:
                old.close()
            t = opener()
            with self._lock:
                self._tunnels[key] = t
            return t

    def _spawn(self, target: HostTarget, local: str, remote: str, folder: str | None) -> Tunnel:
        argv = target.forward_argv([f"{local}:{remote}"], ssh=self._ssh)
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
            raise UserError(f"{target.name}: cannot run {self._ssh}: {exc.strerror or exc}") from None
        self.opened += 1
        t = Tunnel(target.name, local, remote, proc, folder)
        assert proc.stderr is not None
        threading.Thread(target=self._read_stderr, args=(t, proc.stderr), daemon=True,
                         name=f"enginedeck-tunnel-{target.name}").start()
        return t

    def _open_socket(self, target: HostTarget, remote: str) -> Tunnel:
        folder = tempfile.mkdtemp(prefix="enginedeck-ssh-")  # mkdtemp makes it 0700
        os.chmod(folder, 0o700)
        local = os.path.join(folder, "docker.sock")
        t = self._spawn(target, local, remote, folder)
        drops = 0

        def ready(left: float) -> bool:
            nonlocal drops
            answer = docker_ping(local, timeout=max(0.1, min(2.0, left)))
            drops = drops + 1 if answer == "dropped" else 0
            if drops >= DROPS_TO_FAIL:  # logged in, but every connection is closed at the host's end
                t.close()
                raise UserError(f"{target.name}: ssh to {target.display} is up, but the host closes every connection "
                                f"to {remote} (no Docker Engine socket there, or the ssh user may not open it)"
                                + (f": {t.reason()}" if t.reason() else ""))
            return answer == "ok"

        self._wait(t, target, f"the Docker Engine socket {remote}", ready)
        return t

    def _open_port(self, target: HostTarget, remote_port: int, *, wait: bool) -> Tunnel:
        local_port = free_port("127.0.0.1")
        t = self._spawn(target, f"127.0.0.1:{local_port}", f"127.0.0.1:{remote_port}", None)
        if wait:
            self._wait(t, target, f"port {remote_port}", lambda left: port_open(local_port, min(1.0, left)))
        return t

    def _wait(self, t: Tunnel, target: HostTarget, what: str, ready: Callable[[float], bool]) -> None:
        """Until ``ready(seconds left)``; else the tunnel is closed and one line says why (ssh's reason)."""
        end = time.monotonic() + self.deadline
        while True:
            if t.proc.poll() is not None:
                time.sleep(0.05)  # the stderr reader's last line
                t.close()
                why = t.reason() or f"ssh exited ({t.proc.returncode})"
                raise UserError(f"{target.name}: cannot forward {what} over ssh to {target.display}: {why}")
            left = end - time.monotonic()
            if left > 0 and ready(left):
                return
            if time.monotonic() >= end:
                why = t.reason()
                t.close()
                raise UserError(f"{target.name}: {what} did not answer through ssh to {target.display} within "
                                f"{self.deadline:g} s" + (f": {why}" if why else ""))
            time.sleep(0.05)

    def _read_stderr(self, t: Tunnel, pipe: IO[bytes]) -> None:
        with contextlib.suppress(OSError, ValueError):
            for raw in iter(lambda: pipe.readline(65536), b""):
                text = raw.decode("utf-8", "replace").strip()
                if text:
                    t.stderr.append(self._scrub(text)[:300])


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)  # its own session: the group id is its pid
