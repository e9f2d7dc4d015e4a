"""The commands on ``[hosts.*]`` through real sshd servers: `status --json --watch` prints the
``hosts`` array and each engine's host; the console on a pty shows the hosts; both end on SIGHUP
and leave no ssh process behind."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from console.hosts import HostTarget
from tests.remote.conftest import HostMaker
from tests.remote.sshd import SshLab

pytestmark = [pytest.mark.ssh, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def write_config(path: Path, targets: list[HostTarget]) -> Path:
    lines = ["[console]", 'gpu_source = "none"', ""]
    for t in targets:
        opts = ", ".join(json.dumps(o) for o in t.ssh_options)
        lines += [f"[hosts.{t.name}]", f'ssh = "{t.destination}:{t.port}"', f"command = {json.dumps(t.command)}",
                  f"ssh_options = [{opts}]", ""]
    path.write_text("\n".join(lines))
    return path


def ssh_pids(lab: SshLab) -> list[int]:
    """ssh clients of this lab still running (their command line names its client config)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if argv and argv[0].endswith(b"ssh") and str(lab.client_config).encode() in argv:
                    out.append(int(entry.name))
    return out


def _gone(lab: SshLab, within: float) -> list[int]:
    deadline = time.monotonic() + within
    while (left := ssh_pids(lab)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ENGINEDECK_STATE_DIR": str(tmp_path / "state"),
            "ENGINEDECK_CONFIG_DIR": str(tmp_path / "cfg"), "TERM": "xterm-256color"}


def test_status_json_watch_over_two_hosts_then_sighup(make_host: HostMaker, ssh_lab: SshLab, tmp_path: Path) -> None:
    targets = [make_host(n, engines=2)[0] for n in ("n1", "n2")]
    cfg = write_config(tmp_path / "console.toml", targets)
    proc = subprocess.Popen([sys.executable, "-m", "console", "status", "--json", "--watch", "1", "--sample", "0",
                             "--config", str(cfg)], cwd=REPO, env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        doc: dict[str, Any] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline() if proc.stdout else ""
            assert line, f"status ended: {proc.stderr.read() if proc.stderr else ''}"
            doc = json.loads(line)
            if all(h["state"] == "ok" for h in doc["hosts"]) and len(doc["engines"]) == 4:
                break
        assert [(h["name"], h["ssh"], h["state"]) for h in doc["hosts"]] == [
            ("n1", f"127.0.0.1:{targets[0].port}", "ok"), ("n2", f"127.0.0.1:{targets[1].port}", "ok")]
        assert all(h["last_document_age_s"] is not None and h["last_document_age_s"] < 3 for h in doc["hosts"])
        assert sorted((e["host"], e["name"]) for e in doc["engines"]) == [
            ("n1", "n1/sglang"), ("n1", "n1/vllm"), ("n2", "n2/sglang"), ("n2", "n2/vllm")]
        assert ssh_pids(ssh_lab)
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(10) == 128 + signal.SIGHUP
        assert not _gone(ssh_lab, 3.0), "ssh outlived `status`"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _read_until(master: int, marker: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} on screen within {timeout:g} s: {seen[-400:]!r}"
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            with contextlib.suppress(OSError):
                seen += os.read(master, 65536)
    return seen


def test_the_console_on_hosts_ends_on_sighup_with_its_ssh(make_host: HostMaker, ssh_lab: SshLab,
                                                          tmp_path: Path) -> None:
    targets = [make_host(n, engines=1)[0] for n in ("c1", "c2")]
    cfg = write_config(tmp_path / "console.toml", targets)
    env = _env(tmp_path)
    pid, master = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "console", "--config", str(cfg)], env)
        finally:
            os._exit(127)
    try:
        _read_until(master, b"2 hosts", timeout=60)  # the fleet line: "2 engines on 2 hosts"
        assert ssh_pids(ssh_lab)
        os.kill(pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                os.read(master, 65536)  # keep its output flowing
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                break
            time.sleep(0.05)
        assert status is not None, "the console outlived SIGHUP"
        assert not _gone(ssh_lab, 3.0), "ssh outlived the console"
    finally:
        os.close(master)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
