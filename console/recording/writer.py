"""``RecordingWriter``: status documents and raw payloads into rotating, size- and age-bounded segments.

Documents are kept in memory until they span ``frame_s`` seconds (8 s: with a 1 s refresh a frame
then holds 9 documents), then written as one frame, followed by a rows frame with the history rows of the same documents
(``history_rows``: what a seek reads instead of the documents), so ``kill -9`` loses at most the documents of
the frame in progress (under 10 s). A raw payload is a frame of its own, written at once (the
caller adds them at a low rate). A segment ends at the next multiple of ``segment_s`` (an hour)
or when it holds an eighth of ``max_bytes``; retention then removes whole old segments, by age
(``retain_s``) and by total size (``max_bytes``). One writer per folder: a second one is refused
while the first holds the folder's lock.
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from console.paths import private_dir
from console.recording import columns, frames
from console.recording.history_rows import Row, rows_of, rows_payload
from console.recording.payloads import raw_payload
from console.recording.segments import (
    DATA_SUFFIX,
    PlantedLink,
    SegmentWriter,
    create_private,
    index_path,
    open_existing,
)
from console.secrets import Scrubber

FRAME_S = 8.0
SEGMENT_S = 3600.0
RETENTION_EVERY_S = 60.0
MIN_SEGMENT_BYTES = 1 << 20
SEGMENT_NAME = re.compile(r"^(\d{8}-\d{6})(?:-\d+)?" + re.escape(DATA_SUFFIX) + "$")
LOCK_NAME = ".lock"
# Each JSON string and the colon after it when it is a key (orjson writes no spaces).
_JSON_STRING = re.compile(r'"([^"\\\n]*(?:\\.[^"\\\n]*)*)"(:?)')  # unrolled: twice as fast


class RecordingError(Exception):
    """A recording that cannot be written or read (one line, for the user)."""


def segment_name(at: float) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(at)) + DATA_SUFFIX


def segment_start(path: Path) -> float | None:
    """The UTC start time in a segment's name; None for a file that is no segment of ours."""
    m = SEGMENT_NAME.match(path.name)
    return None if m is None else float(calendar.timegm(time.strptime(m.group(1), "%Y%m%d-%H%M%S")))


def our_segments(directory: Path) -> list[Path]:
    """This folder's segment files, oldest first (their names sort by time)."""
    return sorted(p for p in directory.glob("*" + DATA_SUFFIX) if SEGMENT_NAME.match(p.name))


class RecordingWriter:
    """Writes one recording folder. Not thread-safe: one thread adds (``console.recording.recorder``
    runs it off the collecting thread)."""

    def __init__(self, directory: Path, *, retain_s: float | None = None, max_bytes: int | None = None,
                 frame_s: float = FRAME_S, segment_s: float = SEGMENT_S,
                 scrubber: Callable[[str], str] | None = None) -> None:
        if retain_s is not None and retain_s <= 0:
            raise RecordingError("the retention must be positive")
        if max_bytes is not None and max_bytes <= 0:
            raise RecordingError("the maximum size must be positive")
        self.directory = Path(directory)
        try:
            private_dir(self.directory)
        except OSError as exc:
            raise RecordingError(f"cannot create the recording folder {self.directory}: {exc.strerror}") from None
        self.retain_s = retain_s
        self.max_bytes = max_bytes
        self.frame_s = frame_s
        self.segment_s = segment_s
        self._scrub = scrubber or Scrubber()
        self._clean: set[str] = set()  # string values already checked for secrets
        self._lock_fd = _lock(self.directory)
        self._seg: SegmentWriter | None = None
        self._seg_end = -math.inf
        self._times: list[float] = []
        self._docs: list[tuple[list[bytes], list[bytes]]] = []  # each document split (``columns.split``)
        # The layout of the last document checked for secrets, and whether no value in it can form one.
        self._layout: list[bytes] | None = None
        self._layout_clean = False
        self._rows: list[list[Row]] = []
        self._retained_at = -math.inf
        self._pending_dict = False
        self.frames_written = 0
        self.bytes_written = 0

    @property
    def segment(self) -> Path | None:
        """The segment being written, if any."""
        return self._seg.path if self._seg is not None else None

    @property
    def pending_since(self) -> float | None:
        """The time of the oldest document not yet written, if any."""
        return self._times[0] if self._times else None

    # -- adding ------------------------------------------------------------------------------

    def add(self, doc: Mapping[str, Any], *, at: float) -> None:
        """One status document (``status_doc(snapshot)``) recorded at ``at`` (unix seconds)."""
        parts, written = self._encode(doc)
        self._segment_for(at)
        self._times.append(at)
        self._docs.append(parts)
        self._rows.append(rows_of(written))
        if at - self._times[0] >= self.frame_s:
            self.flush()
        self._retain(at)

    def add_raw(self, engine: str, payload: bytes, *, at: float) -> None:
        """One raw metrics payload of ``engine`` as it was scraped at ``at`` (written at once)."""
        text = payload.decode("utf-8", "surrogateescape")
        masked = self._scrub(text)
        if masked != text:
            payload = masked.encode("utf-8", "surrogateescape")
        engine = self._scrub(engine)  # a PROFILE@URL engine's name is its URL, userinfo and query too
        seg = self._segment_for(at)
        self._count(seg, frames.KIND_RAW, raw_payload(engine, payload, at), at, at, 1)
        self._retain(at)

    def flush(self) -> None:
        """Write the documents kept in memory as one frame."""
        if not self._times or self._seg is None:
            return
        times, docs, rows = self._times, self._docs, self._rows
        self._times, self._docs, self._rows = [], [], []
        if self._pending_dict:
            # The segment's first document is its dictionary: every later one shares its keys.
            before = self._seg.size
            self._seg.set_dict(columns.join(*docs[0]), times[0])
            self._pending_dict = False
            self.bytes_written += self._seg.size - before
        t0, t1, n = min(times), max(times), len(times)
        self._count(self._seg, frames.KIND_DOCS, columns.encode(times, docs), t0, t1, n, use_dict=True)
        self._count(self._seg, frames.KIND_ROWS, rows_payload(times, rows), t0, t1, n, use_dict=True)

    def close(self) -> None:
        """Flush, close the segment and release the folder."""
        try:
            self.flush()
        finally:
            if self._seg is not None:
                self._seg.close()
                self._seg = None
            if self._lock_fd >= 0:
                with contextlib.suppress(OSError):  # the pid of a writer that has finished misleads
                    os.ftruncate(self._lock_fd, 0)
                os.close(self._lock_fd)
                self._lock_fd = -1

    def __enter__(self) -> RecordingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- inside ------------------------------------------------------------------------------

    def _encode(self, doc: Mapping[str, Any]) -> tuple[tuple[list[bytes], list[bytes]], Mapping[str, Any]]:
        """The document's JSON text split at its values (``columns.split``), secrets masked (a non-finite
        number is null, as in status --json), and the document that text is (``doc``, or its masked copy)."""
        line = orjson.dumps(doc)
        layout, values = columns.split(line)
        if layout == self._layout and self._layout_clean:
            # Every string is in the layout, unchanged since it was checked, and no value put where
            # this layout has them can make a secret (``_probe``): nothing to check. (The one list
            # object: the frame's run of it is then found by identity.)
            return (self._layout, values), doc
        # The rule is checked on the document's string values, one a line (no secret shape crosses a
        # line end; on the JSON text a URL's "://host:port" and the next engine's "name@" look like a
        # password in a URL), and only on values not seen clean before: a fleet's strings rarely change.
        # Keys too: some are the engine's words (a cache tier's label, an alert's value names).
        fresh = {v for v, _colon in _JSON_STRING.findall(line.decode())} - self._clean
        if fresh:
            strings = "\n".join(fresh)
            if self._scrub(strings) != strings:  # a secret: mask string by string, so the JSON stays whole
                masked = _masked(self._scrub, doc)
                self._layout = None
                return columns.split(orjson.dumps(masked)), masked
            if len(self._clean) > 20_000:
                self._clean.clear()
            self._clean |= fresh
        if layout != self._layout:
            self._layout, self._layout_clean = layout, self._probe(layout)
        return (layout, values), doc

    def _probe(self, layout: list[bytes]) -> bool:
        """Whether no values in this layout can form a secret with the text around them: each value
        is digits, a dot, e, a sign, true, false, null or a flat array of numbers, and a long run of
        digits in every place matches whatever pattern a shorter value would."""
        text = columns.join(layout, [b"1" * 40] * (len(layout) - 1)).decode("utf-8", "surrogateescape")
        return self._scrub(text) == text

    def _count(self, seg: SegmentWriter, kind: int, payload: bytes, t0: float, t1: float, n: int,
               *, use_dict: bool = False) -> None:
        before = seg.size
        try:
            seg.write(kind, payload, t_first=t0, t_last=t1, count=n, use_dict=use_dict)
        except OSError as exc:
            raise RecordingError(f"cannot write {seg.path}: {exc.strerror}") from None
        self.frames_written += 1
        self.bytes_written += seg.size - before

    def _segment_for(self, at: float) -> SegmentWriter:
        seg = self._seg
        too_big = (seg is not None and self.max_bytes is not None
                   and seg.size >= max(MIN_SEGMENT_BYTES, self.max_bytes // 8))
        if seg is not None and at < self._seg_end and not too_big:
            return seg
        if seg is not None:
            self.flush()
            seg.close()
        seg = self._seg = self._open_segment(at)
        self._seg_end = (math.floor(at / self.segment_s) + 1) * self.segment_s
        self._retain(at, force=True)
        return seg

    def _open_segment(self, at: float) -> SegmentWriter:
        base = segment_name(at)
        for n in range(1000):
            name = base if n == 0 else base.replace(DATA_SUFFIX, f"-{n}{DATA_SUFFIX}")
            try:
                seg = SegmentWriter(self.directory / name)
                break
            except FileExistsError:
                continue
            except PlantedLink as exc:
                raise RecordingError(f"refusing to record: {exc.strerror}") from None
            except OSError as exc:
                raise RecordingError(f"cannot create a segment in {self.directory}: {exc.strerror}") from None
        else:
            raise RecordingError(f"too many segments named {base} in {self.directory}")
        self._pending_dict = True
        return seg

    def _retain(self, now: float, *, force: bool = False) -> None:
        seg = self._seg
        if not force and now - self._retained_at < RETENTION_EVERY_S:
            return
        self._retained_at = now
        if self.retain_s is None and self.max_bytes is None:
            return
        current = seg.path if seg is not None else None
        old = [p for p in our_segments(self.directory) if p != current]
        if self.retain_s is not None:
            # A segment covers the time up to the next one's start: it goes once that is too old.
            starts = [segment_start(p) for p in old] + [now]
            for p, nxt in zip(old, starts[1:], strict=True):
                if nxt is not None and nxt <= now - self.retain_s:
                    _remove(p)
            old = [p for p in old if p.exists()]
        if self.max_bytes is not None:
            total = sum(_size(p) for p in old) + (seg.size if seg is not None else 0)
            for p in old:
                if total <= self.max_bytes:
                    break
                total -= _size(p)
                _remove(p)


def _masked(fn: Callable[[str], str], value: Any) -> Any:
    """A copy of JSON-like data with every string (keys too) passed through ``fn``."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, Mapping):
        return {(fn(k) if isinstance(k, str) else k): _masked(fn, v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(fn, v) for v in value]
    return value


def _size(p: Path) -> int:
    total = 0
    for f in (p, index_path(p)):
        with contextlib.suppress(OSError):
            total += f.stat().st_size
    return total


def _remove(p: Path) -> None:
    for f in (p, index_path(p)):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def _lock(directory: Path) -> int:
    """The folder's lock file, created or opened without following a link (a link planted at
    ``.lock`` in a shared folder would have its target truncated), holding our pid."""
    path = directory / LOCK_NAME
    try:
        try:
            fd = create_private(path, os.O_RDWR)
        except FileExistsError:
            fd = open_existing(path, os.O_RDWR)
    except PlantedLink as exc:
        raise RecordingError(f"refusing to record into {directory}: {exc.strerror}") from None
    except OSError as exc:
        raise RecordingError(f"cannot open {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip()
        os.close(fd)
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise RecordingError(f"{directory} is being recorded by another enginedeck{who}") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd
