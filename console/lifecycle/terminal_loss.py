"""What becomes of managed engines when the console loses its terminal: ``[console] on_terminal_loss``.

The console ends within a fixed deadline once its terminal is gone (SIGHUP, a hung-up tty) or it
is told to end (SIGTERM, SIGINT); this policy runs first, in that time, and writes one audit entry
``terminal-loss`` with the reason and what became of each engine.

``keep`` (the default, for real engines): engines that can outlive the console keep running, i.e.
containers (``managed = "docker"``); stop or adopt them later from any enginedeck. Process engines
this console started (``managed = "process"``) cannot: their output runs through the console, so
they end with it, exactly as on any other exit (SIGTERM to the group, SIGKILL when the time is up).

``stop`` (the demo's simulators, or a host where nothing may run unattended): every managed engine
that is starting or running gets its stop now (SIGTERM), and SIGKILL when the time left before the
deadline is up: the engines are gone when the console is. A container whose stop has not finished
by then is left to Docker, which kills it when its stop timeout (the time left) is up.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

import psutil

from console.lifecycle import process_backend
from console.lifecycle.audit import AuditEntry
from console.lifecycle.errors import LifecycleError
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import Backend, InstanceState

OnTerminalLoss = Literal["keep", "stop"]
POLICIES: tuple[OnTerminalLoss, ...] = ("keep", "stop")
AUDIT_ACTION = "terminal-loss"


def carry_out(manager: LifecycleManager, policy: OnTerminalLoss, reason: str, deadline: float,
              *, also: Mapping[int, str] | None = None) -> AuditEntry:
    """Apply ``policy`` to ``manager``'s engines, done by ``deadline`` (``time.monotonic``); audit it.

    ``also``: more process groups of this console to end with it (pgid -> what, e.g. the demo's
    load). Never raises for an engine that will not stop: a process group still alive at the
    deadline is killed, and the entry says so."""
    groups = dict(process_backend.registered_groups())  # pgid -> engine, started by this console
    own = set(groups.values())
    states = [manager.status(n) for n in manager.names]
    running = [s for s in states if s.running and s.backend is not Backend.NONE]
    # Everything gets its signal first, then the waiting is shared.
    futures: dict[str, Future[InstanceState]] = {}
    failed: list[str] = []
    if policy == "stop":
        for s in running:
            if s.name in own:
                continue
            try:  # containers, and process engines an earlier enginedeck started
                futures[s.name] = manager.stop(s.name, timeout=max(0.1, deadline - time.monotonic()))
            except LifecycleError as exc:
                failed.append(f"{s.name} ({exc.message})")
    ending = {**groups, **(also or {})}
    for pgid in ending:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    alive = _wait_groups(set(ending), deadline)
    for pgid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    process_backend.cleanup_all(grace=0)  # drops their records (and the atexit work)
    stopped: list[str] = []
    late: list[str] = []
    for name, fut in futures.items():
        try:
            fut.result(timeout=max(0.0, deadline - time.monotonic()))
            stopped.append(name)
        except FutureTimeout:
            late.append(name)
        except Exception as exc:  # a refused or failed stop is reported, never raised here
            failed.append(f"{name} ({getattr(exc, 'message', exc)})")
    ended = [what for pgid, what in ending.items() if pgid not in alive]
    killed = [what for pgid, what in ending.items() if pgid in alive]
    kept = [s.name for s in running if s.name not in own and s.name not in futures and policy == "keep"]
    parts = [reason, f"policy {policy}"]
    for label, names in (("stopped", stopped), ("ended", ended), ("killed at the deadline", killed),
                         ("kept running", kept), ("still stopping at the deadline", late),
                         ("stop failed", failed)):
        if names:
            parts.append(f"{label}: {', '.join(sorted(names))}")
    if not running and not ending:
        parts.append("no managed engine was running")
    result = "failed" if failed else ("partial" if late else "ok")
    return manager.audit.record(AUDIT_ACTION, "console", result, "; ".join(parts))


def _wait_groups(pgids: set[int], deadline: float) -> set[int]:
    """Wait until no process of these groups runs (zombies do not count) or ``deadline``; the
    groups still running then."""
    alive = set(pgids)
    while alive:
        alive = _running_groups(alive)
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return alive


def _running_groups(pgids: set[int]) -> set[int]:
    out: set[int] = set()
    for p in psutil.process_iter(["status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) in pgids:
                out.add(os.getpgid(p.pid))
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return out
