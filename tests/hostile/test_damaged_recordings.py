"""Group 6: a damaged or crafted recording loses only what is damaged, says so, and never ends a
command with a traceback; a bundle cannot unpack more than its budget; temporary folders go with
the process on SIGTERM, SIGHUP and SIGINT.

Each damage case is checked against the intact recording: exactly the documents of the frame that
holds the damaged byte may go (a rows frame, a dictionary with its spare, a raw frame: none).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from console.recording import Recording, RecordingWriter, frames
from console.recording.frames import FrameInfo
from console.recording.opening import open_any
from console.recording.replay import ReplaySource
from console.recording.segments import ENTRY_SIZE, SegmentWriter, index_path
from console.recording.writer import RecordingError
from tests.hostile._rec_fakes import run_cli, start_cli, stop_group, tar_bomb, tar_of, wait_for, write_recording
from tests.recording.fleetdocs import T0, docs

N = 75


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes, list[FrameInfo], list[float]]:
    """The data file, index, frames and document times of one intact 75-document recording."""
    d = tmp_path_factory.mktemp("intact") / "rec"
    seg = write_recording(d, N)
    rec = Recording.open(d)
    times = [t for t, _doc in rec.documents()]
    assert len(times) == N
    return seg.read_bytes(), index_path(seg).read_bytes(), rec.segments[0].frames, times


def _damaged(tmp_path: Path, intact: Any, data: bytes, index: bytes | None = None) -> Recording:
    d = tmp_path / "rec"
    d.mkdir()
    (d / "20261130-000000.edrec").write_bytes(data)
    (d / "20261130-000000.edidx").write_bytes(intact[1] if index is None else index)
    return Recording.open(d)


def _expected(intact: Any, offset: int) -> list[float]:
    """The documents left when the frame holding byte ``offset`` is lost (none for a frame that is
    not a document frame: its rows are read from the documents, the dictionary from its spare)."""
    _data, _index, infos, times = intact
    times = list(times)
    hit = next(i for i in infos if i.offset <= offset < i.offset + i.length)
    if hit.kind != frames.KIND_DOCS:
        return times
    return [t for t in times if not hit.t_first <= t <= hit.t_last]


OFFSETS = [0.03, 0.11, 0.2, 0.3, 0.41, 0.5, 0.62, 0.75, 0.9]


@pytest.mark.parametrize("where", OFFSETS)
def test_a_deleted_byte_loses_only_its_frame(tmp_path: Path, intact: Any, where: float) -> None:
    data = intact[0]
    at = int(len(data) * where)
    rec = _damaged(tmp_path, intact, data[:at] + data[at + 1:])
    got = [t for t, _doc in rec.documents()]
    assert got == _expected(intact, at), (len(got), len(_expected(intact, at)))
    assert rec.damage_notes() and rec.damaged_inside


@pytest.mark.parametrize("where", [0.07, 0.25, 0.44, 0.58, 0.71, 0.95])
def test_an_inserted_byte_loses_only_its_frame(tmp_path: Path, intact: Any, where: float) -> None:
    data = intact[0]
    at = int(len(data) * where)
    rec = _damaged(tmp_path, intact, data[:at] + b"\x00" + data[at:])
    got = [t for t, _doc in rec.documents()]
    assert got == _expected(intact, at), (len(got), len(_expected(intact, at)))
    assert rec.damaged_inside


@pytest.mark.parametrize("where", [0.02, 0.16, 0.33, 0.52, 0.68, 0.87])
def test_a_flipped_byte_loses_only_its_frame(tmp_path: Path, intact: Any, where: float) -> None:
    data = bytearray(intact[0])
    at = int(len(data) * where)
    data[at] ^= 0x5A
    rec = _damaged(tmp_path, intact, bytes(data))
    got = [t for t, _doc in rec.documents()]
    assert got == _expected(intact, at)
    # A flip moves nothing: the index stays right, and the frame fails its CRC when it is read.
    assert rec.damaged_inside or got == intact[3]


@pytest.mark.parametrize("keep", [0.3, 0.6, 0.97])
def test_a_truncated_segment_keeps_what_lies_before_the_cut_and_exits_0(tmp_path: Path, intact: Any,
                                                                        keep: float) -> None:
    data, _index, infos, times = intact
    cut = int(len(data) * keep)
    rec = _damaged(tmp_path, intact, data[:cut])
    whole = [i for i in infos if i.offset + i.length <= cut and i.kind == frames.KIND_DOCS]
    want = [t for t in times if any(i.t_first <= t <= i.t_last for i in whole)]
    assert [t for t, _doc in rec.documents()] == want
    assert not rec.damaged_inside  # a torn end is what a kill leaves
    r = run_cli(tmp_path, "export", str(tmp_path / "rec"), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 0 and " torn (" in r.stderr, r.stderr


def _shifted_index(index: bytes, by: int) -> bytes:
    """The same entries, each pointing ``by`` bytes further on: valid CRCs, wrong offsets."""
    out = bytearray()
    for pos in range(0, len(index) - ENTRY_SIZE + 1, ENTRY_SIZE):
        e = bytearray(index[pos:pos + ENTRY_SIZE - 4])
        struct.pack_into("<Q", e, 0, struct.unpack_from("<Q", e)[0] + by)
        out += e + struct.pack("<I", zlib.crc32(e))
    return bytes(out)


@pytest.mark.parametrize("damage", ["garbage", "shifted", "truncated", "another-segment's"])
def test_a_damaged_index_costs_a_scan_not_data(tmp_path: Path, intact: Any, damage: str) -> None:
    data, index, _infos, times = intact
    if damage == "garbage":
        bad = random.Random(3).randbytes(len(index))
    elif damage == "shifted":
        bad = _shifted_index(index, 7)
    elif damage == "truncated":
        bad = index[: len(index) // 2 + 5]
    else:
        other = write_recording(tmp_path / "other", 40)
        bad = index_path(other).read_bytes()
    rec = _damaged(tmp_path, intact, data, bad)
    assert [t for t, _doc in rec.documents()] == times
    assert rec.damage_notes() == []


def _dict_frames(rec: Recording) -> list[FrameInfo]:
    return [i for i in rec.segments[0].frames if i.kind == frames.KIND_DICT]


def test_a_damaged_dictionary_frame_is_reported_and_its_spare_read(tmp_path: Path, intact: Any) -> None:
    data = bytearray(intact[0])
    first = next(i for i in intact[2] if i.kind == frames.KIND_DICT)
    data[first.offset + first.length - 5] ^= 0xFF
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "20261130-000000.edrec").write_bytes(bytes(data))
    r = run_cli(tmp_path, "export", str(tmp_path / "rec"), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 3, r.stderr
    assert "dictionary frame is damaged (its spare copy was read)" in r.stderr
    assert len(Recording.open(tmp_path / "rec").segments[0].frames) > 0
    assert len({row.split(",")[0] for row in (tmp_path / "o.csv").read_text().splitlines()[1:]}) == N


def test_a_dictionary_with_no_copy_left_is_named_and_the_rest_recovered(tmp_path: Path) -> None:
    # Two segments (40 s each) with raw payloads; both dictionary copies of the first are damaged.
    d = tmp_path / "rec"
    w = RecordingWriter(d, segment_s=40)
    for t, doc in docs(N):
        w.add(doc, at=t)
        if int(t) % 10 == 0:
            w.add_raw("eng-0", b"vllm:num_requests_running 1\n", at=t)
    w.close()
    first_seg = sorted(d.glob("*.edrec"))[0]
    rec = Recording.open(d)
    seg0 = rec.segments[0]
    copies = [i for i in seg0.frames if i.kind == frames.KIND_DICT]
    assert len(copies) == 2  # the dictionary and its spare
    data = bytearray(first_seg.read_bytes())
    for info in copies:
        data[info.offset + info.length - 3] ^= 0xFF
    first_seg.write_bytes(bytes(data))
    rec = Recording.open(d)
    # The format allows this much: raw frames are compressed on their own, and every other segment
    # has its own dictionary; document and rows frames of this one need the lost dictionary.
    raws = list(rec.raw_payloads())
    assert len(raws) == sum(1 for t, _ in docs(N) if int(t) % 10 == 0)
    second = [t for t, _ in docs(N) if t >= rec.segments[1].frames[0].t_first]
    got = [t for t, _doc in rec.documents()]
    assert got == second and second
    notes = " ".join(rec.damage_notes())
    assert "no copy reads back" in notes and "cannot be decoded" in notes
    r = run_cli(tmp_path, "export", str(d), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 3 and "cannot be decoded" in r.stderr, r.stderr


CRAFTED: dict[str, Any] = {
    "engines a string": {"engines": "x"},
    "engines a number": {"engines": 5},
    "engines an object": {"engines": {"a": 1}},
    "an engine a number": {"engines": [5]},
    "per_model a string": {"engines": [{"name": "e", "profile": "vllm", "per_model": "abc"}]},
    "a model a list": {"engines": [{"name": "e", "profile": "vllm", "per_model": [[1, 2]]}]},
    "gpus a string": {"gpus": "x"},
    "devices a string": {"gpus": {"devices": "xy"}},
    "host a list": {"host": [1, 2]},
    "load_avg a number": {"host": {"hostname": "h", "load_avg": 5}},
}


def _crafted_recording(directory: Path, bad: dict[str, Any]) -> tuple[int, int]:
    """30 documents, every third one with ``bad`` merged in; returns (good, bad) counts."""
    w = RecordingWriter(directory)
    n_bad = 0
    for k, (t, doc) in enumerate(docs(30)):
        if k % 3 == 1:
            doc = {**doc, **bad}
            n_bad += 1
        w.add(doc, at=t)
    w.close()
    return 30 - n_bad, n_bad


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_document_is_skipped_and_counted_never_an_internal_error(tmp_path: Path, case: str) -> None:
    good, bad = _crafted_recording(tmp_path / "rec", CRAFTED[case])
    r = run_cli(tmp_path, "export", str(tmp_path / "rec"), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 3, r.stderr
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr
    assert f"{bad} document(s) that are not status documents left out" in r.stderr, r.stderr
    rows = (tmp_path / "o.csv").read_text().splitlines()[1:]
    assert len({row.split(",")[0] for row in rows}) == good
    # The replay plays the good ones and counts the rest.
    src = ReplaySource(Recording.open(tmp_path / "rec"), playing=False)
    shown = [src.latest().taken_at]
    for _ in range(30):
        src._advance(1)
        shown.append(src.latest().taken_at)
    assert src.bad_documents >= bad - 1 and len(set(shown)) == good


def test_a_document_that_is_no_object_is_left_out_of_its_frame(tmp_path: Path) -> None:
    # A frame in the plain form whose second line is a JSON array, third a string, fourth not JSON.
    seg = SegmentWriter(tmp_path / "cut.edrec", indexed=False)
    (_t0, d0), (_t1, d1), *_ = docs(2)
    lines = [orjson.dumps(d0), b"[1, 2]", b'"text"', b"{not json", orjson.dumps(d1)]
    times = [T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4]
    seg.write(frames.KIND_DOCS, b"\n".join([orjson.dumps(times), *lines]) + b"\n", t_first=T0, t_last=T0 + 4,
              count=5)
    seg.close()
    rec = Recording.open(tmp_path / "cut.edrec")
    assert [t for t, _doc in rec.documents()] == [T0, T0 + 4]
    assert rec.bad_documents == 3 and rec.damaged_inside


def test_a_time_no_date_can_show_is_left_out(tmp_path: Path) -> None:
    seg = SegmentWriter(tmp_path / "cut.edrec", indexed=False)
    (_t, doc), *_ = docs(1)
    times = [T0, 1e300]
    seg.write(frames.KIND_DOCS, b"\n".join([orjson.dumps(times), orjson.dumps(doc), orjson.dumps(doc)]) + b"\n",
              t_first=T0, t_last=1e300, count=2)
    seg.close()
    r = run_cli(tmp_path, "export", str(tmp_path / "cut.edrec"), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 3 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr


def test_a_frame_that_inflates_past_the_limit_is_refused(tmp_path: Path) -> None:
    seg = SegmentWriter(tmp_path / "cut.edrec", indexed=False)
    seg.write(frames.KIND_RAW, orjson.dumps([T0, "e"]) + b"\n" + bytes(frames.MAX_DECOMPRESSED + 1024),
              t_first=T0, t_last=T0, count=1, )
    seg.close()
    assert (tmp_path / "cut.edrec").stat().st_size < 200_000
    rec = Recording.open(tmp_path / "cut.edrec")
    assert list(rec.raw_payloads()) == [] and rec.skipped == 1


def test_a_header_claiming_millions_of_documents_is_refused(tmp_path: Path) -> None:
    (_t, doc), *_ = docs(1)
    first = orjson.dumps(doc)
    n = 3_000_000  # times of 2 bytes each: the frame is small, the documents it claims are 30 GB
    payload = b'{"t":[' + b"0," * (n - 1) + b'0],"runs":[%d]}\n' % n + first + b"\n[]\n"
    seg = SegmentWriter(tmp_path / "cut.edrec", indexed=False)
    seg.write(frames.KIND_DOCS, payload, t_first=0, t_last=0, count=n)
    seg.close()
    rec = Recording.open(tmp_path / "cut.edrec")
    started = time.monotonic()
    assert list(rec.documents()) == [] and rec.skipped == 1
    assert time.monotonic() - started < 10


def test_a_rows_frame_with_a_crafted_scale_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "rec"
    write_recording(d, 20)
    seg = next(d.glob("*.edrec"))
    times = [T0 + k for k in range(9)]
    bad_rows = b"\n".join([orjson.dumps(times), b"null", b'[["eng-0", ["running"]]]',
                           b"[[1000000000, 1, 1, 1, 1, 1, 1, 1, 1, 1]]"]) + b"\n"
    w = SegmentWriter(tmp_path / "x.edrec", indexed=False)
    w.write(frames.KIND_ROWS, bad_rows, t_first=T0, t_last=T0 + 8, count=9)
    w.close()
    rows = Recording.open(tmp_path / "x.edrec").segments[0]
    from console.recording.history_rows import RowsFrame

    started = time.monotonic()
    payload = rows.payload(rows.frames[0])
    assert payload is not None
    with pytest.raises(ValueError, match="scale"):
        RowsFrame.decode(payload)
    assert time.monotonic() - started < 1
    assert seg.exists()


# -- bundles ------------------------------------------------------------------------------------

GIB = 2**30


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in (tmp / "tmpdir").iterdir())


def test_a_bundle_of_two_gigabyte_members_is_refused_at_once(tmp_path: Path) -> None:
    bomb = tar_bomb(tmp_path / "bomb.tar.gz", [("b/recording/0.edrec", GIB), ("b/recording/1.edrec", GIB)])
    assert bomb.stat().st_size < 3 * 2**20
    started = time.monotonic()
    r = run_cli(tmp_path, "export", str(bomb), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "would unpack to 1.0 GiB" in r.stderr and "refused" in r.stderr, r.stderr
    assert time.monotonic() - started < 20
    assert _leftovers(tmp_path) == [] and not (tmp_path / "o.csv").exists()


def test_a_gigabyte_stepped_over_counts_against_the_budget(tmp_path: Path) -> None:
    # The recording comes after a 1 GiB log: reading through it to get there decompresses it.
    bomb = tar_bomb(tmp_path / "bomb.tar.gz", [("b/log.txt", GIB), ("b/recording/0.edrec", 1024)])
    with pytest.raises(RecordingError, match="unpacks to more than"):
        open_any(bomb)


def test_members_that_fit_one_by_one_but_not_together_are_refused(tmp_path: Path) -> None:
    mib = 2**20
    bomb = tar_bomb(tmp_path / "bomb.tar.gz", [(f"b/{k}.edrec", 40 * mib) for k in range(3)])
    with pytest.raises(RecordingError, match="left of the archive's budget"):
        open_any(bomb)


def test_a_real_bundle_still_opens_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    seg = write_recording(tmp_path / "rec", 40)
    archive = tar_of(tmp_path / "b.tar.gz", {"b/manifest.json": b"{}", "b/recording/window.edrec": seg.read_bytes()})
    r = run_cli(tmp_path, "export", str(archive), "--format", "csv", "-o", str(tmp_path / "o.csv"))
    assert r.returncode == 0, r.stderr
    assert len({row.split(",")[0] for row in (tmp_path / "o.csv").read_text().splitlines()[1:]}) == 40
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_an_export_ended_by_a_signal_removes_its_temporary_folder(tmp_path: Path, sig: int, code: int) -> None:
    write_recording(tmp_path / "rec", N)
    fifo = tmp_path / "out.om"
    os.mkfifo(fifo)
    p = start_cli(tmp_path, "export", str(tmp_path / "rec"), "-o", str(fifo))
    reader = os.open(fifo, os.O_RDONLY)  # opened, never read: the export blocks once the pipe is full
    try:
        wait_for(lambda: any(n.startswith("enginedeck-export-") for n in _leftovers(tmp_path)), what="export folder")
        time.sleep(0.3)
        p.send_signal(sig)
        p.communicate(timeout=30)
    finally:
        os.close(reader)
        stop_group(p)
    assert p.returncode == code
    assert _leftovers(tmp_path) == []


def test_a_bundle_ended_by_sigterm_while_unpacking_leaves_nothing(tmp_path: Path) -> None:
    # 60 MiB to unpack (within the budget); stopped the moment its folder appears, then SIGTERM.
    archive = tar_bomb(tmp_path / "big.tar.gz", [("b/recording/0.edrec", 60 * 2**20)])
    for _attempt in range(5):
        shutil.rmtree(tmp_path / "tmpdir", ignore_errors=True)
        p = start_cli(tmp_path, "export", str(archive), "-o", str(tmp_path / "o.om"))
        try:
            (tmp_path / "tmpdir").mkdir(exist_ok=True)
            wait_for(lambda proc=p: _leftovers(tmp_path) or proc.poll() is not None, what="the unpack folder")
            os.kill(p.pid, signal.SIGSTOP)
            caught = bool(_leftovers(tmp_path))
            os.kill(p.pid, signal.SIGTERM)
            os.kill(p.pid, signal.SIGCONT)
            p.communicate(timeout=30)
        finally:
            stop_group(p)
        if caught:
            break
    assert caught, "the unpack was never caught in progress"
    assert p.returncode == 143
    assert _leftovers(tmp_path) == []


def test_replay_of_a_bomb_is_one_line(tmp_path: Path) -> None:
    bomb = tar_bomb(tmp_path / "bomb.tar.gz", [("b/recording/0.edrec", GIB)])
    r = run_cli(tmp_path, "replay", str(bomb))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "refused" in r.stderr, r.stderr
    assert _leftovers(tmp_path) == []


def test_sigterm_during_a_bundle_leaves_no_temporary_file(tmp_path: Path) -> None:
    import socket

    # An engine that accepts and never answers: the bundle waits on its probes.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1]
    out = tmp_path / "out"
    out.mkdir()
    write_recording(tmp_path / "rec", 40)
    p = start_cli(tmp_path, "bundle", "--engine", f"vllm@http://127.0.0.1:{port}", "--recording",
                  str(tmp_path / "rec"), "--gpus", "none", "-o", str(out) + "/")
    try:
        silent.settimeout(30)
        conn, _addr = silent.accept()  # the bundle is probing its engine: it is being made
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        _o, err = p.communicate(timeout=60)
    finally:
        stop_group(p)
        silent.close()
    conn.close()
    assert p.returncode == 143, err
    assert _leftovers(tmp_path) == []
    assert not [n.name for n in out.iterdir() if n.name.endswith(".part")]
