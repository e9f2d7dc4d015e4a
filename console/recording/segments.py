"""Segment files: frames appended to a ``.edrec`` file, with a ``.edidx`` index beside it.

The index holds one fixed-size, CRC-checked entry per frame (where it lies and the times it
covers), written after the frame itself. It is only a shortcut: a reader trusts the entries up to
the first bad one and scans the data file from there, so a missing or torn index costs a scan, never
data. A cut file is a segment without an index. Files are created 0600 (state is its owner's only).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from console.recording import frames
from console.recording.frames import FrameInfo

DATA_SUFFIX = ".edrec"
INDEX_SUFFIX = ".edidx"
_ENTRY = struct.Struct("<QIBBHddI")  # offset, length, kind, codec, flags, t_first, t_last, count
ENTRY_SIZE = _ENTRY.size + 4  # + crc32 of the entry


def index_path(data: Path) -> Path:
    return data.with_suffix(INDEX_SUFFIX)


def _entry(info: FrameInfo) -> bytes:
    e = _ENTRY.pack(info.offset, info.length, info.kind, info.codec, info.flags, info.t_first, info.t_last,
                    info.count)
    return e + struct.pack("<I", zlib.crc32(e))


def _read_index(path: Path, data_size: int) -> tuple[list[FrameInfo], list[FrameInfo]]:
    """The index's entries up to the first that is torn, corrupt or points past the data; and the
    intact entries after that which point past the data (frames the data file no longer holds)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return [], []
    out: list[FrameInfo] = []
    beyond: list[FrameInfo] = []
    expect = 0
    for pos in range(0, len(raw) - ENTRY_SIZE + 1, ENTRY_SIZE):
        e = raw[pos:pos + _ENTRY.size]
        (crc,) = struct.unpack_from("<I", raw, pos + _ENTRY.size)
        if zlib.crc32(e) != crc:
            break
        off, length, kind, codec, flags, t0, t1, count = _ENTRY.unpack(e)
        info = FrameInfo(off, length, kind, codec, flags, t0, t1, count)
        if off < expect:
            break
        if beyond or off + length > data_size:
            beyond.append(info)
        else:
            out.append(info)
        expect = off + length
    return out, beyond


@dataclass
class Segment:
    """One data file read back: its frames (from the index, then a scan of what it lacks)."""

    path: Path
    frames: list[FrameInfo] = field(default_factory=list)
    # Frames this file lost (cut short, overwritten): known from the index, or from the header
    # left at the start of a torn span; and spans with no readable header at all (bytes).
    lost: list[FrameInfo] = field(default_factory=list)
    unreadable_bytes: int = 0
    _zdict: bytes | None = None

    @classmethod
    def load(cls, path: Path) -> Segment:
        seg = cls(path)
        damage: list[frames.Damage] = []
        with path.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            known, beyond = _read_index(index_path(path), size)
            start = known[-1].offset + known[-1].length if known else 0
            seg.frames = known + list(frames.scan(f, start, damage))
        readable = {i.offset for i in seg.frames}
        lost = {i.offset: i for i in beyond if i.offset not in readable}
        for d in damage:
            if d.header is not None:
                lost.setdefault(d.offset, d.header)
            elif not any(d.offset <= i.offset < d.offset + d.length for i in beyond):
                seg.unreadable_bytes += d.length
        seg.lost = sorted(lost.values(), key=lambda i: i.offset)
        return seg

    @property
    def zdict(self) -> bytes | None:
        """The segment's dictionary (the payload of its first dictionary frame), if it has one."""
        if self._zdict is None:
            for info in self.frames:
                if info.kind == frames.KIND_DICT:
                    data = self.read(info)
                    if data is not None:
                        self._zdict = frames.payload_of(info, data, None)
                        break
        return self._zdict

    def read(self, info: FrameInfo) -> bytes | None:
        """A frame's checked bytes, or None when it is corrupt (the index pointed at a torn frame)."""
        with self.path.open("rb") as f:
            got = frames.read_at(f, info.offset)
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
    """Appends frames to one data file (created 0600) and, when ``indexed``, entries to its index."""

    def __init__(self, path: Path, *, indexed: bool = True, level: int = frames.ZLIB_LEVEL) -> None:
        self.path = path
        self.level = level
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        self._fd = os.open(path, flags | os.O_EXCL, 0o600)
        self._idx = os.open(index_path(path), flags | os.O_TRUNC, 0o600) if indexed else -1
        self.size = 0
        self.zdict: bytes | None = None
        self.first: float | None = None
        self.last: float | None = None

    def write(self, kind: int, payload: bytes, *, t_first: float, t_last: float, count: int,
              use_dict: bool = False) -> None:
        """One frame, in one ``write`` (a kill leaves it whole or torn, never interleaved)."""
        data = frames.encode(kind, payload, t_first=t_first, t_last=t_last, count=count,
                             zdict=self.zdict if use_dict else None, level=self.level)
        info = frames.parse_header(data, self.size)
        assert info is not None
        _write_all(self._fd, data)
        if self._idx >= 0:
            _write_all(self._idx, _entry(info))
        self.size += len(data)
        if kind != frames.KIND_DICT:
            self.first = t_first if self.first is None else min(self.first, t_first)
            self.last = t_last if self.last is None else max(self.last, t_last)

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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
