"""Open what a user names: a recording folder, a cut ``.edrec`` file, or a bundle (a tar archive, e.g.
``enginedeck-bundle-*.tar.gz``) that holds one.

A bundle may come from anyone, so unpacking it is bounded: each recording in it is copied out only
when its declared size fits what is left of a decompression budget (``MAX_MEMBER_BYTES`` a member;
in all, ``BUDGET_FLOOR`` plus ``BUDGET_RATIO`` times the archive's own size, at most
``MAX_TOTAL_BYTES``), and every byte decompressed, the members stepped over included, counts
against that budget: a few MB that claim gigabytes are refused at once, not unpacked. The copies go
to a private temporary folder that is removed as soon as they are open (the reader keeps their
descriptors), and on SIGTERM, SIGHUP or SIGINT while they are written (``cleanup_on_signals``).
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import shutil
import signal
import tarfile
import tempfile
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Protocol

from console.recording.reader import Recording
from console.recording.segments import DATA_SUFFIX, Segment
from console.recording.writer import RecordingError
from console.timespec import parse_time

MAX_MEMBER_BYTES = 4 * 2**30  # a bundle's recording larger than this is refused, not extracted
# A recording's frames are compressed already: a tar.gz of them is about its content's size, a
# bundle's text files are small. The budget leaves room for both and refuses a bomb.
BUDGET_FLOOR = 64 * 2**20
BUDGET_RATIO = 16
MAX_TOTAL_BYTES = 16 * 2**30
_CHUNK = 1 << 20


class _Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class _Budget:
    """A decompressed stream that raises RecordingError once more than ``limit`` bytes came out."""

    def __init__(self, raw: _Readable, limit: int, name: str) -> None:
        self.raw = raw
        self.limit = limit
        self.name = name
        self.used = 0

    def read(self, n: int = -1) -> bytes:
        room = self.limit - self.used
        data = self.raw.read(room + 1 if n < 0 or n > room else n)
        self.used += len(data)
        if self.used > self.limit:
            raise RecordingError(f"{self.name}: unpacks to more than {_size(self.limit)} (its budget: "
                                 f"{BUDGET_RATIO}x its size, at least {_size(BUDGET_FLOOR)}); refused")
        return data


def _size(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def budget_for(archive_bytes: int) -> int:
    """How many bytes an archive of this size may unpack to, in all."""
    return min(MAX_TOTAL_BYTES, BUDGET_FLOOR + BUDGET_RATIO * archive_bytes)


def _decompressed(f: IO[bytes]) -> _Readable:
    """The archive's tar stream: gzip, bzip2 and xz recognised by their magic, else plain tar."""
    head = f.read(6)
    f.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=f, mode="rb")
    if head.startswith(b"BZh"):
        return bz2.BZ2File(f)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(f)
    return f


@contextlib.contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """While the block runs in the main thread, SIGTERM and SIGHUP end it as SIGINT does: as an
    exception (SystemExit 143 / 129), so the ``finally`` and ``with`` blocks on the way out remove
    temporary files and folders. A signal's default action ends the process where it stands."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    old = {sig: signal.signal(sig, leave) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def open_any(path: Path) -> Recording:
    path = Path(path)
    if path.is_file() and tarfile.is_tarfile(path):
        return _from_tar(path)
    return Recording.open(path)


def _from_tar(path: Path) -> Recording:
    with cleanup_on_signals():
        tmp = Path(tempfile.mkdtemp(prefix="enginedeck-replay-"))
        try:
            fds = _unpack(path, tmp)
            segments = [Segment.load(tmp / name, fd=fd) for name, fd in fds]
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, zlib.error) as exc:
            raise RecordingError(f"{path}: cannot read the archive: {exc}") from None
        finally:
            # The copies stay readable through their descriptors: nothing is left on disk, whatever
            # way the process ends later (a console's hard exit runs no cleanup).
            shutil.rmtree(tmp, ignore_errors=True)
    if not segments:
        raise RecordingError(f"{path}: the archive holds no recording (no *{DATA_SUFFIX} file)")
    return Recording(path, segments)


def _unpack(path: Path, tmp: Path) -> list[tuple[str, int]]:
    """Copy each ``*.edrec`` member of the archive into ``tmp`` under a name of ours (never the
    member's path: no ../ out of the folder); returns (name, open descriptor) for each."""
    limit = budget_for(path.stat().st_size)
    out: list[tuple[str, int]] = []
    with path.open("rb") as raw:
        stream = _Budget(_decompressed(raw), limit, str(path))
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for m in tar:
                    if not (m.isfile() and m.name.endswith(DATA_SUFFIX)):
                        continue
                    left = limit - stream.used
                    if m.size > MAX_MEMBER_BYTES or m.size > left:
                        raise RecordingError(
                            f"{path}: {m.name} would unpack to {_size(m.size)}, more than "
                            f"{_size(min(MAX_MEMBER_BYTES, left))} left of the archive's budget; refused")
                    src = tar.extractfile(m)
                    if src is None:
                        continue
                    name = f"{len(out):04d}{DATA_SUFFIX}"
                    fd = os.open(tmp / name, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                                 | getattr(os, "O_CLOEXEC", 0), 0o600)
                    out.append((name, fd))
                    with src, os.fdopen(os.dup(fd), "wb") as dst:
                        shutil.copyfileobj(src, dst, _CHUNK)
        except BaseException:
            for _name, fd in out:
                os.close(fd)
            raise
    return out


def window(text_from: str | None, text_to: str | None, *,
           now: float | None = None) -> tuple[float | None, float | None]:
    """--from/--to as unix times (None: open end); a one-line RecordingError when unreadable."""
    try:
        lo = parse_time(text_from, now=now) if text_from else None
        hi = parse_time(text_to, now=now) if text_to else None
    except ValueError as exc:
        raise RecordingError(str(exc)) from None
    if lo is not None and hi is not None and hi < lo:
        raise RecordingError("--to is before --from")
    return lo, hi
