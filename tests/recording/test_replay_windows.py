"""A replay's wide windows after a seek: the hour's summaries are rebuilt from the recording's history
rows at once, as the live console would hold them at that moment, so the 15m and 1h charts are full
right after a seek instead of showing the last 400 snapshots only."""

from __future__ import annotations

import time

import pytest

from console.recording import Recording, RecordingWriter
from console.recording.replay import ReplaySource
from console.status_doc import status_doc
from console.telemetry.hub import record
from console.telemetry.metrics.history import BUCKET_S, CHART_POINTS, History
from tests.recording.fleetdocs import T0, snapshot

STEP = 2.0  # seconds between snapshots: the ring's 400 hold 13m20s, the hour needs the summaries
N = 2400  # 80 minutes
KEYS = [("eng-0", "running"), ("eng-1", "kv_usage"), ("eng-1", "ttft_p99"), ("gpu:0", "util"), ("host", "cpu")]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    directory = tmp_path_factory.mktemp("rec") / "rec"
    w = RecordingWriter(directory)
    for k in range(N):
        s = snapshot(T0 + k * STEP, k, engines=2, gpus=1)  # engine 1 drops out now and then: gaps
        w.add(status_doc(s), at=s.taken_at)
    w.close()
    return Recording.open(directory)


def _rows(h: History, key: tuple[str, str], end: float, window: float) -> list[tuple[float | None, ...]]:
    """A chart's rows with gaps (NaN) as None, to compare."""
    return [tuple(None if v != v else v for v in row) for row in h.window(key, end, window)]


def _live(until: int) -> History:
    """What the live console held after collecting snapshots 0..``until``."""
    h = History()
    for k in range(until + 1):
        record(h, snapshot(T0 + k * STEP, k, engines=2, gpus=1))
    return h


@pytest.mark.parametrize("at", [N - 1, 2000, 700])
def test_a_seek_rebuilds_the_hours_summaries_as_the_live_console_held_them(recording: Recording, at: int) -> None:
    end = T0 + at * STEP
    replay = ReplaySource(recording, start=end, playing=False).history
    live = _live(at)
    for key in KEYS:
        for window in (900.0, 3600.0):
            assert _rows(replay, key, end, window) == _rows(live, key, end, window), (key, window)
    hour = replay.window(("eng-0", "running"), end, 3600.0)
    # The hour reaches back an hour where the recording does (before: 400 snapshots, 800 s).
    first_wanted = max(T0, end - 3600.0)
    assert hour[0][0] <= first_wanted + BUCKET_S
    assert len(replay.points(("eng-0", "running"))) == min(at + 1, CHART_POINTS)


def test_a_seek_command_fills_the_wide_windows_once_it_settles(recording: Recording) -> None:
    src = ReplaySource(recording, start=T0 + 100 * STEP, playing=False)
    src.start()
    try:
        target = T0 + 2300 * STEP
        src.seek(target)
        deadline = time.monotonic() + 30.0
        # The seek publishes its snapshot first, then the whole history (its rings and the hour).
        while time.monotonic() < deadline:
            hour = src.history.window(("eng-0", "running"), target, 3600.0)
            if src.position == target and hour and hour[0][0] <= target - 3600.0 + BUCKET_S:
                break
            time.sleep(0.05)
        assert src.position == target
        for key in KEYS:
            assert _rows(src.history, key, target, 3600.0) == _rows(_live(2300), key, target, 3600.0), key
    finally:
        src.stop()
