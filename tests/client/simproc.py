"""Real simulator processes on 127.0.0.1 for the client tests (free ports, always cleaned up)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from console.ports import free_port
from tests import procgroup

ROOT = Path(__file__).resolve().parents[2]


class SimProc:
    def __init__(self, engine: str, *args: str, port: int | None = None) -> None:
        """``port``: a given one (an engine started again where it ran); else a free one."""
        self.engine = engine
        self.port = port if port is not None else free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "console", "sim", "--engine", engine, "--port", str(self.port),
               "--no-access-log", *args]  # fmt: skip
        self.proc = procgroup.popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )

    @property
    def ref(self) -> str:
        return f"{self.engine}@{self.url}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"simulator exited with {self.proc.returncode}: {err[-500:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"simulator {self.engine} not ready after {timeout}s")

    def state(self) -> dict[str, object]:
        import json

        with urllib.request.urlopen(f"{self.url}/_sim/state", timeout=5) as r:
            return dict(json.loads(r.read()))

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.proc.stderr:
            self.proc.stderr.close()


@contextlib.contextmanager
def sims(*specs: tuple[str, ...]) -> Iterator[list[SimProc]]:
    procs: list[SimProc] = []
    try:
        for spec in specs:
            procs.append(SimProc(spec[0], *spec[1:]))
        for p in procs:
            p.wait_ready()
        yield procs
    finally:
        for p in procs:
            p.stop()


def chat_load(url: str, stop: threading.Event) -> None:
    """Chat requests to the engine at ``url``, one after another, until ``stop`` is set (a thread's
    body: load that keeps the engine's counters moving)."""
    body = json.dumps({"model": "Qwen/Qwen3-0.6B", "messages": [{"role": "user", "content": "hello " * 40}],
                       "max_tokens": 32}).encode()  # fmt: skip
    while not stop.is_set():
        req = urllib.request.Request(f"{url}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()
        except OSError:
            pass
