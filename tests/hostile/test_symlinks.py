"""Group 5: the recorder and the bundle's writer never follow a planted link.

In a shared folder someone else can plant a symbolic link (or a hard link, a FIFO) where enginedeck
is about to create a file: ``.lock``, the next segment's ``.edrec`` or ``.edidx``, an archive's
temporary ``.part`` name. Each must be refused in one line with its target untouched, never
truncated or written through; and a recording folder's reader must not block on a FIFO.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import pytest

from console import outfile
from console.bundle.archive import Bundle
from console.recording import Recording, RecordingError, RecordingWriter
from console.recording.writer import LOCK_NAME, segment_name
from console.secrets import Scrubber
from tests.hostile._rec_fakes import run_cli, write_recording
from tests.recording.fleetdocs import T0, docs

VICTIM_TEXT = "precious data that must survive\n" * 10


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    p = tmp_path / "elsewhere" / "victim.txt"
    p.parent.mkdir()
    p.write_text(VICTIM_TEXT)
    return p


def _one_line_refusal(exc: pytest.ExceptionInfo[RecordingError]) -> str:
    text = str(exc.value)
    assert "\n" not in text and "refusing" in text, text
    return text


def test_a_lock_linked_to_a_file_is_refused_and_the_file_kept(tmp_path: Path, victim: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / LOCK_NAME).symlink_to(victim)
    with pytest.raises(RecordingError) as exc:
        RecordingWriter(rec)
    assert "symbolic link" in _one_line_refusal(exc)
    assert victim.read_text() == VICTIM_TEXT


def test_a_dangling_lock_link_creates_nothing_at_its_target(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    target = tmp_path / "elsewhere-created"
    (rec / LOCK_NAME).symlink_to(target)
    with pytest.raises(RecordingError) as exc:
        RecordingWriter(rec)
    _one_line_refusal(exc)
    assert not target.exists()


def test_a_lock_hard_linked_to_a_file_is_refused(tmp_path: Path, victim: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    os.link(victim, rec / LOCK_NAME)
    with pytest.raises(RecordingError) as exc:
        RecordingWriter(rec)
    assert "regular file of its own" in _one_line_refusal(exc)
    assert victim.read_text() == VICTIM_TEXT


def test_a_lock_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    os.mkfifo(rec / LOCK_NAME)
    with pytest.raises(RecordingError) as exc:
        RecordingWriter(rec)
    assert "not a regular file" in _one_line_refusal(exc)


@pytest.mark.parametrize("suffix", [".edrec", ".edidx"])
def test_a_link_planted_at_the_next_segment_is_refused(tmp_path: Path, victim: Path, suffix: str) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    (t, doc), *_ = docs(1)
    planted = rec / segment_name(t).replace(".edrec", suffix)
    planted.symlink_to(victim)
    w = RecordingWriter(rec)
    with pytest.raises(RecordingError) as exc:
        w.add(doc, at=t)
    assert planted.name in _one_line_refusal(exc)
    w.close()
    assert victim.read_text() == VICTIM_TEXT
    assert planted.is_symlink()  # left as it was: not replaced, not followed
    assert not list(rec.glob("*.edrec")) or all(p.is_symlink() for p in rec.glob("*.edrec"))


def test_a_dangling_index_link_creates_nothing_at_its_target(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    target = tmp_path / "created-through-the-link"
    (t, doc), *_ = docs(1)
    (rec / segment_name(t).replace(".edrec", ".edidx")).symlink_to(target)
    w = RecordingWriter(rec)
    with pytest.raises(RecordingError):
        w.add(doc, at=t)
    w.close()
    assert not target.exists()


def test_an_index_left_without_its_data_file_is_replaced(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / segment_name(T0).replace(".edrec", ".edidx")).write_bytes(b"stale entries " * 10)
    write_recording(rec, 20)
    got = Recording.open(rec)
    assert len(list(got.documents())) == 20 and got.damage_notes() == []


def test_record_refuses_a_planted_lock_in_one_line(tmp_path: Path, victim: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    (rec / LOCK_NAME).symlink_to(victim)
    r = run_cli(tmp_path, "record", "--engine", "vllm@http://127.0.0.1:9", "--dir", str(rec), "--gpus", "none")
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "refusing" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert victim.read_text() == VICTIM_TEXT


def test_the_bundle_archive_is_never_written_through_a_planted_part_file(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    dest = out / "incident.tar.gz"
    # The archive is written under a temporary name beside it (pid: guessable) and renamed into place.
    (out / f".{dest.name}.{os.getpid()}.part").symlink_to(victim)
    b = Bundle(Scrubber())
    b.add_text("README.md", "hello\n")
    b.write(dest, {"created_by": "test"}, root="incident")
    assert victim.read_text() == VICTIM_TEXT
    assert not dest.is_symlink()
    with tarfile.open(dest, "r:gz") as tar:
        assert sorted(tar.getnames()) == ["incident/README.md", "incident/manifest.json"]


def test_an_export_output_is_never_written_through_a_planted_part_file(tmp_path: Path, victim: Path) -> None:
    dest = tmp_path / "samples.csv"
    (tmp_path / f".{dest.name}.{os.getpid()}.part").symlink_to(victim)
    with outfile.output(dest) as f:
        f.write("time,value\n")
    assert victim.read_text() == VICTIM_TEXT
    assert dest.read_text() == "time,value\n" and not dest.is_symlink()


def test_a_fifo_in_a_recording_folder_is_not_read(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    write_recording(rec, 20)
    os.mkfifo(rec / "20000101-000000.edrec")  # a reader that opened it would wait for a writer forever
    r = run_cli(tmp_path, "export", str(rec), "--format", "csv", "-o", str(tmp_path / "out.csv"), timeout=60)
    assert r.returncode == 3, r.stderr
    assert "20000101-000000.edrec: not a regular file" in r.stderr
    assert len((tmp_path / "out.csv").read_text().splitlines()) > 20


def test_a_segment_linked_from_elsewhere_is_not_read(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    write_recording(rec, 20)
    other = write_recording(tmp_path / "other", 30)
    (rec / "20000101-000000.edrec").symlink_to(other)
    got = Recording.open(rec)
    assert len(list(got.documents())) == 20
    assert any("not a regular file" in n for n in got.damage_notes())


def test_retention_removes_a_planted_link_not_its_target(tmp_path: Path, victim: Path) -> None:
    rec = tmp_path / "rec"
    rec.mkdir()
    old = rec / "20000101-000000.edrec"  # segment names from long ago: retention's first picks
    old.symlink_to(victim)
    (rec / "20000101-010000.edrec").symlink_to(victim)  # (a segment goes once the next one is too old)
    w = RecordingWriter(rec, retain_s=60)
    for t, doc in docs(20):
        w.add(doc, at=t)
    w.close()
    assert not old.is_symlink() and not old.exists()
    assert victim.read_text() == VICTIM_TEXT
