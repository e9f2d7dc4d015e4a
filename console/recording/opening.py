"""Open what a user names: a recording folder, a cut ``.edrec`` file, or a bundle (a tar archive, e.g.
``enginedeck-bundle-*.tar.gz``) that holds one; the bundle's recording is read from a private
temporary folder that is removed when the process ends.
"""

from __future__ import annotations

import atexit
import shutil
import tarfile
import tempfile
from pathlib import Path

from console.recording.reader import Recording
from console.recording.segments import DATA_SUFFIX
from console.recording.writer import RecordingError
from console.timespec import parse_time

MAX_MEMBER_BYTES = 4 * 2**30  # a bundle's recording larger than this is refused, not extracted


def open_any(path: Path) -> Recording:
    path = Path(path)
    if path.is_file() and tarfile.is_tarfile(path):
        return Recording.open(_from_tar(path))
    return Recording.open(path)


def _from_tar(path: Path) -> Path:
    try:
        with tarfile.open(path) as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(DATA_SUFFIX)]
            if not members:
                raise RecordingError(f"{path}: the archive holds no recording (no *{DATA_SUFFIX} file)")
            tmp = Path(tempfile.mkdtemp(prefix="enginedeck-replay-"))
            atexit.register(shutil.rmtree, tmp, True)
            for n, m in enumerate(members):
                if m.size > MAX_MEMBER_BYTES:
                    raise RecordingError(f"{path}: {m.name} is too large ({m.size} bytes)")
                src = tar.extractfile(m)
                if src is None:
                    continue
                # Our own names, never the member's path (no ../ out of the folder).
                with src, (tmp / f"{n:04d}{DATA_SUFFIX}").open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            return tmp
    except (tarfile.TarError, OSError) as exc:
        raise RecordingError(f"{path}: cannot read the archive: {exc}") from None


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
