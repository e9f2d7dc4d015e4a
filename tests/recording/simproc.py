"""A real simulator on 127.0.0.1 and the enginedeck CLI as a process, for the recording tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from console.ports import free_port
from tests import procgroup

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def simulator(engine: str = "vllm") -> Iterator[str]:
    """A running simulator's URL (answering /health before this returns)."""
    port = free_port()
    proc = procgroup.popen(
        [sys.executable, "-m", "console", "sim", "--engine", engine, "--host", "127.0.0.1", "--port", str(port),
         "--load-time", "0", "--no-access-log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def enginedeck(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return procgroup.popen([sys.executable, "-m", "console", *args], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           env={**os.environ, **(env or {})})  # fmt: skip
