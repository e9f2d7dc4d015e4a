"""The shutdown deadline's backstop: a tiny process next to the console, with an interpreter of its own.

The console's deadline thread needs the console's GIL to notice a signal and to exit; on a starved
machine (many busy threads, two cores shared by many processes) that took up to a second and more.
This helper needs nothing from the console: the console's C-level signal handler writes each
signal number into a pipe this process reads (``signal.set_wakeup_fd``), and it watches the
terminal for a hang-up itself. On either it tells the console's deadline thread (a byte into the
console's own pipe), and if the console is still there ``deadline`` seconds later it restores the
terminal's saved modes, SIGKILLs the process groups the console started (engines, the demo's load)
and then the console. It ends, with nothing done, when the lifeline pipe reports the console gone
(or done: ``TerminalGuard.close``).

Standard library only, started with ``python -I -S`` so it is up in milliseconds. Arguments:
lifeline-fd signal-fd forward-fd console-pid deadline tty-attrs-json (or "-"; termios.tcgetattr's
list with the control characters as integers).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import termios
import time
from typing import Any

ENDING = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
HANGUP_BYTE = 254  # forwarded for a hang-up seen here (signal numbers are 1..64)
RESET = (b"\x1b[<u\x1b[?1049l\x1b[?25h\x1b[?1004l\x1b[?1000l\x1b[?1003l\x1b[?1015l\x1b[?1006l"
         b"\x1b[?1016l\x1b[?2004l\x1b[?7h")


def main(argv: list[str]) -> int:
    lifeline, sig_fd, forward, console = (int(a) for a in argv[:4])
    deadline = float(argv[4])
    attrs = json.loads(argv[5]) if argv[5] != "-" else None
    console_group = os.getpgid(console)
    for s in ENDING:  # the terminal's signals reach the whole group: they are the console's to act on
        signal.signal(s, signal.SIG_IGN)
    tty = 0 if _isatty(0) else None
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    poller.register(sig_fd, select.POLLIN)
    if tty is not None:
        poller.register(tty, 0)  # hang-up only
    while True:
        event = 0
        for fd, ev in _poll(poller, None):
            if fd == lifeline:
                return 0  # the console ended, or closed us after a normal end
            if fd == sig_fd:
                with contextlib.suppress(BlockingIOError):
                    event = next((b for b in os.read(sig_fd, 256) if b in ENDING), event)
            elif ev & (select.POLLHUP | select.POLLERR):
                poller.unregister(fd)
                event = HANGUP_BYTE
        if event:
            break
    with contextlib.suppress(OSError):
        os.write(forward, bytes([event]))  # wakes the console's deadline thread, if it can run
    end = time.monotonic() + deadline
    poller = select.poll()
    poller.register(lifeline, select.POLLIN)
    while (left := end - time.monotonic()) > 0:
        if _poll(poller, left):
            return 0  # ended in time
    _restore(tty, attrs)
    _kill_groups_of(console, console_group)
    with contextlib.suppress(ProcessLookupError):
        os.kill(console, signal.SIGKILL)
    return 0


def _poll(poller: select.poll, seconds: float | None) -> list[tuple[int, int]]:
    try:
        return poller.poll(None if seconds is None else max(1, int(seconds * 1000)))
    except InterruptedError:
        return []


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _restore(tty: int | None, attrs: list[Any] | None) -> None:
    if tty is None:
        return
    if attrs is not None:
        with contextlib.suppress(termios.error, OSError, TypeError):
            termios.tcsetattr(tty, termios.TCSANOW, attrs)
    try:
        fd = os.open(f"/proc/self/fd/{tty}", os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return
    with contextlib.suppress(OSError):
        os.write(fd, RESET)
    os.close(fd)


def _kill_groups_of(console: int, console_group: int) -> None:
    """SIGKILL the process group of every child the console started in a group of its own."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rindex(b")") + 2:].split()
            ppid, pgid = int(fields[1]), int(fields[2])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == console and pgid != console_group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
