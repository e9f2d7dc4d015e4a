"""Writing a file the user named with ``-o``: whole or not at all, and never replacing what the path is.

A new or regular file is written under a temporary name beside it and renamed into place, so a
reader never sees half of it and a failure leaves the old file as it was. Anything else keeps its
identity: a symlink is followed (its target is written; the link stays a link), a FIFO or a device
is written through in place (``-o /dev/null`` must not turn the host's /dev/null into a file), and
a directory or socket is refused with one line. ``-`` is standard output.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from console.errors import UserError

STDOUT = "-"


def is_stdout(dest: str | Path) -> bool:
    return str(dest) == STDOUT


def resolve(dest: Path) -> tuple[Path, bool]:
    """(the path to write, whether it is written in place rather than renamed into place).
    Raises ``UserError`` for a path that is no file to write (a directory, a socket)."""
    real = Path(os.path.realpath(dest)) if dest.is_symlink() else dest
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return real, False
    except OSError as exc:
        raise UserError(f"cannot write {dest}: {exc.strerror}") from None
    if stat.S_ISREG(mode):
        return real, False
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return real, True
    kind = "a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    raise UserError(f"cannot write {dest}: it is {kind}")


@contextlib.contextmanager
def output(dest: str | Path, *, binary: Literal[True, False] = False, mode: int = 0o644) -> Iterator[IO[Any]]:
    """An open file for ``dest`` (see the module docstring); on an error inside the block nothing
    is renamed into place and the temporary file is removed."""
    if is_stdout(dest):
        yield sys.stdout.buffer if binary else sys.stdout
        return
    path, in_place = resolve(Path(dest))
    if in_place:
        with open(path, "wb") if binary else open(path, "w", encoding="utf-8", newline="") as f:
            yield f
        return
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.stat(path).st_mode)  # an existing file keeps its permissions
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    # The temporary name is guessable (pid): in a shared folder a link planted there must not have
    # its target truncated. A leftover is removed; the file is created new, never through a link.
    with contextlib.suppress(OSError):
        tmp.unlink()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    except OSError as exc:
        raise UserError(f"cannot write {dest}: {tmp.name}: {exc.strerror}") from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
