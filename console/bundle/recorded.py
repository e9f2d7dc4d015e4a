"""The window's recording inside the bundle: one self-contained, replayable ``recording/window.edrec``
(``Recording.open`` reads it, ``enginedeck replay`` opens it), every document and raw payload in it
scrubbed by the one secret rule on the way, with a count of what was masked.

A recorder (the console's, or a headless ``enginedeck record``) writes into the recording folder;
the documents and raw payloads inside the window are read from there. When no recording covers the
window, the snapshots the caller has (the console's latest, the headless command's fresh one) are
written instead, so the bundle still replays, and the manifest says that no recording covered it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from console.bundle.window import Window
from console.model import FleetSnapshot
from console.recording import Recording, RecordingError, columns, default_recording_dir
from console.recording.cutfile import write_cut
from console.secrets import Scrubber
from console.status_doc import status_doc

NO_RECORDING = "no recording covers the window"
FILE = "recording/window.edrec"


@dataclass(slots=True)
class RecordingPart:
    data: bytes | None = None  # the cut file's bytes
    covers: bool = False
    note: str = NO_RECORDING
    documents: int = 0
    raw_payloads: int = 0
    span: tuple[float, float] | None = None
    source: str | None = None
    masked: dict[str, int] = field(default_factory=dict)  # kind -> count, masked on the way in

    def doc(self) -> dict[str, Any]:
        return {
            "path": FILE if self.data is not None else None,
            "format": "enginedeck recording cut (.edrec): console.recording.Recording.open(path)",
            "covers_window": self.covers,
            "note": self.note,
            "documents": self.documents,
            "raw_payloads": self.raw_payloads,
            "span": list(self.span) if self.span else None,
            "source": self.source,
        }


class _Counting:
    """The bundle's scrubber, counting what it masks into ``counts``."""

    def __init__(self, scrubber: Scrubber, counts: dict[str, int]) -> None:
        self.scrubber = scrubber
        self.counts = counts
        # A known secret with a character JSON escapes would not be found in a document's text.
        self.json_plain = all(json.dumps(s, ensure_ascii=False)[1:-1] == s for s in scrubber.known)

    def text(self, value: str) -> str:
        clean, counts = self.scrubber.counted(value)
        for kind, n in counts.items():
            self.counts[kind] = self.counts.get(kind, 0) + n
        return clean

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(self.text(k) if isinstance(k, str) else k): self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def payload(self, frame: list[tuple[float, bytes]] | columns.Payload
                ) -> list[tuple[float, bytes]] | list[columns.Payload]:
        """A recorded frame, checked: a frame in column form whose strings hold nothing to mask is
        kept as it is (its strings are all in its runs' first documents; its other values are
        numbers, which are never masked); else its documents as JSON text, through ``frame``."""
        if not isinstance(frame, columns.Payload):
            return self.frame(frame)
        text = b"\n".join(frame.firsts()).decode("utf-8", "surrogateescape")
        if self.json_plain and self.scrubber(text) == text:
            return [frame]
        return self.frame(frame.lines())

    def frame(self, lines: list[tuple[float, bytes]]) -> list[tuple[float, bytes]]:
        """A recorded frame's documents as JSON text, checked in one pass over the frame's text;
        only a frame where something is masked is parsed and walked, document by document."""
        text = b"\n".join(line for _, line in lines).decode("utf-8", "surrogateescape")
        if self.json_plain and self.scrubber(text) == text:
            return lines
        return [(t, orjson.dumps(self.data(orjson.loads(line)))) for t, line in lines]

    def doc(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Most documents hold nothing to mask: one pass over their JSON text says so; only then is
        the document walked string by string."""
        text = orjson.dumps(doc).decode()
        if self.json_plain and self.scrubber(text) == text:
            return doc
        out: dict[str, Any] = self.data(doc)
        return out


def window_recording(folder: Path | None, window: Window, scrubber: Scrubber,
                     fallback: Callable[[], Sequence[FleetSnapshot]] = tuple) -> RecordingPart:
    """The window's cut, scrubbed; blocking (reads, decompresses, compresses). ``fallback``: the
    snapshots to write when no recording covers the window."""
    folder = folder if folder is not None else default_recording_dir()
    part = RecordingPart()
    counting = _Counting(scrubber, part.masked)
    rec: Recording | None = None
    if folder.exists():
        try:
            rec = Recording.open(folder)
        except RecordingError as exc:  # an unreadable recording folder is a note, not a failed bundle
            part.note = f"{NO_RECORDING} ({exc})"
    docs: list[tuple[float, dict[str, Any] | bytes] | columns.Payload] = []
    if rec is not None:
        # As recorded: a window of 900 documents is copied (whole frames as they are), not decoded
        # and encoded again.
        docs = [d for frame in rec.document_frames(window.start, window.end) for d in counting.payload(frame)]
    if docs:
        part.covers, part.source = True, str(folder)
        part.note = f"recorded: {_count(docs)} snapshots in the window"
        raws = rec.raw_payloads(window.start, window.end) if rec is not None else iter(())
        # A recorder keeps its last few seconds in memory until it writes the frame: the caller's
        # snapshots newer than the recording's last one close that gap.
        last = _last_time(docs)
        newer = [(s.taken_at, counting.doc(status_doc(s))) for s in fallback()
                 if last < s.taken_at <= window.end]  # fmt: skip
        if newer:
            docs += newer
            part.note += f", and {len(newer)} newer one(s) enginedeck had"
    else:
        docs = [(s.taken_at, counting.doc(status_doc(s))) for s in fallback()]
        raws = iter(())
        if docs:
            part.note += f"; the bundle holds the {len(docs)} snapshot(s) enginedeck had instead"
    if not docs:
        return part
    seen = [0]

    def clean_raws() -> Iterator[tuple[float, str, bytes]]:
        for t, engine, body in raws:
            seen[0] += 1
            text = body.decode("utf-8", "surrogateescape")
            clean = counting.text(text)
            yield t, counting.text(engine), (body if clean == text else clean.encode("utf-8", "surrogateescape"))

    with tempfile.TemporaryDirectory(prefix="enginedeck-bundle-") as tmp:
        path = write_cut(docs, clean_raws(), Path(tmp) / "window.edrec")
        part.data = path.read_bytes()
    part.documents, part.raw_payloads = _count(docs), seen[0]
    part.span = (_first_time(docs), _last_time(docs))
    return part


_Docs = Sequence[tuple[float, dict[str, Any] | bytes] | columns.Payload]


def _count(docs: _Docs) -> int:
    return sum(len(d.times) if isinstance(d, columns.Payload) else 1 for d in docs)


def _first_time(docs: _Docs) -> float:
    d = docs[0]
    return min(d.times) if isinstance(d, columns.Payload) else d[0]


def _last_time(docs: _Docs) -> float:
    d = docs[-1]
    return max(d.times) if isinstance(d, columns.Payload) else d[0]
