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
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal

import psutil

from console.lifecycle import process_backend
from console.lifecycle.audit import AuditEntry, AuditLog
from console.lifecycle.errors import LifecycleError
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.state import Backend, InstanceState

OnTerminalLoss = Literal["keep", "stop"]
POLICIES: tuple[OnTerminalLoss, ...] = ("keep", "stop")
AUDIT_ACTION = "terminal-loss"


class _Progress:
    """What a ``carry_out`` under way is ending, so ``last_resort`` can finish it at the hard exit."""

    def __init__(self, audit: AuditLog, policy: OnTerminalLoss, reason: str, ending: Mapping[int, str]) -> None:
        self.audit = audit
        self.policy = policy
        self.reason = reason
        self.ending = dict(ending)  # pgid -> what
        self.lock = threading.Lock()
        self.recorded = False

    def record(self, result: str, parts: list[str]) -> AuditEntry | None:
        """The one audit entry (the first caller writes it); never waits long for the lock."""
        if not self.lock.acquire(timeout=0.05):
            return None
        try:
            if self.recorded:
                return None
            self.recorded = True
            return self.audit.record(AUDIT_ACTION, "console", result, "; ".join([self.reason, f"policy {self.policy}",
                                                                                 *parts]))
        finally:
            self.lock.release()


_current: _Progress | None = None


def carry_out(manager: LifecycleManager, policy: OnTerminalLoss, reason: str, deadline: float,
              *, also: Mapping[int, str] | None = None) -> AuditEntry | None:
    """Apply ``policy`` to ``manager``'s engines, done by ``deadline`` (``time.monotonic``); audit it.

    ``also``: more process groups of this console to end with it (pgid -> what, e.g. the demo's
    load). Never raises for an engine that will not stop: a process group still running at the
    deadline is killed, and the entry says so. Should the process end first (the hard exit),
    ``last_resort`` kills what is left and writes the entry."""
    global _current
    groups = dict(process_backend.registered_groups())  # pgid -> engine, started by this console
    own = set(groups.values())
    ending = {**groups, **(also or {})}
    progress = _current = _Progress(manager.audit, policy, reason, ending)
    # Engines whose process groups end here were stopped on purpose: their exit is no failed start.
    for name in own & set(manager.names):
        with contextlib.suppress(Exception):
            manager.ending_with_console(name, max(0.1, deadline - time.monotonic()))
    # Everything gets its signal first, then the waiting is shared.
    for pgid in ending:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    states = [manager.status(n) for n in manager.names]
    running = [s for s in states if s.running and s.backend is not Backend.NONE]
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
    alive = _wait_groups(set(ending), deadline)
    for pgid in ending:  # the running ones, and stragglers of groups whose leader ended
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
    kept = [s.name for s in running if s.name not in own and policy == "keep"]
    parts = []
    for label, names in (("stopped", stopped), ("ended", ended), ("killed at the deadline", killed),
                         ("kept running", kept), ("still stopping at the deadline", late),
                         ("stop failed", failed)):
        if names:
            parts.append(f"{label}: {', '.join(sorted(names))}")
    if not running and not ending:
        parts.append("no managed engine was running")
    entry = progress.record("failed" if failed else ("partial" if late else "ok"), parts)
    if _current is progress:  # done: nothing left for last_resort (and no stale group ids)
        _current = None
    return entry


def last_resort() -> None:
    """At the console's hard exit (any thread, quick): SIGKILL every process group it started that
    may still run, and write the audit entry of a policy that was cut short."""
    progress = _current
    groups = dict(process_backend.registered_groups())
    if progress is not None:
        groups.update(progress.ending)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    if progress is not None and not progress.recorded:
        progress.record("ok", [f"cut short at the deadline, killed: {', '.join(sorted(progress.ending.values()))}"])


def _wait_groups(pgids: set[int], deadline: float) -> set[int]:
    """Wait until the leader of each group has ended (a zombie has) or ``deadline``; the groups
    whose leader still runs then. One /proc read per group and poll: cheap on a busy machine."""
    alive = set(pgids)
    while alive:
        alive = {g for g in alive if _leader_runs(g)}
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return alive


def _leader_runs(pgid: int) -> bool:
    try:
        p = psutil.Process(pgid)  # start_new_session: the leader's pid is the group id
        return p.status() != psutil.STATUS_ZOMBIE and os.getpgid(pgid) == pgid
    except (psutil.Error, ProcessLookupError, PermissionError):
        return False
