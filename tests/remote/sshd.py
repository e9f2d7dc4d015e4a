"""Real OpenSSH servers on 127.0.0.1 for the remote-host tests (no SSH library anywhere).

``SshLab`` makes a throwaway host key and user key with ssh-keygen in a temporary folder, an
authorized_keys file and a client config there (known_hosts in the folder, accept-new), and starts
``/usr/sbin/sshd -D -e -f CONFIG -p PORT`` per host. ``SshServer.kill()`` ends the server and every
session it forked (by PID, found through /proc), ``start()`` brings it back on the same port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests import procgroup

SSHD = os.environ.get("ENGINEDECK_SSHD", "/usr/sbin/sshd")
HOW_SSHD = ("run scripts/provision/sshd.sh as root (make test does; it installs openssh-server), or set "
            "ENGINEDECK_SKIP_SSH=1 to skip the ssh tests explicitly")


def skip_ssh() -> bool:
    return os.environ.get("ENGINEDECK_SKIP_SSH", "").strip().lower() in ("1", "true", "yes")


def missing_tools() -> list[str]:
    import shutil

    need = [SSHD] if not Path(SSHD).is_file() else []
    return need + [t for t in ("ssh", "ssh-keygen") if shutil.which(t) is None]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (read from /proc), deepest last."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"sshd did not listen on 127.0.0.1:{port} within {timeout:g} s")


@dataclass
class SshServer:
    name: str
    port: int
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as logf:
            self.proc = procgroup.popen([SSHD, "-D", "-e", "-f", str(self.config), "-p", str(self.port)],
                                        stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        try:
            wait_port(self.port)
        except AssertionError:
            raise AssertionError(f"{self.log.read_text()[-2000:]}") from None

    def kill(self) -> None:
        """The server and every session it forked (the remote enginedeck too), by PID."""
        if self.proc is None:
            return
        for pid in [self.proc.pid, *_children(self.proc.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(5)
        self.proc = None


@dataclass
class SshLab:
    root: Path
    servers: list[SshServer] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
        subprocess.run([*keygen, "-f", str(self.host_key)], check=True)
        subprocess.run([*keygen, "-f", str(self.user_key)], check=True)
        self.authorized.write_text(Path(f"{self.user_key}.pub").read_text())
        self.authorized.chmod(0o600)
        # The privilege-separation directory sshd insists on (root only: CI runs as root).
        with contextlib.suppress(OSError):
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.client_config.write_text(
            "Host *\n"
            f"  User {os.environ.get('USER') or 'root'}\n"
            f"  IdentityFile {self.user_key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.root / 'known_hosts'}\n"
            "  StrictHostKeyChecking accept-new\n"
            "  LogLevel ERROR\n")

    @property
    def host_key(self) -> Path:
        return self.root / "host_ed25519"

    @property
    def user_key(self) -> Path:
        return self.root / "id_ed25519"

    @property
    def authorized(self) -> Path:
        return self.root / "authorized_keys"

    @property
    def client_config(self) -> Path:
        return self.root / "ssh_config"

    def server(self, name: str, port: int, *, path: str | None = None) -> SshServer:
        """A started sshd for host ``name``; ``path``: the sessions' PATH (sshd's SetEnv)."""
        config = self.root / f"sshd-{name}.conf"
        lines = [
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            f"PidFile {self.root / f'sshd-{name}.pid'}",
            f"AuthorizedKeysFile {self.authorized}",
            "StrictModes no",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PrintMotd no",
            "LogLevel ERROR",
        ]
        if path:
            lines.append(f"SetEnv PATH={path}")
        config.write_text("\n".join(lines) + "\n")
        srv = SshServer(name, port, config, self.root / f"sshd-{name}.log")
        srv.start()
        self.servers.append(srv)
        return srv

    def close(self) -> None:
        for srv in self.servers:
            srv.kill()
        # A remote enginedeck whose session ended is reparented to init for the moment it takes to
        # notice; those of this lab (their environment names its folder) end here, by PID.
        for pid in processes_mentioning(str(self.root.parent)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def processes_mentioning(text: str) -> list[int]:
    """Processes whose environment holds ``text`` (this test's folders), other than this one."""
    out = []
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes():
                    out.append(int(entry.name))
    return out
