"""The frame: the unit a recording is written, checked and decoded in.

A frame is a fixed header followed by its compressed payload::

    magic "EDR1" | kind u8 | codec u8 | flags u16 | t_first f64 | t_last f64 | count u32 | length u32 | crc32 u32

all little-endian; the CRC covers the header before it and the payload. Each frame decodes on its
own (given the segment's dictionary frame, when its flags say it used one), so a torn or corrupt
frame costs only itself: ``scan`` checks every CRC and, after a bad frame, looks for the next magic.

Payloads: documents are one JSON line of times, then one JSON document a line; a raw payload is a
JSON line ``[time, engine]`` followed by the payload's bytes; a dictionary frame holds the bytes a
segment's document frames are compressed against (zlib's preset dictionary); a rows frame follows
each document frame with the charts' history rows of its documents (``history_rows.rows_payload``).
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

MAGIC = b"EDR1"
HEADER = struct.Struct("<4sBBHddIII")
KIND_DOCS, KIND_RAW, KIND_DICT, KIND_ROWS = 1, 2, 3, 4
KINDS = (KIND_DOCS, KIND_RAW, KIND_DICT, KIND_ROWS)
CODEC_NONE, CODEC_ZLIB = 0, 1
FLAG_DICT = 1  # compressed against the segment's dictionary frame
MAX_PAYLOAD = 256 * 2**20  # a length above this is a corrupt header, not a frame
# What one frame may decompress to: a raw payload is at most the scraper's 16 MiB, a document frame
# a few MB. A frame beyond it is refused, not inflated (a few KB can claim a GB).
MAX_DECOMPRESSED = 64 * 2**20
ZLIB_LEVEL = 9  # 5 % smaller than level 6 for 1.5x its CPU, which is a few ms every 10 s
# A cut (a window copied at once, e.g. into an incident bundle) compresses 15 minutes in one go,
# where 1.5x the CPU is a noticeable part of the wait.
CUT_ZLIB_LEVEL = 6


class FrameError(ValueError):
    """A frame that cannot be decoded (bad CRC, unknown codec, missing dictionary)."""


class Reader(Protocol):
    """What frames are read from: an open binary file, or a segment's ``pread`` reader."""

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def read(self, n: int = -1, /) -> bytes: ...

    def tell(self) -> int: ...


@dataclass(frozen=True, slots=True)
class FrameInfo:
    """Where one frame lies in its file and what it covers."""

    offset: int
    length: int  # header + payload
    kind: int
    codec: int
    flags: int
    t_first: float
    t_last: float
    count: int


def encode(kind: int, payload: bytes, *, t_first: float, t_last: float, count: int,
           zdict: bytes | None = None, codec: int = CODEC_ZLIB, level: int = ZLIB_LEVEL) -> bytes:
    """One frame holding ``payload`` (compressed with ``codec``, against ``zdict`` when given)."""
    flags = 0
    if codec == CODEC_ZLIB:
        if zdict:
            c = zlib.compressobj(level, zdict=zdict)
            flags |= FLAG_DICT
        else:
            c = zlib.compressobj(level)
        body = c.compress(payload) + c.flush()
    elif codec == CODEC_NONE:
        body = payload
    else:
        raise FrameError(f"unknown codec {codec}")
    head = HEADER.pack(MAGIC, kind, codec, flags, t_first, t_last, count, len(body), 0)[:-4]
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + struct.pack("<I", crc) + body


def payload_of(info: FrameInfo, data: bytes, zdict: bytes | None) -> bytes:
    """The decompressed payload of a frame whose bytes (header included) are ``data``."""
    body = data[HEADER.size:]
    if info.codec == CODEC_NONE:
        return body
    if info.codec != CODEC_ZLIB:
        raise FrameError(f"unknown codec {info.codec}")
    if info.flags & FLAG_DICT:
        if not zdict:
            raise FrameError("frame needs its segment's dictionary, which is missing")
        d = zlib.decompressobj(zdict=zdict)
    else:
        d = zlib.decompressobj()
    try:
        out = d.decompress(body, MAX_DECOMPRESSED)
        if d.unconsumed_tail or (not d.eof and d.flush(1)):
            raise FrameError(f"decompresses to more than {MAX_DECOMPRESSED // 2**20} MiB")
        return out
    except zlib.error as exc:
        raise FrameError(f"cannot decompress: {exc}") from None


def parse_header(head: bytes, offset: int) -> FrameInfo | None:
    """The header at ``offset``, or None when these bytes are no plausible header."""
    if len(head) < HEADER.size:
        return None
    magic, kind, codec, flags, t0, t1, count, length, _crc = HEADER.unpack_from(head)
    if magic != MAGIC or kind not in KINDS or length > MAX_PAYLOAD or not (math.isfinite(t0) and t0 <= t1 < math.inf):
        return None
    return FrameInfo(offset, HEADER.size + length, kind, codec, flags, t0, t1, count)


def check(data: bytes) -> bool:
    """Whether a frame's bytes (header and payload) match the CRC in its header."""
    if len(data) < HEADER.size:
        return False
    crc: int = struct.unpack_from("<I", data, HEADER.size - 4)[0]
    return zlib.crc32(data[HEADER.size:], zlib.crc32(data[:HEADER.size - 4])) == crc


def read_at(f: Reader, offset: int) -> tuple[FrameInfo, bytes] | None:
    """The checked frame at ``offset`` of an open file, or None when it is torn or corrupt."""
    f.seek(offset)
    head = f.read(HEADER.size)
    info = parse_header(head, offset)
    if info is None:
        return None
    data = head + f.read(info.length - HEADER.size)
    if len(data) != info.length or not check(data):
        return None
    return info, data


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes of a data file that held no readable frame: ``header`` is the frame header found at
    their start when it is intact (a frame cut short keeps it: its times and count say what was lost)."""

    offset: int
    length: int
    header: FrameInfo | None


def scan(f: Reader, start: int = 0, damage: list[Damage] | None = None) -> Iterator[FrameInfo]:
    """Every intact frame from ``start`` on. A bad one is skipped: the search goes on from the next
    occurrence of the magic after its start; each skipped span (a torn last frame too) is appended
    to ``damage``."""
    f.seek(0, 2)
    size = f.tell()
    pos = start
    while pos < size:
        got = read_at(f, pos) if pos + HEADER.size <= size else None
        if got is not None:
            yield got[0]
            pos += got[0].length
            continue
        f.seek(pos)
        header = parse_header(f.read(HEADER.size), pos)
        nxt = _next_magic(f, pos + 1, size)
        end = size if nxt < 0 else nxt
        if damage is not None:
            damage.append(Damage(pos, end - pos, header))
        if nxt < 0:
            return
        pos = nxt


def _next_magic(f: Reader, pos: int, size: int) -> int:
    chunk = 1 << 16
    while pos < size:
        f.seek(pos)
        buf = f.read(chunk + len(MAGIC) - 1)
        i = buf.find(MAGIC)
        if i >= 0:
            return pos + i
        pos += chunk
    return -1
