"""The window's recording inside the bundle, scrubbed, in the form ``Recording.open`` replays.

A recorder (the console's, or a headless ``enginedeck record``) writes status documents and raw
payloads into the recording folder; the ones inside the window are read back, each scrubbed by the
one secret rule, and written anew into the bundle's ``recording/`` folder with ``RecordingWriter``.
When no recording covers the window, the snapshots the caller has (the console's latest, the
headless command's fresh one) are written the same way, so the bundle still replays, and the
manifest says that no recording covered the window.
"""

from __future__ import annotations

import importlib
import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.bundle.window import Window
from console.model import FleetSnapshot
from console.secrets import Scrubber
from console.status_doc import status_doc

NO_RECORDING = "no recording covers the window"
FOLDER = "recording"


@dataclass(frozen=True, slots=True)
class RecordingPart:
    files: dict[str, bytes] = field(default_factory=dict)  # path under recording/ -> bytes
    covers: bool = False
    note: str = NO_RECORDING
    documents: int = 0
    raw_payloads: int = 0
    span: tuple[float, float] | None = None
    source: str | None = None

    def doc(self) -> dict[str, Any]:
        return {
            "path": f"{FOLDER}/" if self.files else None,
            "open_with": "Recording.open(<extracted bundle>/recording) or `enginedeck replay BUNDLE`",
            "covers_window": self.covers,
            "note": self.note,
            "documents": self.documents,
            "raw_payloads": self.raw_payloads,
            "span": list(self.span) if self.span else None,
            "source": self.source,
        }


def scrub_doc(doc: Any, scrubber: Scrubber) -> Any:
    """A status document with every string scrubbed. Most documents hold nothing to mask: one pass
    over their JSON text says so (fast); only then is the document walked string by string."""
    text = json.dumps(doc, ensure_ascii=False)
    if _json_plain(scrubber) and scrubber(text) == text:
        return doc
    return scrubber.data(doc)


def _json_plain(scrubber: Scrubber) -> bool:
    """Whether every known secret reads the same inside JSON text (no quote, backslash or control
    character that JSON escapes), so that the text pass would find it."""
    return all(json.dumps(s, ensure_ascii=False)[1:-1] == s for s in scrubber.known)


def _recording_api() -> Any:
    return importlib.import_module("console.recording")


def window_recording(folder: Path | None, window: Window, scrubber: Scrubber,
                     fallback: Callable[[], Sequence[FleetSnapshot]] = tuple) -> RecordingPart:
    """The recording files for ``recording/``; blocking (reads and compresses). ``fallback``: the
    snapshots to write when no recording covers the window."""
    try:
        api = _recording_api()
    except ImportError:
        fallback()  # let the caller's snapshot finish as it would
        return RecordingPart(note=f"{NO_RECORDING} (this enginedeck has no recorder)")
    folder = folder if folder is not None else api.default_recording_dir()
    with tempfile.TemporaryDirectory(prefix="enginedeck-bundle-") as tmp:
        out = Path(tmp) / FOLDER
        writer = api.RecordingWriter(out)
        docs = raws = 0
        first = last = None
        source = None
        try:
            rec = api.Recording.open(folder) if folder.exists() else None
        except Exception as exc:  # an unreadable recording folder is a note, not a failed bundle
            rec, note = None, f"{NO_RECORDING} (the recording in {folder.name} cannot be read: {exc})"
        else:
            note = NO_RECORDING
        if rec is not None and rec.span is not None:
            source = str(folder)
            for t, doc in rec.documents(window.start, window.end):
                writer.add(scrub_doc(doc, scrubber), at=t)
                docs += 1
                first = t if first is None else first
                last = t
            for t, engine, payload in rec.raw_payloads(window.start, window.end):
                clean = scrubber(payload.decode("utf-8", "replace")).encode("utf-8")
                writer.add_raw(scrubber(engine), clean, at=t)
                raws += 1
        covers = docs > 0
        if covers:
            note = f"recorded: {docs} snapshots in the window"
        else:
            for snap in fallback():
                writer.add(scrub_doc(status_doc(snap), scrubber), at=snap.taken_at)
                docs += 1
                first = snap.taken_at if first is None else first
                last = snap.taken_at
            if docs:
                note += f"; the bundle holds the {docs} snapshot(s) it was given instead"
        writer.close()
        files = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    span = (first, last) if first is not None and last is not None else None
    return RecordingPart(files, covers, note, docs, raws, span, source)
