"""Where an unexpected error goes: its traceback into ``crash.log`` in the state directory, and one
line on the terminal naming that file.

A traceback on the terminal is noise to the person at 3 a.m. and can scroll away with what the screen
showed; in the log it stays for the bug report. Secret-looking values (tokens, keys, passwords in
URLs) are masked before anything is written.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

from console import __version__
from console.paths import private_dir, state_dir
from console.secrets import scrub

# The exit status of a command that ended on an unexpected error (sysexits' EX_SOFTWARE).
CRASH_EXIT = 70


class ConsoleCrashed(Exception):
    """The console's app ended on an unhandled error; ``log`` holds its traceback (None: it could
    not be written)."""

    def __init__(self, error: BaseException, log: Path | None) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error
        self.log = log


def crash_log_path() -> Path:
    return state_dir() / "crash.log"


def write(error: BaseException) -> Path | None:
    """Append ``error``'s traceback (with the time, version and command line) to the crash log; its
    path, or None when it cannot be written (a read-only home: the one-line message says so)."""
    text = "".join(traceback.format_exception(error))
    entry = (f"=== {time.strftime('%Y-%m-%d %H:%M:%S %z')} enginedeck {__version__} pid {os.getpid()}\n"
             f"command: {' '.join(sys.argv)}\n{text}\n")
    path = crash_log_path()
    try:
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(scrub(entry))
    except OSError:
        return None
    return path


def one_line(error: BaseException, log: Path | None) -> str:
    """The message for the terminal: what failed, and where the traceback is."""
    from console.textout import shown  # the error's text may quote an engine: inert as well as scrubbed

    what = shown(f"{type(error).__name__}: {error}".splitlines()[0] if str(error) else type(error).__name__)
    where = f"traceback in {log}" if log is not None else "the crash log could not be written"
    return f"enginedeck: internal error: {what} ({where})"
