"""A shutdown deadline: once the terminal is lost, the console ends within ``deadline`` seconds.

Shutdown starts on SIGHUP, SIGTERM or SIGINT, on a hung-up terminal (POLLHUP on the tty), or when
the output writer or the input reader reports EIO (``begin``). From then on a daemon thread -
which needs nothing from the main thread, so a main thread blocked for good cannot hold it up -
asks the app to leave, runs the terminal-loss actions (the managed-engine policy) in a thread of
their own, and when the deadline comes restores what it can of the terminal (its saved modes;
leave the alternate screen, show the cursor, stop mouse reporting, without blocking) and ends the
process with ``os._exit``. A console that shuts down in time never reaches that point.

Signals reach the guard without the main thread: the C-level handler writes the signal number
into the ``signal.set_wakeup_fd`` pipe, in whatever thread the kernel picked, even while no Python
code can run. That pipe is read by a helper process (console/ui/deadline_helper.py), which wakes
this thread and, having an interpreter of its own, is the backstop: should this process still be
there ``HELPER_EXTRA`` seconds after the deadline (a GIL starved on a busy machine), it restores
the terminal and SIGKILLs the engines' process groups and the console. The Python-level handlers
only wake this thread too; they never raise, so no exception lands in a lock or a queue.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

DEADLINE = 1.5  # seconds from the event to the hard exit (the promise is "within 2 s")
HELPER_EXTRA = 0.25  # the helper process kills what is still there this much later
ACTION_MARGIN = 0.4  # the engine policy must be done this long before the hard exit
SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
HANGUP_EXIT = 128 + signal.SIGHUP
_BEGIN = 0  # pipe byte: begin() was called (signal numbers are 1..64)
_QUIT = 255  # pipe byte: close() on a normal end
_HUNG_UP = 254  # pipe byte from the helper process: it saw the terminal hang up (its HANGUP_BYTE)
# Leave the kitty keyboard protocol and the alternate screen; show the cursor; stop focus, mouse and
# bracketed-paste reporting; line wrap back on.
RESET = (b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l"
         b"\x1b[?1016l\x1b[?2004l\x1b[?7h")

Action = Callable[[str, float], object]  # (reason, deadline as time.monotonic()) -> anything


class TerminalGuard:
    """Install in the main thread before the app runs; ``close`` after the cleanup that follows it."""

    def __init__(self, deadline: float = DEADLINE, *, tty_in: int | None = 0, tty_out: int | None = 2,
                 exit_hard: Callable[[int], object] = os._exit, helper_extra: float | None = HELPER_EXTRA) -> None:
        self.deadline = deadline
        self.helper_extra = helper_extra  # None: no helper process
        self._tty_in = tty_in if tty_in is not None and _isatty(tty_in) else None
        self._tty_out = tty_out if tty_out is not None and _isatty(tty_out) else None
        self._exit_hard = exit_hard
        self._first: list[Callable[[str], object]] = []  # quick, non-blocking: ask to leave
        self._actions: list[Action] = []  # may block until the deadline: engine policy
        self._finals: list[Callable[[], object]] = []  # quick, right before the exit
        self._begin_reason = ""
        self._begin_code = HANGUP_EXIT
        self._begin_lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None
        self._old_handlers: dict[int, Any] = {}
        self._old_wakeup = -1
        self._attrs: list[Any] | None = None
        self._reset_fd: int | None = None
        self._thread: threading.Thread | None = None
        self._helper: subprocess.Popen[bytes] | None = None
        self._lifeline: int | None = None
        self._wakeup_w: int | None = None
        self._actions_done = threading.Event()
        # Whether the app's output was dropped (then its own terminal restore may be lost too).
        self.output_dropped: Callable[[], bool] | None = None
        self.begun = threading.Event()
        self.reason = ""
        self.code = 0  # the exit status once shutdown began: 128 + signal, or 129 for a hang-up
        self.started_at: float | None = None
        self.hard_at: float | None = None

    # ----------------------------------------------------------------- set-up (main thread)
    def on_begin(self, fn: Callable[[str], object]) -> None:
        """Called first, in the guard thread, with the reason: must not block (ask the app to leave)."""
        self._first.append(fn)

    def add_action(self, fn: Action) -> None:
        """Run when shutdown begins, with the reason and the time it must be done by."""
        self._actions.append(fn)

    def add_final(self, fn: Callable[[], object]) -> None:
        """Run right before the process ends, once shutdown began (finish what an action left)."""
        self._finals.append(fn)

    def install(self) -> None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pipe = (r, w)
        if self._tty_in is not None:
            with contextlib.suppress(termios.error, OSError):
                self._attrs = termios.tcgetattr(self._tty_in)  # before the app changes them
        if self._tty_out is not None:
            self._reset_fd = private_fd(self._tty_out)
        wakeup = self._start_helper(w)
        self._old_wakeup = signal.set_wakeup_fd(wakeup if wakeup is not None else w, warn_on_full_buffer=False)
        for sig in SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, self._noted)
        self._thread = threading.Thread(target=self._watch, name="enginedeck-deadline", daemon=True)
        self._thread.start()

    def _start_helper(self, forward: int) -> int | None:
        """Start the helper process; the write end of its signal pipe (for set_wakeup_fd), or None."""
        if self.helper_extra is None:
            return None
        life_r, life_w = os.pipe()
        sig_r, sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        attrs = "-"
        if self._attrs is not None:
            a = list(self._attrs)
            a[6] = [c[0] if isinstance(c, bytes) else c for c in a[6]]
            attrs = json.dumps(a)
        try:
            self._helper = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).with_name("deadline_helper.py")), str(life_r),
                 str(sig_r), str(forward), str(os.getpid()), str(self.deadline + self.helper_extra), attrs],
                pass_fds=(life_r, sig_r, forward), stdout=subprocess.DEVNULL)
        except OSError:
            for fd in (life_r, life_w, sig_r, sig_w):
                os.close(fd)
            return None
        os.close(life_r)
        os.close(sig_r)
        self._lifeline = life_w
        self._wakeup_w = sig_w
        return sig_w

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        self._poke(signum)

    def _poke(self, byte: int) -> None:
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe[1], bytes([byte]))

    def begin(self, reason: str, code: int = HANGUP_EXIT) -> None:
        """From any thread: start the shutdown (e.g. EIO writing to the terminal), ending the process
        with ``code``. Idempotent."""
        with self._begin_lock:
            if not self._begin_reason:
                self._begin_reason = reason
                self._begin_code = code
        self._poke(_BEGIN)

    def settle(self) -> None:
        """In the main thread's cleanup: when shutdown began, wait (up to the deadline) until the
        terminal-loss actions are done, so the engine control is not closed under them."""
        if self.begun.is_set() and self.hard_at is not None:
            self._actions_done.wait(max(0.0, self.hard_at - time.monotonic()))

    def close(self) -> None:
        """After the app and its cleanup. On a normal end: stop watching, give back the signal
        handlers. Once shutdown has begun: end the process now (``os._exit``), because the
        interpreter's own exit (joining threads, atexit hooks, flushing output to a terminal that
        may be stalled) is not bounded, and the guard thread does not run during its last part."""
        if self.begun.is_set():
            self._finish()
        if self._pipe is None:
            return
        self._poke(_QUIT)
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self.begun.is_set():  # a signal came in just now
            self._finish()
        with contextlib.suppress(ValueError):  # not the main thread: leave them
            signal.set_wakeup_fd(self._old_wakeup)
            for sig, old in self._old_handlers.items():
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
        for fd in (*self._pipe, self._reset_fd, self._lifeline, self._wakeup_w):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)  # the lifeline: the helper process ends
        self._pipe = None
        self._reset_fd = self._lifeline = self._wakeup_w = None
        if self._helper is not None:
            try:
                self._helper.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                self._helper.kill()
                self._helper.wait()

    # ----------------------------------------------------------------- the guard thread
    def _watch(self) -> None:
        assert self._pipe is not None
        r = self._pipe[0]
        poller = select.poll()
        poller.register(r, select.POLLIN)
        if self._tty_in is not None:
            poller.register(self._tty_in, 0)  # POLLHUP/POLLERR only: the app reads the input
        reason, code = "", 1
        while not reason:
            for fd, ev in poller.poll():
                if fd == r:
                    try:
                        data = os.read(r, 256)
                    except BlockingIOError:
                        continue
                    for b in data:
                        if b == _QUIT and not reason:
                            return
                        if b == _BEGIN and not reason:
                            reason, code = self._begin_reason or "shutdown requested", self._begin_code
                        elif b == _HUNG_UP and not reason:  # seen by the helper process
                            reason, code = "the terminal hung up", HANGUP_EXIT
                        elif b in SIGNALS and not reason:
                            reason, code = f"{signal.Signals(b).name} received", 128 + b
                elif ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    poller.unregister(fd)
                    if not reason and not ev & select.POLLNVAL:  # NVAL: closed here, not lost
                        reason, code = "the terminal hung up", HANGUP_EXIT
        self._shutdown(reason, code)

    def _shutdown(self, reason: str, code: int) -> None:
        self.code = code
        self.started_at = time.monotonic()
        self.hard_at = self.started_at + self.deadline
        self.reason = reason
        self.begun.set()
        for fn in self._first:
            with contextlib.suppress(Exception):
                fn(reason)
        threading.Thread(target=self._run_actions, args=(reason, self.hard_at - ACTION_MARGIN),
                         name="enginedeck-terminal-loss", daemon=True).start()
        # The process normally ends before this sleep does (this is a daemon thread).
        time.sleep(max(0.0, self.hard_at - time.monotonic()))
        self._run_finals()
        self._restore_terminal()
        self._exit_hard(code)

    def _finish(self) -> None:
        self.settle()
        # The app restored the terminal on its way out unless its output was dropped (a stalled
        # terminal): the reset again would move the cursor of a restored one.
        self._restore_terminal(reset=self.output_dropped is None or self.output_dropped())
        self._run_finals()
        self._exit_hard(self.code)

    def _run_finals(self) -> None:
        for fn in self._finals:
            with contextlib.suppress(Exception):
                fn()

    def _run_actions(self, reason: str, done_by: float) -> None:
        try:
            for fn in self._actions:
                with contextlib.suppress(Exception):
                    fn(reason, done_by)
        finally:
            self._actions_done.set()

    def _restore_terminal(self, reset: bool = True) -> None:
        """Best effort, never blocking: a stalled or vanished terminal gets what it can take."""
        if self._tty_in is not None and self._attrs is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self._tty_in, termios.TCSANOW, self._attrs)
        if reset and self._reset_fd is not None:
            with contextlib.suppress(OSError):
                os.write(self._reset_fd, RESET)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def private_fd(fd: int) -> int | None:
    """The terminal opened again, non-blocking: O_NONBLOCK on a file description of our own, so the
    shell's (shared) one is left as it is."""
    try:
        return os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        try:
            return os.open(os.ttyname(fd), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
