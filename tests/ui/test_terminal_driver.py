"""Terminal output that cannot block for good (console/ui/terminal_driver.py), on real ptys:
everything reaches a live terminal in order; a hung-up one is given up at once (and reported),
a stalled one from the give-up time on; ``stop`` is bounded; SIGCONT without our SIGTSTP does not
restart application mode (the kernel sends one with every hang-up)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import IO, Any, cast

import pytest

from console.ui.terminal_driver import STOP_WAIT, DeckDriver, TerminalWriter, install_hooks

CHUNK = "0123456789abcdef" * 64  # 1 KiB


@pytest.fixture
def pty_file() -> Iterator[tuple[int, IO[str]]]:
    master, slave = os.openpty()
    f = open(slave, "w", encoding="utf-8", closefd=True)  # noqa: SIM115 - closed below
    try:
        yield master, f
    finally:
        f.close()
        with contextlib.suppress(OSError):
            os.close(master)


@pytest.fixture
def lost() -> Iterator[list[str]]:
    seen: list[str] = []
    install_hooks(seen.append)
    TerminalWriter.dropped = False
    try:
        yield seen
    finally:
        install_hooks(None)
        TerminalWriter.dropped = False


def _drain(master: int, stop: threading.Event, into: bytearray) -> None:
    while not stop.is_set():
        try:
            data = os.read(master, 65536)
        except OSError:
            return
        into += data


def test_a_live_terminal_gets_everything_in_order(pty_file: tuple[int, IO[str]], lost: list[str]) -> None:
    master, f = pty_file
    got = bytearray()
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(master, stop, got), daemon=True)
    reader.start()
    w = TerminalWriter(f)
    w.start()
    sent = [f"<{i}>{CHUNK}" for i in range(300)]
    for text in sent:
        w.write(text)
    w.stop()
    deadline = time.monotonic() + 10
    want = "".join(sent).encode()
    while len(got) < len(want) and time.monotonic() < deadline:
        time.sleep(0.02)
    stop.set()
    assert bytes(got) == want
    assert not w.lost and not lost and not TerminalWriter.dropped


def test_a_hung_up_terminal_is_given_up_and_reported(pty_file: tuple[int, IO[str]], lost: list[str]) -> None:
    master, f = pty_file
    w = TerminalWriter(f)
    w.start()
    os.close(master)  # the terminal goes: writes now fail with EIO
    t0 = time.monotonic()
    for _ in range(500):  # far more than Textual's queue of 30: none of these may block
        w.write(CHUNK)
    w.stop()
    assert time.monotonic() - t0 < STOP_WAIT + 2
    assert not w.is_alive()
    assert w.lost and lost == [w.lost]
    assert TerminalWriter.dropped


def test_a_stalled_terminal_blocks_writes_only_until_the_give_up_time(
        pty_file: tuple[int, IO[str]], lost: list[str]) -> None:
    _master, f = pty_file  # nobody reads the master: the pty buffer fills
    w = TerminalWriter(f)
    w.start()
    written = threading.Event()

    def write_lots() -> None:
        for _ in range(2000):  # 2 MiB: far more than a pty holds
            w.write(CHUNK)
        written.set()

    threading.Thread(target=write_lots, daemon=True).start()
    time.sleep(1.0)
    assert not written.is_set()  # a slow terminal holds the writes back (backpressure)...
    t0 = time.monotonic()
    w.give_up_at(time.monotonic() + 0.3)  # ...until shutdown began
    assert written.wait(5)
    w.stop()
    took = time.monotonic() - t0
    assert 0.25 <= took < 0.3 + STOP_WAIT + 2
    assert not w.is_alive()
    assert TerminalWriter.dropped and not w.lost  # dropped, but the terminal was never lost


def test_stop_is_bounded_on_a_stalled_terminal(pty_file: tuple[int, IO[str]], lost: list[str]) -> None:
    _master, f = pty_file
    w = TerminalWriter(f)
    w.start()
    for _ in range(29):  # a full queue behind a write that cannot finish
        w.write(CHUNK * 64)
    t0 = time.monotonic()
    w.stop()
    assert time.monotonic() - t0 < STOP_WAIT + 2


class _Recorder(DeckDriver):
    def __init__(self) -> None:
        self.resumed = 0
        self._suspended = False
        self._auto_restart = True

    def resume_application_mode(self) -> None:
        self.resumed += 1


def test_sigcont_resumes_only_after_our_own_suspend() -> None:
    d = _Recorder()
    d._sigcont_application(signal.SIGCONT, None)  # as the kernel sends on hang-up
    assert d.resumed == 0
    d._suspended = True  # what _sigtstp_application records before it stops the process
    d._sigcont_application(signal.SIGCONT, None)
    assert d.resumed == 1
    d._sigcont_application(signal.SIGCONT, None)
    assert d.resumed == 1


def test_the_console_runs_on_the_deck_driver() -> None:
    from textual.drivers.linux_driver import LinuxDriver

    from console.ui.app import DeckApp
    from console.ui.launch import _run_guarded
    from console.ui.terminal_guard import TerminalGuard

    class _App:
        """Stands in for DeckApp (a real one would take over this terminal): run reports its driver."""

        driver_class: Any = LinuxDriver

        def run(self, mouse: bool) -> str:
            return str(self.driver_class.__name__)

        def exit_from_thread(self) -> None:
            pass

    # A guard that is never installed: no signal handlers, no helper process, no tty.
    TerminalWriter.dropped = False  # process-wide; the writer tests above set it on purpose
    guard = TerminalGuard(tty_in=None, tty_out=None, helper_extra=None)
    assert _run_guarded(cast(DeckApp, _App()), guard, mouse=False) == "DeckDriver"
    assert guard.output_dropped is not None and guard.output_dropped() is False
