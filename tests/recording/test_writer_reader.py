"""The recording package on its own: frames, segments, index, rotation, retention, torn writes, cuts."""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest

from console.recording import Recording, RecordingError, RecordingWriter
from console.recording.segments import index_path
from console.recording.writer import our_segments
from tests.recording.fleetdocs import T0, docs

Docs = list[tuple[float, dict[str, Any]]]


def _json(d: Docs) -> Docs:
    return [(t, orjson.loads(orjson.dumps(doc))) for t, doc in d]


def _write(directory: Path, items: Docs, **kw: Any) -> RecordingWriter:
    w = RecordingWriter(directory, **kw)
    for t, doc in items:
        w.add(doc, at=t)
    return w


def test_documents_and_raw_payloads_come_back_as_written(tmp_path: Path) -> None:
    items = docs(60)
    w = _write(tmp_path / "rec", items)
    raws = [(T0 + 5.5, "eng-0", b"# TYPE x gauge\nx 1\n"), (T0 + 35.5, "eng-1", b"\xff\x00binary")]
    for at, eng, body in raws:
        w.add_raw(eng, body, at=at)
    w.close()
    rec = Recording.open(tmp_path / "rec")
    assert list(rec.documents()) == _json(items)
    assert list(rec.raw_payloads()) == raws
    assert rec.span == (T0, T0 + 59)
    assert [t for t, _ in rec.documents(T0 + 10, T0 + 20)] == [T0 + k for k in range(10, 21)]
    assert list(rec.raw_payloads(T0 + 30)) == raws[1:]
    assert rec.skipped == 0


def test_frames_hold_under_ten_seconds_and_decode_on_their_own(tmp_path: Path) -> None:
    _write(tmp_path, docs(100)).close()
    rec = Recording.open(tmp_path)
    spans = [r.info.t_last - r.info.t_first for r in rec.doc_frames]
    assert len(spans) >= 10 and max(spans) < 10
    # Any frame alone, in any order, decodes (given its segment's dictionary).
    rec2 = Recording.open(tmp_path)
    order = list(range(len(rec2.doc_frames)))
    random.Random(1).shuffle(order)
    got = {i: rec2.frame_docs(i) for i in order}
    assert [d for i in sorted(got) for d in got[i]] == _json(docs(100))


def test_files_are_private(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    _write(d, docs(20)).close()
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    for f in d.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_a_torn_last_frame_costs_only_that_frame(tmp_path: Path) -> None:
    items = docs(50)
    w = _write(tmp_path, items)
    w.flush()
    seg = w.segment
    assert seg is not None
    w.close()
    full = seg.read_bytes()
    rec = Recording.open(tmp_path)
    last = rec.doc_frames[-1].info
    before_last = [d for d in _json(items) if d[0] < last.t_first]
    rng = random.Random(7)
    for cut in sorted(rng.sample(range(last.offset + 1, last.offset + last.length), 12)):
        seg.write_bytes(full[:cut])
        got = list(Recording.open(tmp_path).documents())
        assert got == before_last, cut
    # Without its index the file still reads.
    index_path(seg).unlink()
    assert list(Recording.open(tmp_path).documents()) == before_last


def test_a_corrupt_frame_in_the_middle_is_skipped_and_the_rest_reads(tmp_path: Path) -> None:
    items = docs(60)
    w = _write(tmp_path, items)
    seg = w.segment
    w.close()
    assert seg is not None
    rec = Recording.open(tmp_path)
    bad = rec.doc_frames[3].info
    data = bytearray(seg.read_bytes())
    data[bad.offset + bad.length // 2] ^= 0xFF
    seg.write_bytes(bytes(data))
    expect = [d for d in _json(items) if not bad.t_first <= d[0] <= bad.t_last]
    for with_index in (True, False):
        if not with_index:
            index_path(seg).unlink()
        rec = Recording.open(tmp_path)
        assert list(rec.documents()) == expect
        assert rec.skipped == (1 if with_index else 0)  # without the index the scan never lists it


def test_garbage_between_frames_is_stepped_over(tmp_path: Path) -> None:
    items = docs(30)
    w = _write(tmp_path, items)
    seg = w.segment
    w.close()
    assert seg is not None
    index_path(seg).unlink()
    rec = Recording.open(tmp_path)
    cut = rec.doc_frames[1].info.offset
    data = seg.read_bytes()
    seg.write_bytes(data[:cut] + b"EDR1 not a frame" + os.urandom(300) + data[cut:])
    assert list(Recording.open(tmp_path).documents()) == _json(items)


def test_documents_not_yet_in_a_frame_are_what_a_kill_loses(tmp_path: Path) -> None:
    items = docs(47)
    w = _write(tmp_path, items)  # never closed: as after kill -9
    got = list(Recording.open(tmp_path).documents())
    assert got == _json(items)[: len(got)]
    assert items[-1][0] - got[-1][0] < 10
    w.close()


def test_segments_rotate_by_time_and_read_as_one(tmp_path: Path) -> None:
    items = docs(100)
    _write(tmp_path, items, segment_s=30).close()
    assert len(our_segments(tmp_path)) >= 3
    assert list(Recording.open(tmp_path).documents()) == _json(items)


def test_retention_by_age_removes_whole_old_segments(tmp_path: Path) -> None:
    items = docs(400)
    _write(tmp_path, items, segment_s=60, retain_s=120).close()
    got = list(Recording.open(tmp_path).documents())
    first = got[0][0]
    assert items[-1][0] - first <= 120 + 60 + 60  # at most a segment beyond the limit, and the current one
    assert items[-1][0] - first >= 120  # what is within the limit is kept
    assert got == _json(items)[-len(got):]


def test_retention_by_size_keeps_the_folder_under_the_limit(tmp_path: Path) -> None:
    items = docs(600)
    _write(tmp_path, items, segment_s=30, max_bytes=40_000).close()
    total = sum(f.stat().st_size for f in tmp_path.iterdir() if f.name != ".lock")
    assert total <= 40_000 + 30 * 1500  # the limit, plus at most the segment being written
    got = list(Recording.open(tmp_path).documents())
    assert got and got[-1][0] == items[-1][0] and got[0][0] > items[0][0]


def test_one_writer_per_folder(tmp_path: Path) -> None:
    w = RecordingWriter(tmp_path)
    with pytest.raises(RecordingError, match="being recorded by another enginedeck"):
        RecordingWriter(tmp_path)
    assert (tmp_path / ".lock").read_text() == str(os.getpid())
    w.close()
    assert (tmp_path / ".lock").read_text() == ""  # a finished writer's pid is not left to mislead
    RecordingWriter(tmp_path).close()  # released on close


def test_bad_arguments_and_paths_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="positive"):
        RecordingWriter(tmp_path, retain_s=0)
    with pytest.raises(RecordingError, match="no such file"):
        Recording.open(tmp_path / "nope")
    with pytest.raises(RecordingError, match="no recording here"):
        Recording.open(tmp_path)
    (tmp_path / "x.edrec").write_bytes(b"hello, not a recording")
    with pytest.raises(RecordingError, match="not an enginedeck recording"):
        Recording.open(tmp_path / "x.edrec")


def test_secrets_never_reach_the_disk(tmp_path: Path) -> None:
    token = "hf_" + "a1B2c3D4" * 5
    key = "sk-" + "Zy9" * 8
    (t, doc), *_ = docs(1)
    doc["engines"][0]["detail"] = f"auth failed with {token}"
    doc["engines"][0]["url"] = "http://admin:hunter2pass@127.0.0.1:8000"
    w = RecordingWriter(tmp_path)
    w.add(doc, at=t)
    w.add_raw("eng-0", f'x{{key="{key}"}} 1\nAuthorization: Bearer abcdefghijkl1234\n'.encode(), at=t)
    w.close()
    blob = b""
    rec = Recording.open(tmp_path)
    for ref in rec.doc_frames + rec.raw_frames:
        blob += ref.segment.payload(ref.info) or b""
    blob += b"".join(ref.segment.zdict or b"" for ref in rec.doc_frames)
    for f in tmp_path.iterdir():
        blob += f.read_bytes()
    for secret in (token, key, "hunter2pass", "abcdefghijkl1234"):
        assert secret.encode() not in blob
    (_, back), = rec.documents()
    assert back["engines"][0]["detail"] == "auth failed with ****"


def test_seek_and_step(tmp_path: Path) -> None:
    items = docs(95)
    _write(tmp_path, items).close()
    rec = Recording.open(tmp_path)
    pos = rec.doc_at(T0 + 41.5)
    assert pos is not None and rec.doc(pos)[0] == T0 + 41
    nxt = rec.next_doc(*pos)
    assert nxt is not None and rec.doc(nxt)[0] == T0 + 42
    prev = rec.prev_doc(*pos)
    assert prev is not None and rec.doc(prev)[0] == T0 + 40
    first = rec.doc_at(T0 - 100)
    assert first is not None and rec.doc(first)[0] == T0 and rec.prev_doc(*first) is None
    last = rec.doc_at(T0 + 1e6)
    assert last is not None and rec.doc(last)[0] == T0 + 94 and rec.next_doc(*last) is None
    # Stepping through every document visits each once, in order.
    seen: list[float] = []
    p: tuple[int, int] | None = first
    while p is not None:
        seen.append(rec.doc(p)[0])
        p = rec.next_doc(*p)
    assert seen == [t for t, _ in items]


def test_a_cut_is_one_self_contained_replayable_file(tmp_path: Path) -> None:
    items = docs(200)
    w = _write(tmp_path / "rec", items, segment_s=50)
    for k in range(0, 200, 30):
        w.add_raw("eng-0", f"x {k}\n".encode(), at=T0 + k)
    w.close()
    rec = Recording.open(tmp_path / "rec")
    out = rec.cut(T0 + 40, T0 + 130, tmp_path / "cut.edrec")
    assert out == tmp_path / "cut.edrec" and not index_path(out).exists()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    cut = Recording.open(out)
    assert list(cut.documents()) == [d for d in _json(items) if T0 + 40 <= d[0] <= T0 + 130]
    assert [r[0] for r in cut.raw_payloads()] == [T0 + k for k in (60, 90, 120)]
    assert cut.span == (T0 + 40, T0 + 130)
    # Into a folder: a name of its own; an empty window is an error, not an empty file.
    named = rec.cut(None, T0 + 5, tmp_path)
    assert named.parent == tmp_path and named.suffix == ".edrec"
    with pytest.raises(RecordingError, match="nothing was recorded"):
        rec.cut(T0 + 1e5, T0 + 2e5, tmp_path / "empty.edrec")
    assert not (tmp_path / "empty.edrec").exists()


def test_the_index_lets_a_reader_skip_the_scan(tmp_path: Path) -> None:
    _write(tmp_path, docs(40)).close()
    seg = our_segments(tmp_path)[0]
    entries = index_path(seg).read_bytes()
    assert entries and len(entries) % 40 == 0
    # A frame the index does not list yet (written after it) is found by the scan.
    rec = Recording.open(tmp_path)
    n = len(rec.doc_frames)
    index_path(seg).write_bytes(entries[:-40])
    assert len(Recording.open(tmp_path).doc_frames) == n
    # A torn index entry: trusted up to there.
    index_path(seg).write_bytes(entries[:-20])
    assert len(Recording.open(tmp_path).doc_frames) == n


def test_history_rows_of_a_document_are_what_the_hub_records_for_its_snapshot() -> None:
    from console.recording.history_rows import doc_rows
    from console.status_doc import status_doc
    from console.status_parse import snapshot_from_doc
    from console.telemetry.hub import record
    from console.telemetry.metrics.history import History
    from tests.recording.fleetdocs import snapshot

    # Engine 1 is unreachable for i in 20..24 of every 40: gaps, not values.
    for i in (3, 21):
        doc = orjson.loads(orjson.dumps(status_doc(snapshot(T0 + i, i, engines=4, gpus=8))))
        via_snapshot, via_rows = History(), History()
        record(via_snapshot, snapshot_from_doc(doc))
        for key, t, v in doc_rows(doc):
            via_rows.append(key, t, v)
        keys = via_snapshot.keys()
        assert sorted(map(str, keys)) == sorted(map(str, via_rows.keys()))
        for series in keys:
            assert str(via_snapshot.points(series)) == str(via_rows.points(series)), series
