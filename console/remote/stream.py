"""One remote host's status stream: ``ssh HOST -- enginedeck status --json --watch SECS``.

A supervisor thread runs the user's ``ssh`` (its own process group, stdin closed, batch mode),
a reader thread takes each stdout line as one ``enginedeck.status/2`` document, another keeps the
last stderr lines, scrubbed of secrets before anything can show them. The host is fresh while
documents arrive; it is STALE, with why, as soon as ssh exits or no document came for
``2 x period + SLACK_S``. Then the stream is started again after a backoff (1, 2, 4 .. 30 s; back
to 1 s after a run that delivered documents). Where the remote has no enginedeck (exit 127 or
"command not found") the reason says how to install it, and, for the default command, ``uvx`` or
``pipx`` is used when the host has one (probed with ``command -v``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import IO

from console.hosts import DEFAULT_COMMAND, INSTALL_HINT, RUNNERS, HostTarget
from console.model import Alert, FleetSnapshot, Freshness, GpuFleet, HostView, SourceState, late_after
from console.secrets import Scrubber
from console.status_parse import DocumentError, alerts_from, snapshot_from_doc

BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
SLACK_S = 0.5  # on top of two periods before a silent host is stale
RESTART_AFTER_PERIODS = 10  # a host silent this long (and at least 10 s) gets a fresh ssh
FIRST_DOC_GRACE_S = 10.0  # on top of that for the first document (login, the remote's start-up)
KILL_WAIT_S = 1.0  # SIGTERM to the group, then SIGKILL after this
STDERR_LINES = 5
MAX_LINE = 16 * 2**20  # a status line longer than this is not ours


class HostStream:
    """The stream of ``target``; ``on_change()`` is called (in the stream's threads) whenever a
    document arrives or the host's state changes, so a fleet can publish at once."""

    def __init__(self, target: HostTarget, *, ssh: str = "ssh", scrubber: Scrubber | None = None,
                 on_change: Callable[[], None] | None = None, backoff: tuple[float, ...] = BACKOFF_S) -> None:
        self.target = target
        self._ssh = ssh
        self._scrub = scrubber or Scrubber()
        self._on_change = on_change
        self._backoff = backoff
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._command = target.command
        self._snap: FleetSnapshot | None = None
        self._alerts: tuple[Alert, ...] = ()
        self._last_line: float | None = None  # time.monotonic() of the last document
        self._last_doc_at: float | None = None  # time.time() of the same
        self._running = False
        self._reason = "connecting"
        self._stale_since: float | None = time.time()
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._bad_lines = 0
        self.connects = 0  # ssh runs started (tests read it)
        self.documents = 0  # status documents read (benchmarks/remote_cost.py reads it)

    # -- life ------------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._supervise, name=f"enginedeck-ssh-{self.target.name}",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 3.0) -> None:
        """End the ssh process group and the threads (bounded: never waits on a hung ssh)."""
        self._stop.set()
        self.kill()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def kill(self) -> None:
        """SIGTERM to the ssh process group, SIGKILL if it is still there after ``KILL_WAIT_S``;
        safe from any thread (the terminal guard's last resort calls it too)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_WAIT_S)

    # -- what readers see ------------------------------------------------------------------------

    @property
    def command(self) -> str:
        """The remote command line in use (``uvx enginedeck`` once the default was not found there)."""
        return self._command

    @property
    def alive(self) -> bool:
        """Whether an ssh process of this stream is running now."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def view(self, now: float | None = None) -> tuple[HostView, FleetSnapshot | None, tuple[Alert, ...]]:
        """The host's state now, its last snapshot (None before the first) and its alerts."""
        now = time.time() if now is None else now
        mono = time.monotonic()
        with self._lock:
            snap, alerts, last, last_at = self._snap, self._alerts, self._last_line, self._last_doc_at
            running, reason, since = self._running, self._reason, self._stale_since
        # The staleness rule (model.late_after), aged on this process's monotonic clock: the
        # document's own time is the remote host's, whose clock may differ from ours.
        limit = late_after(self.target.period, SLACK_S)
        if running and last is not None and mono - last <= limit:
            fresh = Freshness(SourceState.OK, updated_at=last_at)
        else:
            if running and last is not None:
                silent = mono - last
                reason = f"no status document for {silent:.0f} s (expected every {self.target.period:g} s)"
                since = now - silent  # stale since the last good document, as every source counts it
            fresh = Freshness(SourceState.STALE, updated_at=last_at, stale_since=since, reason=reason)
        view = HostView(name=self.target.name, destination=self.target.display, freshness=fresh,
                        last_doc_at=last_at, host=snap.host if snap else None,
                        gpus=snap.gpus if snap else GpuFleet(),
                        engines=len(snap.engines) if snap else 0)
        return view, snap, alerts

    # -- the supervisor's thread ---------------------------------------------------------------

    def _changed(self) -> None:
        if self._on_change is not None:
            with contextlib.suppress(Exception):
                self._on_change()

    def _set(self, *, running: bool | None = None, reason: str | None = None) -> None:
        with self._lock:
            if running is not None:
                self._running = running
            if reason is not None:
                self._reason = reason
                if self._stale_since is None:
                    self._stale_since = time.time()
        self._changed()

    def _supervise(self) -> None:
        attempt = 0
        while not self._stop.is_set():
            delivered, reason, missing = self._run_once()
            if self._stop.is_set():
                break
            if missing and self._command == DEFAULT_COMMAND:
                runner = self._probe_runner()
                if runner is not None:
                    self._command = runner
                    reason = f"enginedeck is not installed on {self.target.name}; running it as `{runner}`"
                    self._set(running=False, reason=reason)
                    attempt = 0
                    continue
            if delivered:
                attempt = 0
            delay = self._backoff[min(attempt, len(self._backoff) - 1)]
            attempt += 1
            self._set(running=False, reason=f"{reason}; reconnecting in {delay:g} s")
            self._stop.wait(delay)

    def _run_once(self) -> tuple[bool, str, bool]:
        """One ssh run until it ends: (any document came, why it ended, remote command missing)."""
        argv = self.target.ssh_argv(self.target.remote_command(self._command), ssh=self._ssh)
        self._stderr.clear()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            return False, f"cannot run {self._ssh}: {exc.strerror or exc}", False
        self._proc = proc
        self.connects += 1
        with self._lock:
            self._last_line = None
        self._set(running=True, reason="connecting")
        got = threading.Event()
        assert proc.stdout is not None and proc.stderr is not None
        readers = [threading.Thread(target=self._read_docs, args=(proc.stdout, got), daemon=True),
                   threading.Thread(target=self._read_stderr, args=(proc.stderr,), daemon=True)]
        for t in readers:
            t.start()
        restart_after = max(10.0, RESTART_AFTER_PERIODS * self.target.period)
        started = time.monotonic()
        was_fresh = False
        killed_silent = False
        while proc.poll() is None and not self._stop.is_set():
            self._stop.wait(0.1)
            with self._lock:
                last = self._last_line
            silent = time.monotonic() - last if last is not None else 0.0
            fresh = last is not None and silent <= 2 * self.target.period + SLACK_S
            if fresh != was_fresh:
                was_fresh = fresh
                self._changed()  # went silent (or came back): publish the state now
            # Silent for long, or never a document since it connected (a remote that hangs): start again.
            if (silent if last is not None else time.monotonic() - started - FIRST_DOC_GRACE_S) > restart_after:
                killed_silent = True
                self.kill()
        self.kill()
        rc = proc.wait()
        for t in readers:
            t.join(1.0)
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
        self._proc = None
        err = self._last_error()
        missing = rc == 127 or "command not found" in err.lower()
        if killed_silent:
            reason = f"no status document for {restart_after:.0f} s; ssh ended by enginedeck"
        elif missing:
            cmd = self._command.split()[0]
            reason = f"`{cmd}` not found on {self.target.name} (exit {rc}): {INSTALL_HINT}"
            if self._command != DEFAULT_COMMAND:
                reason += f", or fix command = {self._command!r} in [hosts.{self.target.name}]"
        else:
            err = err.removeprefix("ssh: ").rstrip(".")
            reason = f"ssh exited ({_exit_text(rc)})" + (f": {err}" if err else "")
        return got.is_set(), reason, missing

    def _read_docs(self, pipe: IO[bytes], got: threading.Event) -> None:
        for raw in iter(lambda: pipe.readline(MAX_LINE), b""):
            line = raw.strip()
            if not line.startswith(b"{"):
                continue  # a login banner, an empty line: not a document
            try:
                doc = json.loads(line)
                snap = snapshot_from_doc(doc)
                alerts = alerts_from(doc)
            except (ValueError, DocumentError) as exc:
                self._bad_lines += 1
                with self._lock:
                    self._reason = self._scrub(f"unreadable status line: {exc}")[:200]
                continue
            now = time.time()
            snap = replace(snap, engines=tuple(replace(e, health_detail=self._scrub(e.health_detail))
                                               for e in snap.engines))
            with self._lock:
                self._snap, self._alerts = snap, alerts
                self._last_line = time.monotonic()
                self._last_doc_at = now
                self._stale_since = None
                self._reason = ""
                self.documents += 1
            if not got.is_set():
                got.set()
                self._changed()  # fresh again: publish now (later documents wait for the next refresh)

    def _read_stderr(self, pipe: IO[bytes]) -> None:
        for raw in iter(lambda: pipe.readline(65536), b""):
            text = raw.decode("utf-8", "replace").strip()
            if text:
                self._stderr.append(self._scrub(text)[:300])

    def _last_error(self) -> str:
        lines = [x for x in self._stderr if not x.startswith("Warning: Permanently added")]
        return lines[-1] if lines else ""

    def _probe_runner(self) -> str | None:
        """``uvx enginedeck`` or ``pipx run enginedeck`` where the host has uvx or pipx; else None."""
        probe = "; ".join(f"command -v {tool} >/dev/null 2>&1 && echo {tool}" for tool, _ in RUNNERS) + "; true"
        try:
            out = subprocess.run(self.target.ssh_argv(probe, ssh=self._ssh), stdin=subprocess.DEVNULL,
                                 capture_output=True, timeout=15, start_new_session=True).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = out.decode("utf-8", "replace").split()
        return next((cmd for tool, cmd in RUNNERS if tool in found), None)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid


def _exit_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"signal {signal.Signals(-rc).name}"
        except ValueError:
            return f"signal {-rc}"
    return f"exit {rc}"
