"""Times, durations and sizes as users type them; opening a bundle (a tar holding a cut)."""

from __future__ import annotations

import io
import tarfile
from datetime import datetime
from pathlib import Path

import pytest

from console.recording import Recording, RecordingError, RecordingWriter
from console.recording.opening import open_any, window
from console.timespec import parse_duration, parse_size, parse_time
from tests.recording.fleetdocs import T0, docs


def test_durations_sizes_and_times() -> None:
    assert parse_duration("48h") == 48 * 3600 and parse_duration("90") == 90 and parse_duration("1.5m") == 90
    assert parse_size("1GB") == 10**9 and parse_size("2GiB") == 2 * 2**30 and parse_size("500 MB") == 5 * 10**8
    now = T0
    assert parse_time("10m ago", now=now) == now - 600
    assert parse_time("now", now=now) == now
    assert parse_time(str(T0 + 5), now=now) == T0 + 5
    day = datetime.fromtimestamp(now)
    assert parse_time("19:05", now=now) == day.replace(hour=19, minute=5, second=0, microsecond=0).timestamp()
    assert parse_time("2026-12-01 19:05:30", now=now) == datetime(2026, 12, 1, 19, 5, 30).timestamp()
    for bad, fn in (("forever", parse_duration), ("lots", parse_size), ("next week", parse_time)):
        with pytest.raises(ValueError, match="not a"):
            fn(bad)  # type: ignore[operator]
    with pytest.raises(RecordingError, match="--to is before --from"):
        window(str(T0 + 10), str(T0), now=now)


def test_a_bundle_with_a_cut_inside_opens_as_the_cut(tmp_path: Path) -> None:
    items = docs(30)
    w = RecordingWriter(tmp_path / "rec")
    for t, doc in items:
        w.add(doc, at=t)
    w.close()
    cut = Recording.open(tmp_path / "rec").cut(T0 + 5, T0 + 25, tmp_path / "window.edrec")
    bundle = tmp_path / "enginedeck-bundle-test.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        body = b'{"schema": "test"}'
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        tar.add(cut, arcname="metrics/window.edrec")
    rec = open_any(bundle)
    assert [t for t, _ in rec.documents()] == [T0 + k for k in range(5, 26)]
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    with pytest.raises(RecordingError, match="holds no recording"):
        open_any(empty)
