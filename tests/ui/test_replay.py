"""Replay in the console (Pilot): what it shows equals what the live console showed for the recorded
snapshots, the timeline keys move it, and everything that would act on an engine says "replay"."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from console.model import FleetSnapshot
from console.profiles import load_profiles
from console.recording import Recording, RecordingWriter
from console.recording.replay import ReplaySource
from console.status_doc import status_doc
from console.telemetry.hub import record
from console.telemetry.metrics.history import History
from console.ui.app import DeckApp, UiOptions
from console.ui.screens.base import TopBar
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests.recording.fleetdocs import T0, snapshot
from tests.ui.frozen import FrozenSource

N = 60
SNAPS = [snapshot(T0 + k, k, engines=4, gpus=8) for k in range(N)]


@pytest.fixture
def recording(tmp_path: Path) -> Recording:
    w = RecordingWriter(tmp_path / "rec")
    for s in SNAPS:
        w.add(status_doc(s), at=s.taken_at)
    w.close()
    return Recording.open(tmp_path / "rec")


def _screen_text(app: DeckApp) -> list[str]:
    """Every cell and line of the screen on view, the top bar left out (it says REPLAY in a replay)."""
    out: list[str] = []
    for w in app.screen.query("*"):
        if isinstance(w, DataTable):
            for row in w.ordered_rows:
                out.append(" | ".join(str(c) for c in w.get_row(row.key)))
        elif isinstance(w, RowTable):
            for key in w.ordered_row_keys:
                out.append(" | ".join(str(c) for c in w.get_row(key)))
        elif isinstance(w, Line) and not isinstance(w, TopBar):
            content: Any = w.content
            out.append(getattr(content, "plain", str(content)))
    return out


def _live_app(k: int) -> DeckApp:
    history = History()
    for s in SNAPS[max(0, k - 399): k + 1]:
        record(history, s)
    snap: FleetSnapshot = SNAPS[k]
    return DeckApp(FrozenSource(snap, history), options=UiOptions(simulated=True), profiles=load_profiles(),
                   clock=lambda: snap.taken_at)


def _replay_app(src: ReplaySource) -> DeckApp:
    return DeckApp(src, options=UiOptions(read_only=True, read_only_reason="replay", simulated=True),
                   profiles=load_profiles(), clock=src.now)


async def _views(app: DeckApp) -> dict[str, list[str]]:
    views: dict[str, list[str]] = {}
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.3)
        views["overview"] = _screen_text(app)
        await pilot.press("g")
        await pilot.pause(0.3)
        views["gpus"] = _screen_text(app)
        await pilot.press("o", "enter")
        await pilot.pause(0.3)
        views["engine"] = _screen_text(app)
    return views


@pytest.mark.parametrize("k", [5, 37, N - 1])
async def test_replay_shows_exactly_what_the_console_showed_for_the_recorded_snapshot(
        recording: Recording, k: int) -> None:
    src = ReplaySource(recording, start=T0 + k, playing=False)
    assert src.latest().taken_at == T0 + k
    src.start()
    try:
        replayed = await _views(_replay_app(src))
    finally:
        src.stop()
    live = await _views(_live_app(k))
    assert replayed == live
    assert any("%" in line for line in replayed["overview"])  # the tables were filled


async def _until(pilot: Any, cond: Any, timeout: float = 15.0) -> None:
    """Wait for ``cond()``: the replay's own thread carries the keys out, on a loaded machine too."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert cond()


async def test_timeline_keys_and_refusals(recording: Recording) -> None:
    src = ReplaySource(recording, start=T0 + 20, playing=False)
    src.start()
    app = _replay_app(src)

    def at(t: float) -> bool:
        return app.fleet is not None and app.fleet.taken_at == t

    try:
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await pilot.pause(0.2)
            top = app.screen.query_one(TopBar)
            assert "REPLAY" in str(top.content) and "❚❚" in str(top.content)
            await pilot.press("full_stop", "full_stop")
            await _until(pilot, lambda: at(T0 + 22))
            await pilot.press("comma")
            await _until(pilot, lambda: at(T0 + 21))
            await pilot.press("greater_than_sign")
            await _until(pilot, lambda: at(T0 + N - 1))  # a minute on: the end of this one-minute recording
            await pilot.press("t")
            await pilot.pause(0.2)
            await pilot.press(*str(int(T0 + 10)), "enter")
            await _until(pilot, lambda: at(T0 + 10))
            # The snapshot comes at once, the charts' window right after: 11 points up to T0 + 10.
            await _until(pilot, lambda: len(src.history.values(("eng-0", "kv_usage"))) == 11)
            await pilot.press("R", "P", "ctrl+r")
            await _until(pilot, lambda: len(app._notifications) >= 3)
            said = [str(n.message) for n in app._notifications]
            assert "replay: restart engine is disabled" in said
            assert any(m.startswith("replay: the playground") for m in said)
            assert "replay: recording is disabled" in said
            assert app.screen_name == "overview"
            await pilot.press("plus")
            await pilot.press("space")
            await _until(pilot, lambda: app.fleet is not None and app.fleet.taken_at > T0 + 10)
            assert src.speed == 2.0
            await _until(pilot, lambda: "▶ 2x" in str(app.screen.query_one(TopBar).content))
    finally:
        src.stop()


async def test_the_replay_keys_are_listed_in_a_replay_only(recording: Recording) -> None:
    from rich.console import Console

    from console.ui.screens.modals import HelpScreen, help_table

    def listed(app: DeckApp) -> str:
        screen = app.screen
        assert isinstance(screen, HelpScreen)
        console = Console(width=200, record=True)
        console.print(help_table(screen.registry, read_only=screen.read_only, hidden_groups=screen.hidden_groups))
        return console.export_text()

    src = ReplaySource(recording, playing=False)
    src.start()
    try:
        app = _replay_app(src)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("question_mark")
            await pilot.pause(0.2)
            text = listed(app)
            assert "Replay: one snapshot back" in text and "Stop engine" not in text
    finally:
        src.stop()
    live = _live_app(3)
    async with live.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        text = listed(live)
        assert "Replay:" not in text and "Record: start / stop recording" in text
