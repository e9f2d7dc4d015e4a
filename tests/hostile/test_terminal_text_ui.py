"""Issue 37, group 1 in the console (with group 4's masking on screen): what an engine, a stream or a
remote host sends never reaches the terminal as escapes, controls, bidi or invisible characters,
never acts as Rich markup, and shows no credential.

A hostile vLLM stand-in (tests/hostile/_ui_fakes.py) runs on 127.0.0.1 twice: one managed by the
console's engine control (so its log lines reach the Logs tab), one attached whose /metrics and
completions answer 500 with a hostile body. The console is driven with Pilot through the overview,
the engine screen's Raw metrics, Identity and Logs tabs, the playground (a streamed reply and an
error body), a toast and a pop-up; remote hosts come from a merged snapshot whose host name, engine
name and stale reason (a host's stderr) are hostile. Each view's rendered text is checked."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.text import Text
from textual.widgets import TabbedContent, Tabs

from console.config import parse_config, parse_engine_ref
from console.lifecycle.manager import LifecycleManager
from console.model import Alert, AlertState, Freshness, HostView, RawSeries, SourceState
from console.ports import free_port
from console.profiles import load_profiles
from console.remote.merge import merge
from console.telemetry.hub import Hub
from console.textsafe import is_inert
from console.ui import format as fmt
from console.ui.app import DeckApp, UiOptions
from console.ui.control_lifecycle import ManagerControl
from console.ui.widgets.row_table import RowTable
from tests.hostile._ui_fakes import CREDENTIALS, ERROR_BODY, ESCAPES, MARKUP, HostileEngine, hostile
from tests.ui.frozen import T0, FrozenSource, clock, frozen_fleet

ROOT = Path(__file__).resolve().parents[2]
MANAGED = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from tests.hostile._ui_fakes import main; main()"

ESC = "\x1b"
C1 = tuple(chr(c) for c in range(0x80, 0xA0))
BIDI = ("\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069")
ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff")
CONTROLS = tuple(chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F))  # \t and \n are layout


def screen_text(app: DeckApp) -> str:
    """What the terminal shows, as text (the same render as a screenshot, the app's every layer)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      force_terminal=True, color_system="truecolor", legacy_windows=False)  # fmt: skip
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text(styles=False)


async def _wait(pilot: object, app: DeckApp, ready: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.1)  # type: ignore[attr-defined]
        if ready():
            return
    raise AssertionError(f"timed out; the screen shows:\n{screen_text(app)}")


async def _tab(pilot: object, app: DeckApp, tab: str, ready: Callable[[str], bool]) -> str:
    tabs = app.screen.query_one("#tabs", TabbedContent)

    def shown() -> bool:
        if tabs.active != tab:  # a focused table in the old tab can take it back on a slow machine
            app.screen.set_focus(tabs.query_one(Tabs))
            tabs.active = tab
            return False
        return ready(screen_text(app))

    await _wait(pilot, app, shown)
    return screen_text(app)


async def _prompt(pilot: object, app: DeckApp, done: Callable[[str], bool]) -> str:
    await pilot.press("i")  # type: ignore[attr-defined]
    await pilot.press(*"hi", "enter")  # type: ignore[attr-defined]
    await _wait(pilot, app, lambda: done(screen_text(app)))
    return screen_text(app)


async def _visit_live(tmp: Path) -> dict[str, str]:
    """The views of a console attached to the two hostile engines, as text."""
    seen: dict[str, str] = {}
    with HostileEngine(broken=True) as broken:
        cfg = parse_config({"engines": {"hostile": {
            "profile": "vllm", "managed": "process", "model": "demo", "port": free_port(),
            "command": [sys.executable, "-c", MANAGED, "--host", "{host}", "--port", "{port}", "{extra}"]}}},
            str(tmp / "config.toml"))  # fmt: skip
        attached = parse_engine_ref(f"vllm@{broken.url}")
        instances = [*cfg.instances, attached]
        control = ManagerControl(LifecycleManager(cfg), cfg)
        hub = Hub(instances, refresh=0.5, gpu_source="none", pids_of=control.pids_of,
                  lifecycle_phase=control.phase_of)  # fmt: skip
        try:
            control.start("hostile")
            assert control.manager.wait("hostile", timeout=60).phase.value == "ready"
            hub.start()
            app = DeckApp(hub, options=UiOptions(), profiles={i.profile.name: i.profile for i in instances},
                          instances={i.name: i for i in instances}, lifecycle=control)  # fmt: skip
            async with app.run_test(size=(200, 50)) as pilot:
                await _wait(pilot, app, lambda: "␛]0;pwned" in screen_text(app) and "error-body" in screen_text(app))
                seen["overview"] = screen_text(app)
                table = app.screen.query_one("#engines", RowTable)
                table.move_cursor(row=table.ordered_row_keys.index("hostile"))
                await pilot.press("enter")
                await pilot.pause(0.3)
                seen["raw metrics"] = await _tab(pilot, app, "raw", lambda s: "label<" in s)
                seen["identity"] = await _tab(pilot, app, "identity", lambda s: "version<" in s)
                seen["logs"] = await _tab(pilot, app, "logs", lambda s: "log-2<" in s)
                await pilot.press("escape")
                table = app.screen.query_one("#engines", RowTable)
                table.move_cursor(row=table.ordered_row_keys.index(attached.name))
                await pilot.press("enter")
                await pilot.pause(0.3)
                seen["identity of the broken engine"] = await _tab(pilot, app, "identity", lambda s: "error-body<" in s)
                seen["raw metrics of the broken engine"] = await _tab(pilot, app, "raw",
                                                                      lambda s: "error-body<" in s)
                await pilot.press("escape")
                await app.show_screen("playground", "hostile")
                await pilot.pause(0.3)
                seen["playground reply"] = await _prompt(pilot, app, lambda s: "reply-end" in s and "finish" in s)
                await pilot.press("escape", "n")
                await pilot.pause(0.3)
                seen["playground error body"] = await _prompt(pilot, app, lambda s: s.count("error-body<") >= 2)
                app.notify(ERROR_BODY, severity="error")
                await pilot.pause(0.3)
                seen["toast"] = screen_text(app)
                await asyncio.to_thread(hub.stop)
                await pilot.pause(0.2)
        finally:
            hub.stop()
            if control.manager.status("hostile").running:
                control.manager.stop("hostile", timeout=5).result(timeout=30)
            control.close()
    return seen


async def _visit_remote() -> dict[str, str]:
    """A fleet read from a remote host whose names and stderr are hostile, and one of whose engines
    has a hostile model id, label value and firing alert (its summary as the host's document said):
    the overview, the alerts, the engine's identity, an explanation and the GPU screen."""
    local = frozen_fleet()
    first = local.engines[0]
    model = hostile("remote-model")
    local = replace(local, engines=(replace(
        first, identity=replace(first.identity, models=(model,)),
        raw=(RawSeries("vllm:num_requests_running", (("model_name", model),), 1.0, "gauge"),)),
        *local.engines[1:]))  # fmt: skip
    target = f"{hostile('host')}/{hostile('engine')}"
    alert = Alert("kv_full", target, "critical", AlertState.FIRING, hostile("alert-summary"), since=T0 - 5, value=1.0,
                  condition="kv_usage >= 0.95", note=hostile("alert-note"))
    stale = Freshness(SourceState.STALE, stale_since=T0 - 2, reason="ssh exited (exit 255): " + hostile("stderr"))
    parts = []
    for name, fresh in (("gpu-a", stale), (hostile("host"), Freshness(updated_at=T0))):
        view = HostView(name, f"root@{name}", fresh, last_doc_at=T0 - 3, host=local.host, gpus=local.gpus,
                        engines=len(local.engines))
        engines = tuple(replace(e, name=hostile("engine") if i == 0 else e.name) for i, e in enumerate(local.engines))
        parts.append((view, replace(local, engines=engines, alerts=()), ()))
    fleet = merge(None, parts, T0)
    fleet = replace(fleet, alerts=(alert,))
    app = DeckApp(FrozenSource(fleet), options=UiOptions(simulated=True), clock=clock, profiles=load_profiles())
    seen: dict[str, str] = {}
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.3)
        seen["remote hosts"] = screen_text(app)
        await pilot.press("a")
        await pilot.pause(0.3)
        seen["alerts"] = screen_text(app)
        await pilot.press("escape")
        await pilot.pause(0.3)
        table = app.screen.query_one("#engines", RowTable)
        table.move_cursor(row=table.ordered_row_keys.index(target))
        await pilot.press("enter")
        await pilot.pause(0.3)
        seen["identity of a remote engine"] = await _tab(pilot, app, "identity", lambda s: "remote-model<" in s)
        await pilot.press("e")
        await pilot.pause(0.3)
        seen["explain"] = screen_text(app)
        await pilot.press("escape", "escape")
        await pilot.press("g")
        await pilot.pause(0.3)
        seen["GPUs"] = screen_text(app)
    return seen


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("hostile-ui")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENGINEDECK_CONFIG_DIR", str(tmp / "config"))
        mp.setenv("ENGINEDECK_STATE_DIR", str(tmp / "state"))
        return {**asyncio.run(_visit_live(tmp)), **asyncio.run(_visit_remote())}


# Each view, and what in it comes from the hostile side (so a view that showed none of it fails).
VIEWS: dict[str, str] = {
    "overview": "version<",  # the version column (the attention line names the broken engine's error body)
    "raw metrics": "label<",  # a metric's label value
    "identity": "version<",  # version, served model
    "logs": "log-1<",  # the engine's log lines
    "identity of the broken engine": "error-body<",  # the /metrics error body, as the metrics' state
    "raw metrics of the broken engine": "error-body<",
    "playground reply": "reply-start",  # the streamed reply
    "playground error body": "error-body<",  # the completion's 500 body
    "toast": "error-body<",
    "remote hosts": "stderr<",  # a remote host's stderr (its name and its engine's name: below)
    "alerts": "alert-summary<",  # an alert's summary and note on a remote engine
    "identity of a remote engine": "remote-model<",
    "explain": "engine<",  # the explanation names the engine
    "GPUs": "host<",  # the GPUs' engine column
}
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "ESC": (ESC,), "C1": C1, "C0": CONTROLS, "bidi": BIDI, "zero-width": ZERO_WIDTH,
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("kind", list(FORBIDDEN))
def test_no_control_reaches_the_screen(views: dict[str, str], view: str, kind: str) -> None:
    text = views[view]
    assert VIEWS[view] in text, f"{view} shows nothing of the hostile engine:\n{text}"
    found = sorted({f"U+{ord(c):04X}" for c in text if c in FORBIDDEN[kind] and c != "\n"})
    assert not found, f"{view} holds {kind} characters {found}:\n{text}"


def test_remote_names_show_inert(views: dict[str, str]) -> None:
    """The remote host's name and its engine's name (the host and engine columns, the host line)."""
    text = views["remote hosts"]
    assert "host<␛]0;pw" in text and "engine<␛]0;pw" in text, text


@pytest.mark.parametrize("view", list(VIEWS))
def test_escapes_show_as_placeholders(views: dict[str, str], view: str) -> None:
    """The ESC shows as ␛: what the engine sent is visible, not silently dropped."""
    assert "␛" in views[view], views[view]


@pytest.mark.parametrize("view", list(VIEWS))
def test_credentials_are_masked(views: dict[str, str], view: str) -> None:
    text = views[view]
    leaked = [c for c in CREDENTIALS if c in text]
    assert not leaked, f"{view} shows {leaked}:\n{text}"


# Views wide enough to hold the markup whole (the overview and toasts cut it).
MARKUP_VIEWS = ("raw metrics", "identity", "logs", "identity of the broken engine", "playground reply",
                "remote hosts")


@pytest.mark.parametrize("view", MARKUP_VIEWS)
def test_markup_shows_as_text(views: dict[str, str], view: str) -> None:
    """[bold], [link=...] and [/] from the engine are shown literally, never parsed."""
    text = views[view]
    assert "[bold]B[/bold]" in text or "[link=https://evil.example]" in text, text


@pytest.mark.parametrize("name", list(ESCAPES))
def test_each_escape_is_inert_in_a_table_cell(name: str) -> None:
    """A row table cell (the overview's) holding one escape keeps nothing a terminal acts on."""
    table = RowTable()
    table.add_column("x", key="x", width=40)
    table.add_row(Text(f"a{ESCAPES[name]}b"), key="r")
    assert is_inert(table.get_cell("r", "x").plain)
    table.update_cell("r", "x", Text(f"[{ESCAPES[name]}]"))
    assert is_inert(table.get_cell("r", "x").plain)


def test_markup_in_a_cell_stays_text() -> None:
    table = RowTable()
    table.add_column("x", key="x", width=60)
    table.add_row(Text(MARKUP), key="r")
    assert table.get_cell("r", "x").plain == MARKUP


def test_styles_survive_the_sanitiser() -> None:
    t = Text("ok ")
    t.append("\x1b]0;x\x1b\\\u202eid", style="bold")
    t.append(" tail", style="dim")
    out = fmt.shown_text(t)
    assert out.plain == "ok ␛]0;x␛\\\\u202eid tail"
    styled = {out.plain[s.start:s.end]: s.style for s in out.spans}
    assert styled == {"␛]0;x␛\\\\u202eid": "bold", " tail": "dim"}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_any_text_through_the_display_helpers_is_inert(raw: str) -> None:
    assert is_inert(fmt.shown(raw))
    assert is_inert(fmt.shown(raw, multiline=True), multiline=True)
    assert is_inert(fmt.outside(raw).plain)
    styled = Text("x")
    styled.append(raw, style="bold")
    styled.append(raw[::-1], style="dim")
    assert is_inert(fmt.shown_text(styled).plain)
    assert is_inert(fmt.shown_text(styled, multiline=True).plain, multiline=True)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_any_text_in_a_table_or_a_reason_is_inert(raw: str) -> None:
    table = RowTable()
    table.add_column(raw, key="x", width=20)
    table.add_row(Text(raw), key="r")
    assert is_inert(table.get_cell("r", "x").plain) and is_inert(table.columns["x"].label.plain)
    f = Freshness(SourceState.STALE, stale_since=T0, reason=raw)
    assert is_inert(fmt.staleness(f, T0))
