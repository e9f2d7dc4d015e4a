"""The real console on a pty, watching a live simulator: when the pty's master side closes (what
sshd and tmux do when the connection or the session goes) the console has ended within the
deadline - also after its terminal stopped reading and its output backed up, the case in which
Textual's writer thread used to die behind a full queue and leave the console blocked for good."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.ports import free_port
from console.ui.terminal_guard import DEADLINE, HANGUP_EXIT, HELPER_EXTRA
from tests import procgroup

REPO = Path(__file__).resolve().parents[2]
SLACK = 1.5  # a busy 2-core machine; the acceptance figure (2 s) comes from benchmarks/terminal_loss.py


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    port = free_port()
    proc = procgroup.popen([sys.executable, "-m", "console", "sim", "--engine", "vllm", "--port", str(port)],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _start_console(url: str, state: Path) -> tuple[int, int]:
    pid, master = pty.fork()
    if pid == 0:
        try:
            _size(0, 50, 200)
            os.chdir(REPO)
            env = {**os.environ, "ENGINEDECK_STATE_DIR": str(state), "ENGINEDECK_CONFIG_DIR": str(state),
                   "TERM": "xterm-256color"}
            os.execve(sys.executable, [sys.executable, "-m", "console", "attach", f"vllm@{url}",
                                       "--refresh", "0.5"], env)
        finally:
            os._exit(127)
    return pid, master


def _read_until(master: int, marker: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} on screen within {timeout:g} s"
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            seen += os.read(master, 65536)
    return seen


def _read_for(master: int, seconds: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            seen += os.read(master, 65536)
    return seen


def _backed_up(pid: int) -> bool:
    fd = os.open(os.readlink(f"/proc/{pid}/fd/2"), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        p = select.poll()
        p.register(fd, select.POLLOUT)
        return not p.poll(0)
    finally:
        os.close(fd)


def _wait_exit(pid: int, limit: float) -> tuple[float | None, int]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return time.monotonic() - t0, status
        time.sleep(0.01)
    return None, 0


@pytest.mark.parametrize("stall", [False, True], ids=["hang-up", "stalled-then-hang-up"])
def test_the_console_ends_within_the_deadline_when_its_terminal_goes(sim_url: str, tmp_path: Path,
                                                                     stall: bool) -> None:
    pid, master = _start_console(sim_url, tmp_path)
    try:
        _read_until(master, b"ready", timeout=60)
        if stall:  # nobody reads any more, and every resize is a full repaint
            until = time.monotonic() + 30
            cols = 199
            while not _backed_up(pid) and time.monotonic() < until:
                _size(master, 50, cols)
                cols = 399 - cols
                time.sleep(0.5)
            assert _backed_up(pid), "the test did not stall the console's output"
            time.sleep(1.0)
        os.close(master)
        master = -1
        took, status = _wait_exit(pid, DEADLINE + HELPER_EXTRA + SLACK + 8)
        assert took is not None, "the console outlived its terminal"
        assert took < DEADLINE + HELPER_EXTRA + SLACK
        # Its own exit, or on a machine too busy for that the helper process's SIGKILL.
        assert (os.WIFEXITED(status) and os.WEXITSTATUS(status) == HANGUP_EXIT) or (
            os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
    finally:
        if master >= 0:
            os.close(master)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


ALT_SCREEN = b"\x1b[?1049h"


def test_sigcont_without_a_suspend_does_not_restart_the_terminal(sim_url: str, tmp_path: Path) -> None:
    """The kernel sends SIGCONT with every hang-up; Textual took it for a resume and started a
    second output thread (whose death on EIO blocked the console for good). Here a SIGCONT that no
    suspend preceded changes nothing: the terminal is set up once."""
    pid, master = _start_console(sim_url, tmp_path)
    try:
        out = _read_until(master, b"ready", timeout=60)
        os.kill(pid, signal.SIGCONT)
        out += _read_for(master, 2.0)
        assert out.count(ALT_SCREEN) == 1
    finally:
        os.close(master)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
