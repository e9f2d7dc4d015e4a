"""Two `enginedeck demo`s of one user (issue 10 item 11): the second runs its own fleet side by side
(slot 2: vllm-sim-2 ...) instead of waiting 60 s for the first one's engines at its own ports; quitting
says "stopping 4 engines…" and gives the shell back quickly; the other demo's engines keep running;
nothing is left afterwards. Both demos run on real ptys, as in a terminal."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import signal
import struct
import sys
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
# The figure is 2 s on a developer machine; this 2-core box runs both fleets and other
# tests at once, so the bound here only has to tell a quick stop from the old 5 s grace wait.
QUIT_LIMIT = 4.0


def _start_demo(env: dict[str, str]) -> tuple[int, int]:
    pid, master = pty.fork()
    if pid == 0:
        try:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
            os.chdir(REPO)
            os.execve(sys.executable, [sys.executable, "-m", "console", "demo"], env)
        finally:
            os._exit(127)
    return pid, master


class Pty:
    """A demo on a pty whose output is read all the time, as a terminal does (a pty nobody reads
    stalls the app: that is the terminal-loss tests' business, not this one's)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.pid, self.master = _start_demo(env)
        self._out = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the child is gone (EIO) or the master closed
                return
            if not chunk:
                return
            with self._lock:
                self._out += chunk

    @property
    def out(self) -> bytes:
        with self._lock:
            return bytes(self._out)

    def read_until(self, marker: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.out:
            assert time.monotonic() < deadline, f"no {marker!r} within {timeout:g} s: {self.out[-600:]!r}"
            assert os.waitpid(self.pid, os.WNOHANG)[0] == 0, f"ended before {marker!r}: {self.out[-600:]!r}"
            time.sleep(0.05)

    def quit(self) -> float:
        """Press q; seconds until the process has ended."""
        t0 = time.monotonic()
        os.write(self.master, b"q")
        while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
            assert time.monotonic() - t0 < 30, f"the demo did not quit: {self.out[-600:]!r}"
            time.sleep(0.01)
        took = time.monotonic() - t0
        self._reader.join(2)
        return took

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.master)


def _records(state: Path) -> dict[str, dict[str, object]]:
    out = {}
    for path in (state / "processes").glob("*.json"):
        out[path.stem] = json.loads(path.read_text())
    return out


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
def test_a_second_demo_runs_its_own_fleet_and_each_quits_quickly(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {**os.environ, "ENGINEDECK_STATE_DIR": str(state), "ENGINEDECK_CONFIG_DIR": str(tmp_path / "config"),
           "TERM": "xterm-256color"}  # fmt: skip
    first = Pty(env)
    second: Pty | None = None
    pids: list[int] = []
    try:
        first.read_until(b"fleet ready", timeout=90)
        first.read_until(b"vllm-sim", timeout=60)  # its console shows its engines

        started = time.monotonic()
        second = Pty(env)
        second.read_until(b"fleet ready", timeout=50)  # it used to wait 60 s, then fail
        assert time.monotonic() - started < 50
        assert b"slot 2" in second.out
        second.read_until(b"vllm-sim-2", timeout=60)
        second.read_until(b"metrics fresh", timeout=60)  # running, with data: what a user quits
        time.sleep(1.0)
        recs = _records(state)
        assert {"vllm-sim", "vllm-sim-2", "tgi-sim", "tgi-sim-2"} <= set(recs)
        pids = [int(str(r["pid"])) for r in recs.values()]
        assert all(_alive(p) for p in pids)
        first_pids = [int(str(r["pid"])) for n, r in recs.items() if not n.endswith("-2")]
        second_pids = [int(str(r["pid"])) for n, r in recs.items() if n.endswith("-2")]

        took = second.quit()
        assert b"stopping 4 engines" in second.out, second.out[-600:]
        assert took < QUIT_LIMIT, f"quit took {took:.1f} s: {second.out[-300:]!r}"
        assert not any(_alive(p) for p in second_pids)
        assert all(_alive(p) for p in first_pids), "the other demo's engines went too"
        assert _alive(first.pid)

        took = first.quit()
        assert b"stopping 4 engines" in first.out
        assert took < QUIT_LIMIT, f"quit took {took:.1f} s: {first.out[-300:]!r}"
        time.sleep(0.3)
        assert [p for p in pids if _alive(p)] == []
        assert _records(state) == {}
    finally:
        first.kill()
        if second is not None:
            second.kill()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
