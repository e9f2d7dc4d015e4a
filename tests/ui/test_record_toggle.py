"""ctrl+r in the live console: records the snapshots it shows into the recording folder, ● REC on top."""

from __future__ import annotations

import time
from pathlib import Path

from console.profiles import load_profiles
from console.recording import Recording, RecordingWriter
from console.status_doc import status_doc
from console.ui.app import DeckApp, UiOptions
from console.ui.screens.base import TopBar
from tests.recording.fleetdocs import T0, snapshot
from tests.ui.frozen import FrozenSource


async def _wait(pilot: object, cond: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cond():  # type: ignore[operator]
        await pilot.pause(0.1)  # type: ignore[attr-defined]


async def test_ctrl_r_starts_and_stops_recording(tmp_path: Path) -> None:
    src = FrozenSource(snapshot(T0, 0))
    folder = tmp_path / "rec"
    app = DeckApp(src, options=UiOptions(simulated=True), profiles=load_profiles(), clock=lambda: T0 + 5,
                  recording=lambda: RecordingWriter(folder))
    async with app.run_test(size=(120, 30), notifications=True) as pilot:
        await pilot.pause(0.2)
        top = app.screen.query_one(TopBar)
        assert "REC" not in str(top.content)
        await pilot.press("ctrl+r")
        await _wait(pilot, lambda: app.recording_active)
        sent = [snapshot(T0 + k, k) for k in range(1, 6)]
        for s in sent:
            src.publish(s)
        await pilot.pause(0.3)
        assert "● REC" in str(app.screen.query_one(TopBar).content)
        await pilot.press("ctrl+r")
        await _wait(pilot, lambda: not app.recording_active)
        await pilot.pause(0.3)
        said = [str(n.message) for n in app._notifications]
        assert any(m.startswith(f"recording to {folder}") for m in said)
        assert any(m.startswith("recording stopped: 5 snapshots") for m in said), said
        assert "REC" not in str(app.screen.query_one(TopBar).content)
    got = list(Recording.open(folder).documents())
    assert [d for _, d in got] == [status_doc(s) for s in sent]


async def test_a_folder_in_use_is_said_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "rec"
    holder = RecordingWriter(folder)
    app = DeckApp(FrozenSource(snapshot(T0, 0)), options=UiOptions(), profiles=load_profiles(),
                  recording=lambda: RecordingWriter(folder))
    try:
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await pilot.press("ctrl+r")
            await _wait(pilot, lambda: any("cannot record" in str(n.message) for n in app._notifications))
            said = [str(n.message) for n in app._notifications]
            assert any("being recorded by another enginedeck" in m for m in said), said
            assert not app.recording_active
    finally:
        holder.close()
