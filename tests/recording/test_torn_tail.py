"""A recording cut short says how much it lost: export and replay name the torn span instead of
quietly giving fewer samples (a segment cut in half used to export 1,436 of 3,442 samples, no word)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from console.recording import Recording, RecordingWriter
from console.recording.replay import ReplaySource
from console.ui.app import DeckApp, UiOptions
from tests import procgroup
from tests.recording.fleetdocs import T0, docs

ROOT = Path(__file__).resolve().parents[2]
N = 120  # documents, one a second: 15 frames of 8 s


def _recording(directory: Path) -> Path:
    w = RecordingWriter(directory)
    for t, doc in docs(N, engines=2, gpus=2):
        w.add(doc, at=t)
    w.close()
    (segment,) = directory.glob("*.edrec")
    return segment


def _cut_in_half(segment: Path) -> None:
    with segment.open("r+b") as f:
        f.truncate(segment.stat().st_size // 2)


def test_an_intact_recording_has_no_notes(tmp_path: Path) -> None:
    _recording(tmp_path / "rec")
    assert Recording.open(tmp_path / "rec").damage_notes() == []


def test_a_truncated_segment_names_its_torn_tail(tmp_path: Path) -> None:
    segment = _recording(tmp_path / "rec")
    _cut_in_half(segment)
    rec = Recording.open(tmp_path / "rec")
    kept = sum(len(rec.frame_docs(i)) for i in range(len(rec.doc_frames)))
    assert 0 < kept < N
    (note,) = rec.damage_notes()
    assert note.startswith(f"segment {segment.name}: last ") and note.endswith("; skipped"), note
    # The index says exactly what the file no longer holds: every document not read back.
    assert f"{N - kept} documents" in note, (note, kept)
    lost_s = float(note.split("last ", 1)[1].split(" s torn", 1)[0])
    assert abs(lost_s - (T0 + N - 1 - (T0 + kept))) <= 1.0, note


def test_without_its_index_the_torn_frame_header_still_tells(tmp_path: Path) -> None:
    segment = _recording(tmp_path / "rec")
    _cut_in_half(segment)
    segment.with_suffix(".edidx").unlink()
    (note,) = Recording.open(tmp_path / "rec").damage_notes()
    assert "torn" in note and "1 frames" in note, note


def test_export_says_what_was_torn(tmp_path: Path) -> None:
    segment = _recording(tmp_path / "rec")
    _cut_in_half(segment)
    r = procgroup.run([sys.executable, "-m", "console", "export", str(tmp_path / "rec"), "--format", "csv",
                       "-o", str(tmp_path / "out.csv")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                      env={**os.environ, "ENGINEDECK_STATE_DIR": str(tmp_path / "state")})
    assert r.returncode == 0, r.stderr
    assert f"enginedeck: segment {segment.name}: last " in r.stderr and "torn" in r.stderr, r.stderr


async def test_replay_shows_the_torn_tail(tmp_path: Path) -> None:
    segment = _recording(tmp_path / "rec")
    _cut_in_half(segment)
    rec = Recording.open(tmp_path / "rec")
    src = ReplaySource(rec, playing=False)
    app = DeckApp(src, options=UiOptions(read_only=True, read_only_reason="replay", notices=tuple(rec.damage_notes())))
    src.start()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            shown = [n.message for n in app._notifications]
            assert any(segment.name in m and "torn" in m for m in shown), shown
    finally:
        src.stop()
