"""A cut: part of a recording written as one self-contained ``.edrec`` file (no index beside it).

It is written under a temporary name and renamed into place, so a reader never sees half a cut.
Documents are framed again (``FRAME_S`` each, against the cut's own dictionary), each frame with its
rows frame when the documents come as dicts (documents given as JSON text are not parsed for them: a
replay then reads the documents); a recorded frame in column form that lies wholly in the window is
copied as it is, with its rows frame (compressed again against the cut's dictionary: no document is
decoded). Raw payloads one a frame, so the cut replays and exports exactly like the folder it came from.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from console.recording import columns, frames
from console.recording.history_rows import Row, rows_of, rows_payload
from console.recording.payloads import docs_payload, raw_payload
from console.recording.segments import SegmentWriter
from console.recording.writer import FRAME_S, RecordingError


def write_cut(docs: Iterable[tuple[float, dict[str, Any] | bytes] | columns.Payload],
              raw: Iterable[tuple[float, str, bytes]], dest: Path) -> Path:
    """``docs``: (time, status document), the document as a dict or as its JSON text; or a recorded
    frame in column form (``Recording.document_frames``), written as it is, with its rows."""
    part = dest.with_name(dest.name + ".part")
    with contextlib.suppress(FileNotFoundError):
        part.unlink()
    try:
        seg = SegmentWriter(part, indexed=False, level=frames.CUT_ZLIB_LEVEL)
    except OSError as exc:
        raise RecordingError(f"cannot write {dest}: {exc.strerror}") from None
    written = 0
    try:
        times: list[float] = []
        lines: list[bytes] = []
        rows: list[list[Row] | None] = []

        def frame() -> None:
            if seg.zdict is None:
                seg.set_dict(lines[0], times[0])
            t0, t1, n = min(times), max(times), len(times)
            seg.write(frames.KIND_DOCS, docs_payload(times, lines), t_first=t0, t_last=t1, count=n, use_dict=True)
            if all(r is not None for r in rows):
                seg.write(frames.KIND_ROWS, rows_payload(times, [r or [] for r in rows]), t_first=t0, t_last=t1,
                          count=n, use_dict=True)
            times.clear()
            lines.clear()
            rows.clear()

        for item in docs:
            if isinstance(item, columns.Payload):
                if times:
                    frame()
                if seg.zdict is None:
                    seg.set_dict(item.firsts()[0], item.times[0])
                t0, t1, n = min(item.times), max(item.times), len(item.times)
                seg.write(frames.KIND_DOCS, item.data, t_first=t0, t_last=t1, count=n, use_dict=True)
                if item.rows is not None:
                    seg.write(frames.KIND_ROWS, item.rows, t_first=t0, t_last=t1, count=n, use_dict=True)
                written += n
                continue
            t, doc = item
            times.append(t)
            lines.append(doc if isinstance(doc, bytes) else orjson.dumps(doc))
            rows.append(None if isinstance(doc, bytes) else rows_of(doc))
            written += 1
            if t - times[0] >= FRAME_S:
                frame()
        if times:
            frame()
        for t, engine, body in raw:
            seg.write(frames.KIND_RAW, raw_payload(engine, body, t), t_first=t, t_last=t, count=1)
            written += 1
        seg.sync()
    except OSError as exc:
        seg.close()
        part.unlink(missing_ok=True)
        raise RecordingError(f"cannot write {dest}: {exc.strerror}") from None
    seg.close()
    if not written:
        part.unlink(missing_ok=True)
        raise RecordingError("nothing was recorded in that time")
    os.replace(part, dest)
    return dest
