"""Textual's Linux driver, with terminal output that can never block the console for good.

Two Textual behaviours (8.2.8; see benchmarks/textual_hangup_repro.py) made a console outlive
its terminal, blocked in ``Queue.put`` inside ``WriterThread.stop``:

* ``WriterThread`` dies on the first failed write (EIO once the terminal hung up) and nothing
  drains its bounded queue (30 writes) any more: the next writes, and ``stop()``'s
  ``put(None)``, block the event loop forever (Textual #6692).
* ``LinuxDriver`` resumes application mode on any SIGCONT, also one no SIGTSTP preceded; the
  kernel sends SIGHUP *and* SIGCONT on hang-up, and ``os.isatty()`` is False on a hung-up tty,
  so the check meant to stop this is skipped: a second writer (and input thread) starts and the
  first one waits in ``Queue.get`` for good.

``TerminalWriter`` replaces the writer: it writes through a non-blocking file description of its
own (the shell's is left as it is) and waits for a slow terminal in short polls, gives up for good
on EIO/EPIPE/hang-up (and tells ``on_lost``), and never blocks a caller beyond its give-up time:
``write`` drops text once it gave up, ``stop`` waits at most ``STOP_WAIT``. ``DeckDriver`` uses
it, resumes on SIGCONT only after its own SIGTSTP, and reports a failed terminal read.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
import weakref
from collections.abc import Callable, Iterator
from queue import Full
from typing import IO, Any, ClassVar

from textual.drivers import linux_driver
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

from console.ui.terminal_guard import private_fd

POLL = 0.05  # seconds: how often a waiting write or put looks whether it should give up
STOP_WAIT = 1.0  # seconds stop() waits for queued output to reach a live terminal
LostHook = Callable[[str], object]


class TerminalWriter(WriterThread):
    on_lost: ClassVar[LostHook | None] = None  # set by the console: start the shutdown deadline
    _live: ClassVar[weakref.WeakSet[TerminalWriter]] = weakref.WeakSet()
    dropped: ClassVar[bool] = False  # some output of this process was dropped, not written

    def __init__(self, file: IO[str]) -> None:
        super().__init__(file)
        self._encoding = getattr(file, "encoding", None) or "utf-8"
        self._out: int | None = None
        with contextlib.suppress(OSError, ValueError):
            fd = file.fileno()
            if os.isatty(fd):
                with contextlib.suppress(OSError, ValueError):
                    file.flush()  # what was printed before the app, in order
                self._out = private_fd(fd)
        self._give_up_at: float | None = None
        self.lost = ""  # why output is being dropped for good ("" while it is written)
        TerminalWriter._live.add(self)

    @classmethod
    def give_up_all(cls, when: float) -> None:
        """Every writer of this process drops its output from ``when`` on (shutdown has begun)."""
        for w in list(cls._live):
            w.give_up_at(when)

    # ---------------------------------------------------------------- callers (any thread)
    def give_up_at(self, when: float) -> None:
        """From then on (``time.monotonic``), output is dropped instead of waited for."""
        self._give_up_at = when if self._give_up_at is None else min(self._give_up_at, when)

    def _gave_up(self) -> bool:
        return bool(self.lost) or (self._give_up_at is not None and time.monotonic() >= self._give_up_at)

    def write(self, text: str) -> None:
        while not self._gave_up():
            try:
                self._queue.put(text, timeout=POLL)
                return
            except Full:
                if not self.is_alive():
                    self._lose("the terminal writer ended")
        TerminalWriter.dropped = True

    def stop(self) -> None:
        """Queue the end and wait for the thread, at most ``STOP_WAIT`` (or until the give-up time)."""
        limit = time.monotonic() + STOP_WAIT
        if self._give_up_at is not None:
            limit = min(limit, max(self._give_up_at, time.monotonic()))
        while self.is_alive():
            try:
                self._queue.put(None, timeout=POLL)
                break
            except Full:
                if time.monotonic() >= limit:
                    self.give_up_at(time.monotonic())  # the thread now drops what is queued
        self.join(timeout=max(0.0, limit - time.monotonic()) + POLL)

    # ---------------------------------------------------------------- the writer thread
    def run(self) -> None:
        pending: list[str] = []
        while True:  # _emit never raises: this thread drains the queue until stop()
            text = self._queue.get()
            if text is None:
                break
            if self._gave_up():
                pending.clear()
                TerminalWriter.dropped = True
                continue
            pending.append(text)
            if self._queue.qsize() == 0:
                self._emit("".join(pending))
                pending.clear()
        if pending and not self._gave_up():
            self._emit("".join(pending))
        if self._out is not None:
            with contextlib.suppress(OSError):
                os.close(self._out)
            self._out = None

    def _emit(self, text: str) -> None:
        try:
            if self._out is None:  # not a terminal (or it cannot be reopened): a plain write
                self._file.write(text)
                self._file.flush()
                return
            data = memoryview(text.encode(self._encoding, "replace"))
            while data and not self._gave_up():
                try:
                    data = data[os.write(self._out, data):]
                except BlockingIOError:
                    if _hung_up(self._out):
                        self._lose("the terminal hung up")
            if data:
                TerminalWriter.dropped = True
        except OSError as exc:
            self._lose(f"writing to the terminal failed: {exc.strerror or exc}")
        except Exception:  # anything else costs this text only, never the thread
            TerminalWriter.dropped = True

    def _lose(self, why: str) -> None:
        if self.lost:
            return
        self.lost = why
        hook = type(self).on_lost
        if hook is not None:
            with contextlib.suppress(Exception):
                hook(why)


def _hung_up(fd: int) -> bool:
    """Wait up to ``POLL`` for room; True when the terminal is gone."""
    p = select.poll()
    p.register(fd, select.POLLOUT)
    try:
        events = p.poll(int(POLL * 1000))
    except InterruptedError:
        return False
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events)


@contextlib.contextmanager
def _writer_class(cls: type[WriterThread]) -> Iterator[None]:
    # LinuxDriver.start_application_mode names the writer class through its module.
    saved = getattr(linux_driver, "WriterThread")  # noqa: B009 - not re-exported by the module
    setattr(linux_driver, "WriterThread", cls)  # noqa: B010
    try:
        yield
    finally:
        setattr(linux_driver, "WriterThread", saved)  # noqa: B010


class DeckDriver(LinuxDriver):
    """LinuxDriver with ``TerminalWriter``, SIGCONT resumes only after its own SIGTSTP."""

    on_lost: ClassVar[LostHook | None] = None

    def __init__(self, app: Any, *, debug: bool = False, mouse: bool = True,
                 size: tuple[int, int] | None = None) -> None:
        self._suspended = False
        super().__init__(app, debug=debug, mouse=mouse, size=size)

    def start_application_mode(self) -> None:
        with _writer_class(TerminalWriter):
            super().start_application_mode()  # type: ignore[no-untyped-call]

    @property
    def writer(self) -> TerminalWriter | None:
        w = self._writer_thread
        return w if isinstance(w, TerminalWriter) else None

    def _sigtstp_application(self, *args: Any) -> None:
        self._suspended = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        # The kernel sends SIGCONT with SIGHUP when the terminal hangs up: that is no resume.
        if not self._suspended:
            return
        self._suspended = False
        super()._sigcont_application(*args)

    def run_input_thread(self) -> None:
        try:
            super().run_input_thread()
        except OSError as exc:
            hook = type(self).on_lost
            if hook is not None:
                with contextlib.suppress(Exception):
                    hook(f"reading the terminal failed: {exc.strerror or exc}")
            raise


def install_hooks(on_lost: LostHook | None) -> None:
    TerminalWriter.on_lost = on_lost
    DeckDriver.on_lost = on_lost
