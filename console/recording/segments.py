"""Segment files: frames appended to a ``.edrec`` file, with a ``.edidx`` index beside it.

The index holds one fixed-size, CRC-checked entry per frame (where it lies and the times it
covers), written after the frame itself. It is only a shortcut, and never trusted blindly: each
entry must follow the one before it and point at a frame header that says what the entry says
(``_verified``). From the first entry that does not (bytes deleted or inserted move every later
frame), the data file is scanned instead, from the frame before it, so a missing, torn or stale
index costs a scan, never data. A cut file is a segment without an index. Files are created 0600
(state is its owner's only), with ``O_EXCL | O_NOFOLLOW``: a symbolic link planted where a file is
to be created is refused (``PlantedLink``), never written through.
"""

from __future__ import annotations

import bisect
import errno
import io
import os
import stat
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from console.recording import frames
from console.recording.frames import FrameInfo

DATA_SUFFIX = ".edrec"
INDEX_SUFFIX = ".edidx"
_ENTRY = struct.Struct("<QIBBHddI")  # offset, length, kind, codec, flags, t_first, t_last, count
ENTRY_SIZE = _ENTRY.size + 4  # + crc32 of the entry
# An entry's kind..count (bytes 12-36) are laid out as a frame header's bytes 4-28.
_ENTRY_FIELDS = slice(12, 36)
_HEAD_FIELDS = slice(4, 28)
_PAYLOAD_LENGTH = struct.Struct("<I")  # at byte 28 of a frame header
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class PlantedLink(OSError):
    """A symbolic link (or another thing that is no regular file of ours) where the recorder was
    about to create or open a file: refused, so its target is never written."""

    def __init__(self, path: Path, what: str = "a symbolic link") -> None:
        super().__init__(errno.ELOOP, f"{path} is {what}; refusing to write through it")
        self.path = path


def create_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A new file at ``path``, 0600, never through a link: ``O_CREAT | O_EXCL | O_NOFOLLOW``.
    FileExistsError when a file of that name exists; PlantedLink when a symbolic link does."""
    try:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    except FileExistsError:
        if os.path.islink(path):
            raise PlantedLink(path) from None
        raise


def open_existing(path: Path, flags: int) -> int:
    """An existing regular file at ``path`` (``O_NOFOLLOW``): PlantedLink for a symbolic link, a
    FIFO, a device or a file with another name elsewhere (a hard link: writing it writes that too)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise PlantedLink(path) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        os.close(fd)
        raise PlantedLink(path, "not a regular file of its own" if stat.S_ISREG(st.st_mode) else "not a regular file")
    os.set_blocking(fd, True)
    return fd


def index_path(data: Path) -> Path:
    return data.with_suffix(INDEX_SUFFIX)


def _entry(info: FrameInfo) -> bytes:
    e = _ENTRY.pack(info.offset, info.length, info.kind, info.codec, info.flags, info.t_first, info.t_last,
                    info.count)
    return e + struct.pack("<I", zlib.crc32(e))


def _read_index(path: Path) -> list[tuple[FrameInfo, bytes]]:
    """The index's entries (with their bytes) up to the first that is torn or corrupt, or does not
    start where the one before it ends (frames are appended back to back from offset 0)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(fd, "rb", closefd=False) as f:
            raw = f.read()
    except OSError:
        return []
    finally:
        os.close(fd)
    out: list[tuple[FrameInfo, bytes]] = []
    expect = 0
    crc32, unpack = zlib.crc32, _ENTRY.unpack
    for pos in range(0, len(raw) - ENTRY_SIZE + 1, ENTRY_SIZE):
        e = raw[pos:pos + _ENTRY.size]
        if crc32(e) != int.from_bytes(raw[pos + _ENTRY.size:pos + ENTRY_SIZE], "little"):
            break
        off, length, kind, codec, flags, t0, t1, count = unpack(e)
        if off != expect or length < frames.HEADER.size:
            break
        out.append((FrameInfo(off, length, kind, codec, flags, t0, t1, count), e))
        expect = off + length
    return out


_SAMPLE_EVERY = 64  # index entries checked first, one in this many (and the last)


def _verified(fd: int, entries: list[tuple[FrameInfo, bytes]], size: int) -> int:
    """How many leading entries point, inside the data, at a frame header that says what the entry
    says (its kind, codec, flags, times, count and length). The entries are back to back from 0, so
    bytes deleted or inserted anywhere move every later frame off its entry: the last entry and one
    in every ``_SAMPLE_EVERY`` are checked first (a day of recording opens with a few hundred reads),
    and only when one is off is every entry checked, to find the first. A CRC is not checked here
    (that reads the whole file): a frame that fails it is skipped, and counted, when it is read."""
    sample = [*range(_SAMPLE_EVERY - 1, len(entries), _SAMPLE_EVERY), len(entries) - 1]
    if all(_points_at_its_frame(fd, entries[k][0], entries[k][1], size) for k in sample):
        return len(entries)
    for n, (info, e) in enumerate(entries):
        if not _points_at_its_frame(fd, info, e, size):
            return n
    return len(entries)


def _points_at_its_frame(fd: int, info: FrameInfo, entry: bytes, size: int) -> bool:
    if info.offset + info.length > size:
        return False
    head = os.pread(fd, frames.HEADER.size, info.offset)
    return (head[:4] == frames.MAGIC and head[_HEAD_FIELDS] == entry[_ENTRY_FIELDS]
            and _PAYLOAD_LENGTH.unpack_from(head, 28)[0] == info.length - frames.HEADER.size)


def _key(info: FrameInfo) -> tuple[int, float, float, int]:
    """What tells one frame from another wherever it lies (a shift moves its offset)."""
    return info.kind, info.t_first, info.t_last, info.count


class _Pread:
    """A read-only file over a descriptor, reading with ``pread`` (its own position: threads share the
    descriptor safely). For a segment whose name is gone (unpacked from an archive, then removed)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pos = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else self.pos + pos if whence == 1 else os.fstat(self.fd).st_size + pos
        return self.pos

    def tell(self) -> int:
        return self.pos

    def fileno(self) -> int:
        return self.fd

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            n = max(0, os.fstat(self.fd).st_size - self.pos)
        data = os.pread(self.fd, n, self.pos)
        self.pos += len(data)
        return data

    def __enter__(self) -> _Pread:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@dataclass
class Segment:
    """One data file read back: its frames (from the index, then a scan of what it lacks)."""

    path: Path
    frames: list[FrameInfo] = field(default_factory=list)
    # Frames this file lost (cut short, overwritten, moved by bytes deleted or inserted before them):
    # known from the index, or from the header left at the start of a damaged span; and spans with
    # no readable header at all (bytes).
    lost: list[FrameInfo] = field(default_factory=list)
    unreadable_bytes: int = 0
    first_damage: int | None = None  # the offset of the first lost frame or unreadable span
    fd: int | None = None  # read through this descriptor (the file's name may be gone), else by path
    _zdict: bytes | None = None
    _zdict_read = False
    bad_dicts: int = 0  # dictionary frames listed in ``frames`` that do not read back

    @classmethod
    def load(cls, path: Path, *, fd: int | None = None) -> Segment:
        """``fd``: an open descriptor of the data file (then no index is read: an unpacked cut)."""
        seg = cls(path, fd=fd)
        damage: list[frames.Damage] = []
        with seg._open() as f:
            size = f.seek(0, 2)
            entries = _read_index(index_path(path)) if fd is None else []
            n = _verified(f.fileno(), entries, size) if entries else 0
            if n < len(entries):
                # Entry n is off: the frame before it may be what changed length. Scan from there.
                n = max(0, n - 1)
                start = entries[n][0].offset if n < len(entries) else 0
            else:
                start = entries[-1][0].offset + entries[-1][0].length if entries else 0
            known = [info for info, _e in entries[:n]]
            scanned = list(frames.scan(f, start, damage))
        seg.frames = known + scanned
        # Frames the index lists from the scan's start on that the scan did not find are lost; the
        # index tells their times and counts, whatever is left of their headers.
        found = Counter(_key(i) for i in scanned)  # a multiset: the dictionary's two copies are alike
        starts = [i.offset for i in scanned]
        lost: dict[int, FrameInfo] = {}
        for i, _e in entries[n:]:
            if found[_key(i)] > 0:
                found[_key(i)] -= 1
                continue
            k = bisect.bisect_right(starts, i.offset) - 1
            if k >= 0 and i.offset < starts[k] + scanned[k].length:
                continue  # a frame that reads lies there: the entry is stale or foreign, not a loss
            lost[i.offset] = i
        spans = list(lost.values())
        damaged = [i.offset for i in spans]
        for d in damage:
            if any(d.offset < i.offset + i.length and i.offset < d.offset + d.length for i in spans):
                continue  # bytes of a frame the index already names
            damaged.append(d.offset)
            if d.header is not None:
                lost.setdefault(d.offset, d.header)
            else:
                seg.unreadable_bytes += d.length
        seg.lost = sorted(lost.values(), key=lambda i: i.offset)
        seg.first_damage = min(damaged, default=None)
        return seg

    @property
    def torn_end_only(self) -> bool:
        """Whether all that was lost lies after the last frame that reads (a segment cut short, as a
        kill leaves it), not inside it."""
        return self.first_damage is None or not self.frames or self.first_damage > max(i.offset for i in self.frames)

    def _open(self) -> _Pread | io.BufferedReader:
        if self.fd is not None:
            return _Pread(self.fd)
        return self.path.open("rb")

    @property
    def zdict(self) -> bytes | None:
        """The segment's dictionary: the payload of its first dictionary frame that reads back (the
        writer stores a spare copy of it further on, ``SegmentWriter.write``)."""
        if not self._zdict_read:
            self._zdict_read = True
            for info in self.frames:
                if info.kind == frames.KIND_DICT:
                    data = self.read(info)
                    try:
                        if data is None:
                            raise frames.FrameError("unreadable")
                        self._zdict = frames.payload_of(info, data, None)
                        break
                    except frames.FrameError:
                        self.bad_dicts += 1
        return self._zdict

    def dictionary_damage(self) -> tuple[int, int] | None:
        """None when the segment's dictionary reads back, or none of its frames needs one; else the
        number of document frames and documents that cannot be decoded without it."""
        needs = [i for i in self.frames if i.flags & frames.FLAG_DICT and i.kind != frames.KIND_DICT]
        if not needs or self.zdict is not None:
            return None
        docs = [i for i in needs if i.kind == frames.KIND_DOCS]
        return len(docs), sum(i.count for i in docs)

    @property
    def damaged_dictionaries(self) -> int:
        """Dictionary frames that were lost or do not read back (a spare may have stood in)."""
        self.zdict  # noqa: B018 (reads the dictionary frames, counting the bad ones)
        return self.bad_dicts + sum(1 for i in self.lost if i.kind == frames.KIND_DICT)

    def read(self, info: FrameInfo) -> bytes | None:
        """A frame's checked bytes, or None when it is corrupt (the index pointed at a torn frame)."""
        try:
            with self._open() as f:
                got = frames.read_at(f, info.offset)
        except OSError:
            return None
        return got[1] if got is not None and got[0].length == info.length else None

    def payload(self, info: FrameInfo) -> bytes | None:
        """A frame's decompressed payload, or None when it cannot be read back."""
        data = self.read(info)
        if data is None:
            return None
        try:
            return frames.payload_of(info, data, self.zdict if info.flags & frames.FLAG_DICT else None)
        except frames.FrameError:
            return None


class SegmentWriter:
    """Appends frames to one data file (created 0600) and, when ``indexed``, entries to its index.

    The segment's dictionary is written twice: once before the first frame that uses it and once
    more, a spare, before the second document frame (after the first one's rows frame). Every frame
    compressed against it is lost without it, and a reader takes the first copy that reads back."""

    def __init__(self, path: Path, *, indexed: bool = True, level: int = frames.ZLIB_LEVEL) -> None:
        self.path = path
        self.level = level
        self._fd = create_private(path)
        self._idx = -1
        if indexed:
            try:
                self._idx = _create_index(index_path(path))
            except OSError:
                os.close(self._fd)
                path.unlink(missing_ok=True)
                raise
        self.size = 0
        self.zdict: bytes | None = None
        self._spare: bytes | None = None  # the dictionary frame, until its spare copy is written
        self._dict_docs = 0  # document frames written against the dictionary
        self.first: float | None = None
        self.last: float | None = None

    def write(self, kind: int, payload: bytes, *, t_first: float, t_last: float, count: int,
              use_dict: bool = False) -> None:
        """One frame, in one ``write`` (a kill leaves it whole or torn, never interleaved)."""
        if use_dict and kind == frames.KIND_DOCS and self.zdict:
            if self._dict_docs == 1 and self._spare is not None:
                self._append(self._spare)
                self._spare = None
            self._dict_docs += 1
        data = frames.encode(kind, payload, t_first=t_first, t_last=t_last, count=count,
                             zdict=self.zdict if use_dict else None, level=self.level)
        self._append(data)
        if kind == frames.KIND_DICT:
            self._spare = data
        else:
            self.first = t_first if self.first is None else min(self.first, t_first)
            self.last = t_last if self.last is None else max(self.last, t_last)

    def _append(self, data: bytes) -> None:
        info = frames.parse_header(data, self.size)
        assert info is not None
        _write_all(self._fd, data)
        if self._idx >= 0:
            _write_all(self._idx, _entry(info))
        self.size += len(data)

    def set_dict(self, zdict: bytes, at: float) -> None:
        """Write the dictionary the segment's document frames are compressed against."""
        self.write(frames.KIND_DICT, zdict, t_first=at, t_last=at, count=1)
        self.zdict = zdict

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        for fd in (self._fd, self._idx):
            if fd >= 0:
                os.close(fd)
        self._fd = self._idx = -1


def _create_index(path: Path) -> int:
    """A new index beside a data file just created. An index of that name without its data file is
    left from a segment whose data file was removed (retention removes the data file first): it is
    removed, then the index created anew, never truncated through whatever the name is."""
    try:
        return create_private(path)
    except FileExistsError:
        path.unlink()
        return create_private(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
