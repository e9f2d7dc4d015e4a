"""``Recording``: a recording folder (or one cut file) read back by time.

Opening reads only the indexes (each entry checked against the frame header it points at; a scan
where they disagree or end), so a day of recording opens and seeks in milliseconds; frames are
decompressed when asked for, and the last few are kept decoded (stepping through a replay reads the
same frame ten times). A frame that is torn or corrupt is skipped and counted in ``skipped``, a
document in it that is no JSON object (or is recorded at no possible time) in ``bad_documents``;
the rest of the recording reads as usual. ``damage_notes`` names what was lost, and
``damaged_inside`` tells damage from a torn end (what a kill leaves, which is no fault). A document frame's rows frame
(the history rows of its documents, written right after it) is read by ``frame_rows``; a recording
without them (written before they existed, or a cut of document lines) reads the documents instead.
"""

from __future__ import annotations

import bisect
import math
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.recording import columns, frames
from console.recording.frames import FrameInfo
from console.recording.history_rows import RowsFrame
from console.recording.payloads import FrameDocs, PayloadError, good_time, read_doc_lines, read_raw
from console.recording.segments import DATA_SUFFIX, Segment
from console.recording.writer import RecordingError, segment_name

Docs = FrameDocs
_CACHE_FRAMES = 8
_NO_DOCS = FrameDocs([])


def _clock(t: float) -> str:
    if not good_time(t):  # a crafted header's time: shown as the number it is
        return f"{t:.6g}"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t * 10) % 10}"


def _regular(path: Path) -> bool:
    """Whether ``path`` is a regular file itself (a link, a FIFO or a device in a recording folder
    is not read: a FIFO would block the reader for good)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class FrameRef:
    segment: Segment
    info: FrameInfo
    rows: FrameInfo | None = None  # a document frame's rows frame, when it has one


class Recording:
    """Every document and raw payload of a recording, in time order."""

    def __init__(self, path: Path, segments: list[Segment]) -> None:
        self.path = path
        self.segments = segments
        docs: list[FrameRef] = []
        raw: list[FrameRef] = []
        for seg in segments:
            prev: FrameInfo | None = None
            for info in seg.frames:
                if info.kind == frames.KIND_DOCS:
                    docs.append(FrameRef(seg, info))
                elif info.kind == frames.KIND_RAW:
                    raw.append(FrameRef(seg, info))
                elif info.kind == frames.KIND_ROWS and prev is not None and prev.kind == frames.KIND_DOCS \
                        and (prev.t_first, prev.t_last, prev.count) == (info.t_first, info.t_last, info.count):
                    docs[-1] = FrameRef(seg, prev, info)  # the rows of the frame just before
                prev = info
        # Stable: frames of one time keep their file order.
        self.doc_frames = sorted(docs, key=lambda r: r.info.t_first)
        self.raw_frames = sorted(raw, key=lambda r: r.info.t_first)
        self._doc_starts = [r.info.t_first for r in self.doc_frames]
        self._raw_starts = [r.info.t_first for r in self.raw_frames]
        self._decoded: OrderedDict[int, Docs] = OrderedDict()
        self.skipped = 0  # frames that could not be read back
        self._bad_docs: dict[int, int] = {}  # document frame -> its documents left out (``FrameDocs.bad``)
        self.ignored: list[str] = []  # files of the folder that are not read (links, FIFOs)

    @property
    def bad_documents(self) -> int:
        """Documents left out of the frames read so far: not JSON objects, or at no possible time."""
        return sum(self._bad_docs.values())

    @classmethod
    def open(cls, path: Path) -> Recording:
        """A recording folder (every segment in it) or a single ``.edrec`` file (a cut)."""
        path = Path(path)
        ignored: list[str] = []
        if path.is_dir():
            found = sorted(path.glob("*" + DATA_SUFFIX))
            files = [f for f in found if _regular(f)]
            ignored = [f"{f.name}: not a regular file (a link, a FIFO or a device); not read"
                       for f in found if f not in files]  # fmt: skip
            if not files:
                raise RecordingError(f"{path}: no recording here (no *{DATA_SUFFIX} files)")
        elif path.is_file():
            files = [path]
        else:
            raise RecordingError(f"{path}: no such file or folder")
        segments = []
        for f in files:
            try:
                segments.append(Segment.load(f))
            except OSError as exc:
                raise RecordingError(f"{f}: cannot read: {exc.strerror}") from None
        rec = cls(path, segments)
        rec.ignored = ignored
        if path.is_file() and not rec.doc_frames and not rec.raw_frames:
            with path.open("rb") as fh:
                if fh.read(len(frames.MAGIC)) != frames.MAGIC:
                    raise RecordingError(f"{path}: not an enginedeck recording")
        return rec

    def damage_notes(self) -> list[str]:
        """One line per segment that lost data (cut short, or damaged inside): how much, which
        times, and that it was skipped; and per segment whose dictionary frame is damaged. Empty
        when every frame the files ever held reads back."""
        notes: list[str] = []
        for seg in self.segments:
            parts: list[str] = []
            lost = [i for i in seg.lost if i.kind != frames.KIND_DICT]
            if lost:
                t0 = min(i.t_first for i in lost)
                t1 = max(i.t_last for i in lost)
                docs = sum(i.count for i in lost if i.kind == frames.KIND_DOCS)
                raws = sum(i.count for i in lost if i.kind == frames.KIND_RAW)
                what = ", ".join(x for x in (f"{docs} documents" if docs else "",
                                             f"{raws} raw payloads" if raws else "") if x) or "no documents"
                how, word = ("last ", "torn") if seg.torn_end_only else ("", "damaged")
                parts.append(f"{how}{t1 - t0:.1f} s {word} ({_clock(t0)}-{_clock(t1)}: {len(lost)} frames, {what})")
            if seg.unreadable_bytes:
                parts.append(f"{seg.unreadable_bytes} bytes unreadable")
            if seg.damaged_dictionaries:
                cannot = seg.dictionary_damage()
                if cannot is None:
                    parts.append("its dictionary frame is damaged (its spare copy was read)")
                else:
                    parts.append(f"its dictionary frame is damaged and no copy reads back: {cannot[0]} document "
                                 f"frames ({cannot[1]} documents) are compressed against it and cannot be decoded")
            if parts:
                notes.append(f"segment {seg.path.name}: {'; '.join(parts)}; skipped")
        notes += [f"{self.path.name}/{line}" for line in self.ignored]
        if self.skipped:
            notes.append(f"{self.skipped} damaged frame(s) skipped")
        if self.bad_documents:
            notes.append(f"{self.bad_documents} recorded document(s) that are not status documents skipped")
        return notes

    @property
    def damaged_inside(self) -> bool:
        """Whether anything was lost other than a torn end (the last frames of a segment cut short, as
        a kill or a power cut leaves them): damage inside a segment, a damaged dictionary, a frame
        or a document that does not read back."""
        if self.skipped or self.bad_documents or self.ignored:
            return True
        return any(not seg.torn_end_only or seg.damaged_dictionaries for seg in self.segments)

    @property
    def span(self) -> tuple[float, float] | None:
        """The first and the last recorded time (documents and raw payloads), or None when empty."""
        refs = self.doc_frames + self.raw_frames
        if not refs:
            return None
        return min(r.info.t_first for r in refs), max(r.info.t_last for r in refs)

    @property
    def doc_span(self) -> tuple[float, float] | None:
        if not self.doc_frames:
            return None
        return self.doc_frames[0].info.t_first, max(r.info.t_last for r in self.doc_frames)

    # -- documents ---------------------------------------------------------------------------

    def frame_docs(self, i: int) -> Docs:
        """The documents of document frame ``i`` (empty when it cannot be read back)."""
        got = self._decoded.get(i)
        if got is not None:
            self._decoded.move_to_end(i)
            return got
        ref = self.doc_frames[i]
        payload = ref.segment.payload(ref.info)
        docs = _NO_DOCS
        if payload is not None:
            try:
                docs = FrameDocs(read_doc_lines(payload))
            except PayloadError:
                docs = _NO_DOCS
        if docs.bad:
            self._bad_docs[i] = docs.bad
        elif not docs:
            self.skipped += 1
        self._decoded[i] = docs
        if len(self._decoded) > _CACHE_FRAMES:
            self._decoded.popitem(last=False)
        return docs

    def frame_rows(self, i: int) -> RowsFrame | None:
        """The history rows of document frame ``i`` from its rows frame; None when it has none or it
        cannot be read back (then they are the documents' own, ``history_rows.doc_rows``)."""
        ref = self.doc_frames[i]
        if ref.rows is None:
            return None
        payload = ref.segment.payload(ref.rows)
        try:
            if payload is None:
                raise ValueError("unreadable")
            rows = RowsFrame.decode(payload)
        except ValueError:
            self.skipped += 1
            return None
        return rows if len(rows.times) == ref.info.count else None

    def frame_index(self, t: float) -> int:
        """The document frame holding time ``t`` (or the last one that starts before it); -1 before all."""
        return bisect.bisect_right(self._doc_starts, t) - 1

    def _first_frame(self, start: float | None, starts: list[float], refs: list[FrameRef]) -> int:
        if start is None:
            return 0
        i = max(0, bisect.bisect_right(starts, start) - 1)
        while i > 0 and refs[i - 1].info.t_last >= start:  # frames that overlap (a clock set back)
            i -= 1
        return i

    def _in_window(self, start: float | None, end: float | None, starts: list[float],
                   refs: list[FrameRef]) -> Iterator[int]:
        """The indexes of the frames of ``refs`` that may hold times in [start, end], oldest first."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        for i in range(self._first_frame(start, starts, refs), len(refs)):
            info = refs[i].info
            if info.t_first > hi:
                break
            if info.t_last >= lo:
                yield i

    def documents(self, start: float | None = None, end: float | None = None
                  ) -> Iterator[tuple[float, dict[str, Any]]]:
        """(time, status document) for every document recorded in [start, end], oldest first."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        for i in self._in_window(start, end, self._doc_starts, self.doc_frames):
            for t, doc in self.frame_docs(i):
                if lo <= t <= hi:
                    yield t, doc

    def document_lines(self, start: float | None = None, end: float | None = None
                       ) -> Iterator[list[tuple[float, bytes]]]:
        """The documents in [start, end] as recorded (JSON text, not parsed), one list a frame,
        oldest first: for copying a window (a bundle's cut) without parsing every document."""
        for frame in self.document_frames(start, end, whole=False):
            assert not isinstance(frame, columns.Payload)
            yield frame

    def document_frames(self, start: float | None = None, end: float | None = None, *, whole: bool = True
                        ) -> Iterator[list[tuple[float, bytes]] | columns.Payload]:
        """As ``document_lines``, but with ``whole`` a frame in column form that lies wholly in the
        window comes as it was recorded (``columns.Payload``, with its rows), not decoded."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        for i in self._in_window(start, end, self._doc_starts, self.doc_frames):
            ref = self.doc_frames[i]
            payload = ref.segment.payload(ref.info)
            if whole and payload is not None and payload[:1] == b"{" and lo <= ref.info.t_first \
                    and ref.info.t_last <= hi:
                try:
                    rows = ref.segment.payload(ref.rows) if ref.rows is not None else None
                    yield columns.Payload.of(payload, rows)
                    continue
                except columns.ColumnsError:
                    pass  # read as lines below, which counts it as skipped
            try:
                lines = read_doc_lines(payload) if payload is not None else []
            except PayloadError:
                lines = []
            if not lines:
                self.skipped += 1
            picked = [(t, line) for t, line in lines if lo <= t <= hi]
            if picked:
                yield picked

    def doc_at(self, t: float) -> tuple[int, int] | None:
        """Where the last document recorded at or before ``t`` is: (frame, position in the frame);
        the very first document when ``t`` is before the recording; None when there is none."""
        i = self.frame_index(t)
        if i < 0:
            return self.next_doc(-1, -1)
        while i >= 0:
            docs = self.frame_docs(i)
            best = None
            for k, at in enumerate(docs.times):
                if at <= t:
                    best = k
            if best is not None:
                return i, best
            i -= 1
        return self.next_doc(-1, -1)

    def next_doc(self, i: int, k: int) -> tuple[int, int] | None:
        """The document after (frame ``i``, position ``k``), or None at the end."""
        if i >= 0 and k + 1 < len(self.frame_docs(i)):
            return i, k + 1
        for j in range(i + 1, len(self.doc_frames)):
            if self.frame_docs(j):
                return j, 0
        return None

    def prev_doc(self, i: int, k: int) -> tuple[int, int] | None:
        """The document before (frame ``i``, position ``k``), or None at the start."""
        if k > 0:
            return i, k - 1
        for j in range(i - 1, -1, -1):
            docs = self.frame_docs(j)
            if docs:
                return j, len(docs) - 1
        return None

    def doc(self, pos: tuple[int, int]) -> tuple[float, dict[str, Any]]:
        return self.frame_docs(pos[0])[pos[1]]

    def doc_time(self, pos: tuple[int, int]) -> float:
        """When the document at ``pos`` was recorded (without parsing it)."""
        return self.frame_docs(pos[0]).times[pos[1]]

    # -- raw payloads ------------------------------------------------------------------------

    def raw_payloads(self, start: float | None = None, end: float | None = None
                     ) -> Iterator[tuple[float, str, bytes]]:
        """(time, engine, payload) for every raw payload recorded in [start, end], oldest first."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        for i in self._in_window(start, end, self._raw_starts, self.raw_frames):
            ref = self.raw_frames[i]
            payload = ref.segment.payload(ref.info)
            try:
                if payload is None:
                    raise PayloadError("unreadable")
                at, engine, body = read_raw(payload)
            except PayloadError:
                self.skipped += 1
                continue
            if lo <= at <= hi:
                yield at, engine, body

    # -- cutting -----------------------------------------------------------------------------

    def cut(self, start: float | None, end: float | None, dest: Path) -> Path:
        """[start, end] of this recording as one self-contained, replayable ``.edrec`` file at
        ``dest`` (or inside ``dest`` when it is a folder); returns its path."""
        from console.recording.cutfile import write_cut

        dest = Path(dest)
        if dest.is_dir():
            first = start if start is not None else (self.span or (0.0, 0.0))[0]
            dest = dest / ("recording-" + segment_name(first))
        return write_cut(self.documents(start, end), self.raw_payloads(start, end), dest)
