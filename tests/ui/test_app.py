"""Pilot tests over a frozen fleet: navigation, sort, filter, help, palette, read-only, staleness."""

from __future__ import annotations

import io
from dataclasses import replace
from typing import Literal

from rich.console import Console
from rich.text import Text
from textual.command import CommandPalette, Provider
from textual.widgets import DataTable, Static

from console.model import LifecycleView, Rates
from console.ui.app import DeckApp
from console.ui.palette import ActionsProvider
from console.ui.screens.engine import EngineScreen
from console.ui.screens.gpus import GpuScreen
from console.ui.screens.modals import ConfirmScreen, ExplainScreen, HelpScreen
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet


def _rows(app: DeckApp) -> list[str]:
    table = app.screen.query_one("#engines", RowTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


def _static(app: DeckApp, wid: str) -> str:
    return _plain(app.screen.query_one(wid))  # type: ignore[arg-type]


def _plain(widget: Static | Line) -> str:
    """The plain text a Static shows (Rich tables rendered as text)."""
    content = widget.content
    if isinstance(content, str | Text):
        return str(content)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(content)
    return console.export_text()


def _notes(app: DeckApp) -> list[str]:
    return [str(n.message) for n in app._notifications]


class RecordingControl:
    """Records engine-control calls, so a test can see that nothing was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def can_control(self, engine: str) -> bool:
        return True

    def start(self, engine: str) -> None:
        self.calls.append(("start", engine))

    def stop(self, engine: str) -> None:
        self.calls.append(("stop", engine))

    def restart(self, engine: str) -> None:
        self.calls.append(("restart", engine))

    def launch_command(self, engine: str) -> str | None:
        return f"vllm serve m --api-key **** # {engine}"

    def log_tail(self, engine: str, n: int) -> list[str] | None:
        return [f"{engine}: INFO Started server process", f"{engine}: INFO Application startup complete."]

    def phase_of(self, engine: str) -> LifecycleView | None:
        return None

    def pids_of(self, engine: str) -> tuple[int, ...]:
        return ()

    def on_terminal_loss(self, policy: Literal["keep", "stop"], reason: str, done_by: float) -> None:
        self.calls.append((f"terminal-loss {policy}", reason))

    def close(self) -> None:
        self.calls.append(("close", ""))


async def _palette_texts(app: DeckApp) -> list[str]:
    provider: Provider = ActionsProvider(app.screen)
    return [str(hit.text) async for hit in provider.discover()]


async def test_overview_shows_sickest_first_and_staleness(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        assert _rows(app) == ["tgi-d", "trtllm-c", "sglang-b", "vllm-a"]
        attention = _static(app, "#attention")
        assert "tgi-d unreachable · stale 30 s: connection refused" in attention
        assert "trtllm-c metrics stale 12 s: scrape timed out after 2.0 s" in attention
        table = app.screen.query_one("#engines", RowTable)
        tgi = [str(c) for c in table.get_row("tgi-d")]
        assert "✖ unreachable" in tgi and "0" not in tgi  # no live value for a dead engine, never 0
        assert any(str(c).startswith("▲ stale") for c in table.get_row("trtllm-c"))
        assert "GPUs (simulated)" in _static(app, "#gpu-title")


async def test_navigation_between_screens(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # vllm-a, the last row
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen) and app.screen.engine == "vllm-a"
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.screen.query_one("#tabs").active == "raw"  # type: ignore[attr-defined]
        raw = app.screen.query_one("#raw-table", DataTable)
        assert raw.row_count == 3
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, GpuScreen)
        assert app.screen.query_one("#gpu-list", DataTable).row_count == 8
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)


async def test_sort_cycles_and_reverses(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("s")  # phase -> running (most first)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, OverviewScreen) and screen.sort_key == "running"
        assert _rows(app)[:3] == ["trtllm-c", "sglang-b", "vllm-a"]  # tgi-d has no value: last
        assert _rows(app)[-1] == "tgi-d"
        await pilot.press("S")
        await pilot.pause()
        assert _rows(app)[0] == "tgi-d"
        header = app.screen.query_one("#engines", RowTable).columns["running"].label.plain  # type: ignore[index]
        assert header.endswith("▲")


async def test_filter_narrows_rows_and_escape_clears(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        await pilot.press(*"sglang")
        await pilot.pause()
        assert _rows(app) == ["sglang-b"]
        await pilot.press("enter")
        await pilot.pause()
        assert _rows(app) == ["sglang-b"]  # enter keeps the filter
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert len(_rows(app)) == 4


async def test_help_and_palette_list_every_action(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = _static(app, "#help-table")
        # The replay's keys are listed in a replay (tests/ui/test_replay.py), not in a live console.
        live = [a for a in app.registry if a.group != "Replay"]
        assert len(live) < len(app.registry)
        for a in live:
            assert a.description in help_text, a.id
        await pilot.press("escape")
        await pilot.pause()
        palette = await _palette_texts(app)
        overview_actions = [a for a in live if a.available_on("overview") and a.id != "palette"]
        assert sorted(palette) == sorted(a.description for a in overview_actions)
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)


async def test_read_only_hides_and_refuses_mutating_actions(make_app: AppFactory) -> None:
    control = RecordingControl()
    app = make_app(read_only=True)
    app.lifecycle = control
    mutating = [a for a in app.registry if a.mutating]
    assert {a.id for a in mutating} == {"restart", "stop", "start"}
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        help_text = _static(app, "#help-table")
        for a in mutating:
            assert a.description not in help_text
        await pilot.press("escape")
        await pilot.pause()
        palette = await _palette_texts(app)
        assert palette and not any(a.description in palette for a in mutating)
        await pilot.press("R")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert "read-only mode: restart engine is disabled" in _notes(app)
        assert control.calls == []


async def test_mutating_action_confirms_then_calls_lifecycle(make_app: AppFactory) -> None:
    control = RecordingControl()
    app = make_app()
    app.lifecycle = control
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("X")  # stop, on the first row (tgi-d)
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await pilot.pause()
        assert control.calls == []
        await pilot.press("X")
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert control.calls == [("stop", "tgi-d")]


async def test_engine_control_without_lifecycle_says_so(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("R")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("not managed by enginedeck" in n and "nothing was done" in n for n in _notes(app))


async def test_explain_popup_names_this_engines_raw_metric(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "down")  # vllm-a
        table = app.screen.query_one("#engines", RowTable)
        kv_col = list(table.columns).index("kv")
        table.move_cursor(column=kv_col)
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        text = _static(app, "#explain-text")
        assert "KV-cache usage" in text and "vllm:kv_cache_usage_perc" in text


async def test_new_snapshot_updates_only_changed_cells(make_app: AppFactory) -> None:
    src = FrozenSource()
    app = make_app(src)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#engines", RowTable)
        written: list[tuple[str, str]] = []
        original = table.update_cell

        def spy(row_key: object, column_key: object, value: object, **kw: object) -> None:
            written.append((str(row_key), str(column_key)))
            original(row_key, column_key, value, **kw)  # type: ignore[arg-type]

        table.update_cell = spy  # type: ignore[method-assign]
        fleet = frozen_fleet()
        vllm = fleet.engines[0]
        assert vllm.total is not None
        new_total = replace(vllm.total, generation_tps=Rates(2500.0, 2400.0, 2300.0))
        src.publish(replace(fleet, engines=(replace(vllm, total=new_total), *fleet.engines[1:])))
        await pilot.pause()
        await pilot.pause()
        assert written == [("vllm-a", "gen")]
        assert str(table.get_cell("vllm-a", "gen")) == "2.5k t/s"


async def test_pause_and_refresh_steps(make_app: AppFactory) -> None:
    src = FrozenSource()
    app = make_app(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("space")
        assert src.paused
        assert "paused" in _static(app, "#topbar")
        await pilot.press("p")
        assert not src.paused
        await pilot.press("minus")
        assert src.refresh == 2.0
        await pilot.press("plus", "plus")
        assert src.refresh == 0.5


async def test_layout_follows_terminal_size(make_app: AppFactory) -> None:
    for size, name in (((80, 24), "compact"), ((160, 48), "default"), ((250, 70), "wide")):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            assert app.layout_name == name
            assert app.has_class(f"layout-{name}")
            sparks = app.screen.query_one("#sparks")
            assert sparks.display  # at 80x24 too: a sparkline an engine in the rows the GPUs leave
    app = make_app(layout="wide")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.layout_name == "wide"


async def test_compact_columns_fit_80_columns(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#engines", RowTable)
        keys = list(table.columns)
        assert keys[:2] == ["name", "phase"] and "ttft99" in keys and "model" not in keys
        assert table.virtual_size.width <= 80


async def test_setup_screen_offers_demo(make_app: AppFactory) -> None:
    from console.ui.app import UiOptions

    app = DeckApp(None, options=UiOptions(setup_config_path="/x/config.toml"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = " ".join(_plain(s) for s in app.screen.query(Static))
        assert "enginedeck attach" in text and "/x/config.toml" in text and "[engines." in text
        await pilot.press("d")
        await pilot.pause()
    assert app.return_value == "demo"


async def test_logs_tab_shows_lifecycle_lines_or_says_why_not(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        app.screen.query_one("#tabs").active = "logs"  # type: ignore[attr-defined]
        await pilot.pause()
        assert "not started by enginedeck" in _static(app, "#logs-text")
    app = make_app()
    app.lifecycle = RecordingControl()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        app.screen.query_one("#tabs").active = "logs"  # type: ignore[attr-defined]
        await pilot.pause()
        assert "tgi-d: INFO Application startup complete." in _static(app, "#logs-text")
        app.screen.query_one("#tabs").active = "identity"  # type: ignore[attr-defined]
        await pilot.pause()
        identity = _static(app, "#identity-text")
        assert "vllm serve m --api-key ****" in identity and "max context" in identity


async def test_backing_check_reports_a_dead_simulator_fleet(make_app: AppFactory) -> None:
    problems: list[str | None] = [None, "simulated fleet stopped (exit 1): vllm exited"]
    app = make_app()
    app.check_backing = lambda: problems[0]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app._watchdog()
        assert app.backing_problem == ""
        problems.pop(0)
        app._watchdog()
        await pilot.pause()
        assert "simulated fleet stopped (exit 1): vllm exited" in _notes(app)
        assert "simulated fleet stopped (exit 1)" in _static(app, "#topbar")
