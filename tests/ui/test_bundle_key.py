"""ctrl+s in the console: an incident bundle with the screen as SVG is written into the current
folder on a worker thread, the notice says where, and the path goes to the terminal (OSC 52)."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import io
import json
import socket
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from console.config import parse_engine_ref
from console.profiles import load_profiles
from console.recording import Recording, RecordingWriter
from console.recording.replay import ReplaySource
from console.status_doc import status_doc
from console.ui.app import DeckApp, UiOptions
from tests.isolation import MachineState
from tests.recording.fleetdocs import T0, snapshot
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, clock


def _notices(app: DeckApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


def _files(archive: Path) -> dict[str, bytes]:
    """Every file of the archive by its path under the archive's top folder."""
    out = {}
    with tarfile.open(archive) as tar:
        for m in tar:
            f = tar.extractfile(m)
            assert f is not None
            out[m.name.split("/", 1)[1]] = f.read()
    return out


async def _until(pilot: Pilot[Any], ok: Any, seconds: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not ok() and loop.time() < deadline:
        await pilot.pause(0.1)
    assert ok()


@contextlib.contextmanager
def silent_engine() -> Iterator[str]:
    """A vLLM address on 127.0.0.1 that accepts connections and never answers (probes time out)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"vllm@http://127.0.0.1:{s.getsockname()[1]}"


async def test_ctrl_s_writes_a_bundle_and_sends_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with silent_engine() as ref:
        inst = parse_engine_ref(ref)
        app = DeckApp(FrozenSource(), options=UiOptions(simulated=True), profiles=load_profiles(), clock=clock,
                      instances={inst.name: inst})  # fmt: skip
        said: list[str] = []  # every notice posted (a shown one expires after its timeout)
        notify = app.notify

        def noting(message: str, *args: Any, **kwargs: Any) -> None:
            said.append(str(message))
            notify(message, *args, **kwargs)

        app.notify = noting  # type: ignore[method-assign]
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await pilot.pause()
            # The second press comes while the first bundle is being written (the engine's probes take
            # their 2 s timeout); pressed together, as a pause between can take a second on a loaded machine.
            await pilot.press("ctrl+s", "ctrl+s")
            await pilot.pause()
            assert any(n.startswith("Writing the incident bundle (1 engines") for n in said), said
            assert any("is being written" in n for n in said), said
            await _until(pilot, lambda: any(n.startswith("Incident bundle written") for n in _notices(app)))
            [archive] = list(tmp_path.glob("enginedeck-bundle-*.tar.gz"))
            done = next(n for n in _notices(app) if n.startswith("Incident bundle written"))
            assert str(archive) in done and "path sent to the terminal, OSC 52" in done
            assert app.clipboard == str(archive)
    files = _files(archive)
    names = set(files)
    manifest = json.loads(files["manifest.json"])
    svg, readme = files["screen.svg"].decode(), files["README.md"].decode()
    assert {"manifest.json", "README.md", "screen.svg", "status.json", "recording/window.edrec"} <= names
    assert svg.startswith("<svg") and "enginedeck" in svg
    assert manifest["screenshot"] == {"path": "screen.svg", "note": None}
    assert manifest["created_by"] == "enginedeck console (bundle key)"
    assert [e["name"] for e in manifest["engines"]] == [inst.name]
    assert "no answer within 2 s" in readme  # the silent engine's probes, as the summary reports them


async def test_without_configured_engines_the_bundle_takes_the_fleets(make_app: AppFactory, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = make_app()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        for n in (1, 2):  # two in the same second get two names
            await pilot.press("ctrl+s")
            await _until(pilot, lambda n=n: sum(x.startswith("Incident bundle written") for x in _notices(app)) == n)
        fleet = [e.name for e in app.fleet.engines] if app.fleet is not None else []
    archives = sorted(tmp_path.glob("enginedeck-bundle-*.tar.gz"))
    assert len(archives) == 2 and archives[0].name != archives[1].name
    manifest = json.loads(_files(archives[0])["manifest.json"])
    assert len(manifest["engines"]) == len(fleet) == 4


async def test_the_bundle_key_is_in_help_and_works_in_read_only_mode(make_app: AppFactory) -> None:
    app = make_app(read_only=True)
    assert any(a.id == "bundle" for a in app.registry.visible(read_only=True))
    assert app.registry.get("bundle").key_list == ["ctrl+s"]


async def test_a_replay_refuses_the_bundle_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with RecordingWriter(tmp_path / "rec") as w:
        for i in range(3):
            w.add(status_doc(snapshot(T0 + i, i)), at=T0 + i)
    src = ReplaySource(Recording.open(tmp_path / "rec"), start=T0, playing=False)
    src.start()
    try:
        app = DeckApp(src, options=UiOptions(read_only=True, read_only_reason="replay", simulated=True),
                      profiles=load_profiles(), clock=src.now)  # fmt: skip
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await pilot.pause(0.2)
            await pilot.press("ctrl+s")
            await pilot.pause(0.3)
            assert any(n.startswith("replay: the bundle") for n in _notices(app)), _notices(app)
    finally:
        src.stop()
    assert not list(tmp_path.glob("enginedeck-bundle-*"))


async def test_while_the_console_records_the_bundle_holds_its_recording(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = FrozenSource()
    app = DeckApp(src, options=UiOptions(simulated=True), profiles=load_profiles(), clock=clock,
                  recording=lambda: RecordingWriter(tmp_path / "rec", frame_s=0.0))  # fmt: skip
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        ctl = app.recording_control
        await _until(pilot, lambda: ctl is not None and ctl.active)
        for _ in range(3):  # snapshots of now, so that they fall in the bundle's last 15 minutes
            src.publish(dataclasses.replace(src.latest(), taken_at=time.time()))
            await pilot.pause(0.3)
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: any(n.startswith("Incident bundle written") for n in _notices(app)))
        done = next(n for n in _notices(app) if n.startswith("Incident bundle written"))
        await pilot.press("ctrl+r")
        await pilot.pause(0.5)
    [archive] = list(tmp_path.glob("enginedeck-bundle-*.tar.gz"))
    rec = json.loads(_files(archive)["manifest.json"])["recording"]
    assert rec["covers_window"] and rec["documents"] >= 1 and rec["source"] == str(tmp_path / "rec"), rec
    assert f"{rec['documents']} recorded snapshots of the window" in done


async def test_without_a_recording_the_bundle_holds_the_consoles_history_and_alerts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, machine_state: MachineState) -> None:
    """A console watching a real simulator for a while, no recording running: ctrl+s writes the chart
    history the console holds over the time it ran (history.csv: every engine, GPU and host series,
    many rows each), and the alerts it evaluated, not one snapshot alone."""
    from console.alerts.evaluate import evaluator_for
    from console.telemetry.hub import Hub
    from tests.client.simproc import sims

    monkeypatch.chdir(tmp_path)
    rules = machine_state.config / "alerts"  # the test's config folder (tests/conftest.py)
    rules.mkdir(parents=True)
    (rules / "idle.toml").write_text(
        'schema = 1\n[rules.engine_idle]\nsummary = "Engine idle"\nseverity = "warning"\nfor = 0\nclear_for = 0\n'
        'runbook = "Nothing to do."\nwhen = [{ signal = "waiting", op = ">=", value = 0 }]\n')
    with sims(("vllm",)) as (sim,):
        inst = parse_engine_ref(sim.ref)
        hub = Hub([inst], refresh=0.25, gpu_source="simulated", alerts=evaluator_for([inst]))
        hub.start()
        started = time.time()
        try:
            app = DeckApp(hub, options=UiOptions(simulated=True), profiles={inst.profile.name: inst.profile},
                          instances={inst.name: inst})  # fmt: skip
            async with app.run_test(size=(80, 24), notifications=True) as pilot:
                # A while: forty snapshots of the engine live, and its rule firing.
                await _until(pilot, lambda: sum(1 for _, v in hub.history.points((inst.name, "running"))
                                                if v == v) >= 40)  # fmt: skip
                await _until(pilot, lambda: any(a.rule == "engine_idle" and a.state.value == "firing"
                                                for a in hub.latest().alerts))  # fmt: skip
                pressed = time.time()
                await pilot.press("ctrl+s")
                await _until(pilot, lambda: any(n.startswith("Incident bundle written") for n in _notices(app)))
                done = next(n for n in _notices(app) if n.startswith("Incident bundle written"))
        finally:
            hub.stop()
    [archive] = list(tmp_path.glob("enginedeck-bundle-*.tar.gz"))
    files = _files(archive)
    manifest = json.loads(files["manifest.json"])
    assert not manifest["recording"]["covers_window"]
    rows = list(csv.DictReader(io.StringIO(files["history.csv"].decode())))
    series = {(r["entity"], r["metric"]) for r in rows}
    assert {(inst.name, "running"), (inst.name, "generation_tps"), (inst.name, "ttft_p99"), ("gpu:0", "power"),
            ("host", "cpu")} <= series, sorted(series)  # fmt: skip
    running = [r for r in rows if (r["entity"], r["metric"]) == (inst.name, "running")]
    live = [r for r in running if r["mean"] != ""]
    assert len(live) >= 40 and all(r["mean"] == r["min"] == r["max"] for r in running)
    times = [float(r["time"]) for r in running]
    assert times == sorted(times) and started - 1 <= times[0] and times[-1] <= pressed + 1
    assert times[-1] - times[0] >= 39 * 0.25 * 0.9  # the rows span the time the console ran
    assert manifest["history"]["rows"] == len(rows) and manifest["history"]["series"] == len(series)
    assert f"{len(rows)} rows of chart history" in done
    status = json.loads(files["status.json"])
    assert any(a["rule"] == "engine_idle" and a["state"] == "firing" and a["engine"] == inst.name
               for a in status["alerts"]), status["alerts"]  # fmt: skip
    readme = files["README.md"].decode()
    assert f"| {inst.name} | engine_idle | warning | firing | Engine idle |" in readme
    assert "history.csv: the console's chart history" in readme
