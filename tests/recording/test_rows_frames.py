"""Rows frames: the history rows of each document frame, written beside it, are what a seek reads;
a recording without them (or with a bad one) replays the same history from the documents."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from console.recording import Recording, RecordingWriter, frames
from console.recording.history_rows import Row, RowsFrame, doc_rows, rows_payload
from console.recording.replay import ReplaySource
from console.recording.writer import our_segments
from console.telemetry.metrics.history import History
from tests.recording.fleetdocs import T0, docs

Docs = list[tuple[float, dict[str, Any]]]


def _items(n: int = 120) -> Docs:
    items = docs(n, engines=3, gpus=4)  # engine 1 is unreachable for 20..24 of every 40
    _t, odd = items[7]
    odd["engines"][0]["summary"]["kv_usage"] = math.nan  # non-finite: null on disk, a gap in the charts
    odd["engines"][2]["summary"]["waiting"] = math.inf
    odd["gpus"]["devices"][1]["power_w"] = -0.0
    _t, odd = items[30]
    odd["host"] = None
    items.insert(50, (items[49][0] + 0.5, {"schema": "not ours"}))  # no rows from it
    items[60][1]["engines"].pop()  # an engine gone for one document: fewer series in its frame
    return items


def _write(directory: Path, items: Docs, *, rows: bool = True) -> None:
    w = RecordingWriter(directory)
    if not rows:  # as written before rows frames existed
        count = w._count

        def docs_only(seg: Any, kind: int, *args: Any, **kw: Any) -> None:
            if kind != frames.KIND_ROWS:
                count(seg, kind, *args, **kw)

        w._count = docs_only  # type: ignore[method-assign]
    for t, doc in items:
        w.add(doc, at=t)
    w.close()


def _history(h: History) -> dict[str, str]:
    keys = h.keys()
    return {str(k): str(h.points(k)) for k in keys}


def _histories(rec: Recording, times: list[float]) -> list[dict[str, str]]:
    return [_history(ReplaySource(rec, start=t, playing=False, history_points=60).history) for t in times]


SEEKS = [T0 - 5, T0 + 3.5, T0 + 26, T0 + 49.2, T0 + 50.2, T0 + 61, T0 + 95, T0 + 500]


def test_rows_frames_are_written_and_read_back_as_the_rows_of_the_documents(tmp_path: Path) -> None:
    items = _items()
    _write(tmp_path, items)
    rec = Recording.open(tmp_path)
    assert rec.doc_frames and all(r.rows is not None for r in rec.doc_frames)
    n = 0
    for i in range(len(rec.doc_frames)):
        rf = rec.frame_rows(i)
        assert rf is not None
        got = rec.frame_docs(i)
        assert rf.times == [t for t, _ in got]
        for k, (_t, doc) in enumerate(got):
            want = doc_rows(doc) if "engines" in doc else []
            assert str(rf.doc(k)) == str(want)  # str: NaN is no NaN's equal
            n += 1
    assert n == len(items) and rec.skipped == 0
    # A cut of the documents as dicts carries them too; one of document lines does not, and replays.
    cut = Recording.open(rec.cut(T0 + 10, T0 + 80, tmp_path / "cut.edrec"))
    assert all(r.rows is not None for r in cut.doc_frames)
    from console.recording.cutfile import write_cut

    lines = [d for frame in rec.document_lines(T0 + 10, T0 + 80) for d in frame]
    bare = Recording.open(write_cut(lines, [], tmp_path / "lines.edrec"))
    assert all(r.rows is None for r in bare.doc_frames)
    assert _histories(bare, [T0 + 70]) == _histories(cut, [T0 + 70])


def test_a_rows_payload_round_trips_exactly() -> None:
    rows: list[list[Row]] = [[(("e", "a"), 5.0, 0.1), (("e", "b"), 5.0, None), (("gpu:0", "mem"), 5.0, 8.0e10)],
            [(("e", "a"), 6.0, 1 / 3), (("gpu:0", "mem"), 6.0, -0.0)],
            [],
            [(("e", "a"), 7.5, 1e300), (("e", "b"), 7.5, 2.5), (("gpu:0", "mem"), 7.5, 0.0)]]
    rf = RowsFrame.decode(rows_payload([5.0, 6.0, 6.5, 7.0], rows))
    assert rf.times == [5.0, 6.0, 6.5, 7.0]
    assert [str(rf.doc(k)) for k in range(4)] == [str(r) for r in rows]
    with pytest.raises(ValueError):
        RowsFrame.decode(b"[1,2]\nnull\n[]\n")


def test_a_recording_without_rows_frames_seeks_to_the_same_history(tmp_path: Path) -> None:
    items = _items()
    _write(tmp_path / "new", items)
    _write(tmp_path / "old", items, rows=False)
    old = Recording.open(tmp_path / "old")
    assert all(r.rows is None for r in old.doc_frames)
    assert not any(f.kind == frames.KIND_ROWS for s in old.segments for f in s.frames)
    want = _histories(old, SEEKS)
    assert _histories(Recording.open(tmp_path / "new"), SEEKS) == want
    assert any(len(h) > 10 for h in want) and old.skipped == 0


def test_a_corrupt_rows_frame_falls_back_to_the_documents(tmp_path: Path) -> None:
    items = _items()
    _write(tmp_path / "ok", items)
    want = _histories(Recording.open(tmp_path / "ok"), SEEKS)
    # A byte flipped in a rows frame: its CRC fails.
    _write(tmp_path / "crc", items)
    seg = our_segments(tmp_path / "crc")[0]
    rows = [r.rows for r in Recording.open(tmp_path / "crc").doc_frames]
    data = bytearray(seg.read_bytes())
    for info in rows[2:5]:
        assert info is not None
        data[info.offset + info.length - 3] ^= 0xFF
    seg.write_bytes(bytes(data))
    rec = Recording.open(tmp_path / "crc")
    assert _histories(rec, SEEKS) == want
    assert rec.skipped > 0
    # A rows frame that passes its CRC but is no rows payload.
    import console.recording.writer as writer

    real = rows_payload
    calls = iter(range(1000))

    def some_bad(times: Any, rows: Any) -> bytes:
        return b"not rows\n" if next(calls) % 3 == 1 else real(times, rows)

    mp = pytest.MonkeyPatch()
    mp.setattr(writer, "rows_payload", some_bad)
    try:
        _write(tmp_path / "junk", items)
    finally:
        mp.undo()
    rec = Recording.open(tmp_path / "junk")
    assert _histories(rec, SEEKS) == want
    assert rec.skipped > 0 and orjson.dumps(list(rec.documents())) == orjson.dumps(
        list(Recording.open(tmp_path / "ok").documents()))
