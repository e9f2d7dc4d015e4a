"""The golden test: a recorded session shown live (Pilot, fed the snapshots) and in replay gives the
same cells on every screen, with energy, speculative decoding, KV transfer, LoRA, a stop you made
(lifecycle state and its reason) and alerts in the session."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from console.model import (
    Alert,
    AlertState,
    EnergyView,
    FleetSnapshot,
    KvTransfer,
    LifecycleView,
    LoraState,
    Phase,
    Rates,
    SourceState,
    SpecDecode,
)
from console.recording import Recording, RecordingWriter
from console.recording.replay import ReplaySource
from console.status_doc import status_doc
from console.ui.app import DeckApp
from console.ui.screens.base import TopBar
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests.recording.fleetdocs import T0, snapshot
from tests.ui.test_replay import _live_app, _replay_app

N = 40
STOPPED_AT = T0 + 12


def rich(k: int) -> FleetSnapshot:
    """Snapshot ``k`` of fleetdocs with every optional panel filled, engine 2 stopped by you at
    ``STOPPED_AT`` and alerts evaluated."""
    s = snapshot(T0 + k, k, engines=4, gpus=8)
    t = s.taken_at
    energy = EnergyView(joules=4200.0 + k, window_s=60.0, power_w=70.0 + k, tokens_per_joule=2.5 + k / 100,
                        total_tokens_per_joule=7.25, joules_per_1k_output=400.0, idle_w=61.5, busy_w=320.25,
                        total_joules=98765.0 + k, source="simulated", gpus=(0,), simulated=True)
    engines = list(s.engines)
    e0 = engines[0]
    assert e0.total is not None
    m = replace(e0.total, spec=SpecDecode(0.6, 2.8, 0.55, "60s", (0.8, 0.6, 0.4)),
                kv_transfer=KvTransfer(123456.0 + k, 12.5, 0.0042, Rates(0.125, 0.1, 0.05)),
                lora=LoraState(2.0, 1.0, 2.0, 4.0))
    engines[0] = replace(e0, total=m, models=(m,), energy=energy, managed=True,
                         lifecycle=LifecycleView(phase=Phase.READY, since=T0 - 100))
    e2 = engines[2]
    if t >= STOPPED_AT:
        fresh = replace(e2.metrics_freshness, state=SourceState.STALE, stale_since=STOPPED_AT,
                        reason="connection refused")
        engines[2] = replace(e2, phase=Phase.EXITED, reachable=False, health_detail="connection refused",
                             metrics_freshness=fresh, health_freshness=fresh, managed=True,
                             lifecycle=LifecycleView(phase=Phase.EXITED, detail="stopped (exit code 0)",
                                                     ended="stopped", exit_code=0, since=STOPPED_AT))
    else:
        engines[2] = replace(e2, managed=True, lifecycle=LifecycleView(phase=Phase.READY, since=T0 - 100))
    gpus = replace(s.gpus, gpus=tuple(replace(g, energy=replace(energy, tokens_per_joule=None), energy_mj=1e6 + k,
                                              energy_source="simulated") for g in s.gpus.gpus))
    alerts = (
        Alert(rule="kv_pressure", engine="eng-0", severity="warning", state=AlertState.FIRING, summary="KV nearly full",
              since=T0 + 3, value=0.97, condition="kv_usage >= 0.95 (clears at 0.9)", values=(("kv_usage", 0.97),)),
        Alert(rule="error_rate", engine="eng-1", severity="critical", state=AlertState.PENDING,
              summary="errors above 5 %", since=t - 2, value=0.06, condition="errors / requests >= 0.05"),
        Alert(rule="prefix_hit_drop", engine="eng-3", severity="info", state=AlertState.NO_DATA,
              summary="prefix hit rate fell", condition="prefix_hit_rate drop >= 0.2"),
        Alert(rule="spec_acceptance", engine="eng-2", severity="info", state=AlertState.NA, summary="spec low"),
    )  # fmt: skip
    return replace(s, engines=tuple(engines), gpus=gpus, alerts=alerts)


SNAPS = [rich(k) for k in range(N)]


@pytest.fixture
def recording(tmp_path: Path) -> Recording:
    w = RecordingWriter(tmp_path / "rec")
    for s in SNAPS:
        w.add(status_doc(s), at=s.taken_at)
    w.close()
    return Recording.open(tmp_path / "rec")


def screen_cells(app: DeckApp, hidden: frozenset[str] = frozenset()) -> list[str]:
    """Every cell and line on view (``test_replay._screen_text``), and every shown Static: the engine
    detail's head and its energy, spec decode, KV transfer and LoRA strips. Widgets whose id is in
    ``hidden`` are left out."""
    out: list[str] = []
    for w in app.screen.query("*"):
        if w.id in hidden:
            continue
        if isinstance(w, DataTable):
            out += [" | ".join(str(c) for c in w.get_row(row.key)) for row in w.ordered_rows]
        elif isinstance(w, RowTable):
            out += [" | ".join(str(c) for c in w.get_row(key)) for key in w.ordered_row_keys]
        elif (isinstance(w, Line) and not isinstance(w, TopBar)) or (isinstance(w, Static) and w.display):
            content: Any = w.content
            out.append(getattr(content, "plain", str(content)))
    return out


async def _views(app: DeckApp, size: tuple[int, int], hidden: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    views: dict[str, list[str]] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        views["overview"] = screen_cells(app, hidden)
        await pilot.press("g")
        await pilot.pause(0.3)
        views["gpus"] = screen_cells(app, hidden)
        await pilot.press("a")
        await pilot.pause(0.3)
        views["alerts"] = screen_cells(app, hidden)
        for row in range(4):  # each engine's detail screen
            await pilot.press("o")
            await pilot.pause(0.2)
            await pilot.press(*(["down"] * row), "enter")
            await pilot.pause(0.3)
            views[f"engine {row}"] = screen_cells(app, hidden)
            await pilot.press("escape")
    return views


def _patch_live(monkeypatch: pytest.MonkeyPatch) -> None:
    # The live app of test_replay reads its module's SNAPS: this session's instead.
    import tests.ui.test_replay as base

    monkeypatch.setattr(base, "SNAPS", SNAPS)


@pytest.mark.parametrize("k", [8, N - 1])
@pytest.mark.parametrize("size", [(200, 50), (80, 24)])
async def test_replay_and_live_show_the_same_cells_on_every_screen(
        recording: Recording, monkeypatch: pytest.MonkeyPatch, k: int, size: tuple[int, int]) -> None:
    _patch_live(monkeypatch)
    src = ReplaySource(recording, start=T0 + k, playing=False)
    src.start()
    try:
        replayed = await _views(_replay_app(src), size)
    finally:
        src.stop()
    live = await _views(_live_app(k), size)
    for screen in live:
        assert replayed[screen] == live[screen], screen
    text = "\n".join(line for lines in live.values() for line in lines)
    if size == (200, 50):
        [eng0] = [v for s, v in live.items() if s.startswith("engine") and v[0].startswith("eng-0 ")]
        for strip in ("energy 2.", "spec dec acceptance 60%", "KV xfer 0.1 MB/s", "LoRA 2 running"):
            assert any(" ".join(line.split()).startswith(strip) for line in eng0), (strip, eng0)
        assert any(line.startswith("eng-0 ") and line.endswith(f"| {2.5 + k / 100:.2f}") for line in live["overview"])
        if k >= STOPPED_AT - T0:
            assert "stopped by you" in text and "connection refused (stopped" not in text
