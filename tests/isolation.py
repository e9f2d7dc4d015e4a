"""A test's own machine state: the folders enginedeck reads and writes, and the processes it left.

``MachineState.apply`` points every variable that chooses where enginedeck keeps state (console/paths.py:
config, state with its process records, audit log, engine logs and recordings, cache) and the XDG
base directories at folders of one test, so a test sees neither the user's configuration nor a running
``enginedeck demo`` (its process records are in the user's state folder), and writes nothing there.
Subprocesses inherit it through the environment. XDG_CACHE_HOME stays the user's: provisioning keeps
the built llama-server wheel, the tiny model and the Hugging Face cache there (scripts/provision/).

``leftovers`` finds the processes started during a test that are still running at its end: every
process whose environment names the test's folders, which is every process the test started (and
their engines, which get XDG_CONFIG_HOME) unless it was given an environment made from scratch.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# Set to a folder of the test's.
FOLDER_VARIABLES = ("ENGINEDECK_STATE_DIR", "ENGINEDECK_CONFIG_DIR", "ENGINEDECK_CACHE_DIR",
                    "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME")  # fmt: skip
# Removed: recordings and bench results then go to the state folder's `recordings` and `bench`
# (console/paths.py), and a test that sets `[console] recording_dir` or `bench_dir` sees it used, as a
# user without the variable would.
CLEARED_VARIABLES = ("ENGINEDECK_RECORDING_DIR", "ENGINEDECK_BENCH_DIR")


@dataclass(frozen=True)
class MachineState:
    root: Path

    @classmethod
    def under(cls, parent: Path, name: str) -> MachineState:
        """A new folder in ``parent`` (mkdtemp: unique, 0700, cheap however many there are)."""
        prefix = re.sub(r"[^\w.-]", "_", name)[:40]  # a test id may hold '/' and '['
        return cls(Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=parent)))

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def recordings(self) -> Path:
        return self.state / "recordings"

    def folders(self) -> dict[str, str]:
        xdg = self.root / "xdg"
        return {"ENGINEDECK_STATE_DIR": str(self.state), "ENGINEDECK_CONFIG_DIR": str(self.config),
                "ENGINEDECK_CACHE_DIR": str(self.cache), "XDG_CONFIG_HOME": str(xdg / "config"),
                "XDG_STATE_HOME": str(xdg / "state"), "XDG_DATA_HOME": str(xdg / "data")}  # fmt: skip

    def apply(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in self.folders().items():
            monkeypatch.setenv(name, value)
        for name in CLEARED_VARIABLES:
            monkeypatch.delenv(name, raising=False)


def pids() -> set[int]:
    """Every process id on the machine now (``/proc``)."""
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def _environment(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:  # gone, or another user's
        return b""


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _helpers_of_this_process() -> set[int]:
    """multiprocessing's resource tracker and fork server: started once by the first spawn in this
    process (e.g. a bench in a test) and shared by all that follow; they end with this process."""
    from multiprocessing import forkserver, resource_tracker

    pids = {getattr(resource_tracker._resource_tracker, "_pid", None),
            getattr(forkserver._forkserver, "_forkserver_pid", None)}  # fmt: skip
    return {pid for pid in pids if pid is not None}


def marked(root: Path, candidates: set[int]) -> list[int]:
    """The live processes among ``candidates`` whose environment names a folder under ``root``
    (a zombie's environment reads empty: it is not running), but this process's helpers."""
    mark = os.fsencode(str(root)) + b"/"
    mine = {os.getpid()} | _helpers_of_this_process()
    return sorted(pid for pid in candidates if pid not in mine and mark in _environment(pid))


def leftovers(root: Path, before: set[int], grace: float = 3.0) -> dict[int, str]:
    """The processes started since ``before`` that still run with ``root``'s folders after ``grace``
    seconds (what a test stopped may take a moment to exit), killed; their command lines by pid."""
    found = marked(root, pids() - before)
    deadline = time.monotonic() + grace
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = marked(root, set(found))
    named = {pid: command_line(pid) for pid in found}
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return named
