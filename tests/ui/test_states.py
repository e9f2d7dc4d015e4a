"""Engine states on screen (issue 10): no frozen numbers while stopping, loading or stale; crashes
and deliberate stops told apart; restart phases; unmanaged engines say how to manage them."""

from __future__ import annotations

import math
from dataclasses import replace

from textual.widgets import Static

from console.lifecycle.audit import AuditLog
from console.model import EngineSnapshot, FleetSnapshot, Freshness, LifecycleView, Phase, SourceState
from console.telemetry.hub import record
from console.telemetry.metrics.history import History
from console.telemetry.source import ENGINE_SERIES
from console.ui import format as fmt
from console.ui.screens.engine import EngineScreen
from console.ui.screens.modals import ConfirmScreen
from console.ui.screens.overview import IDENTITY_COLS
from console.ui.widgets.row_table import RowTable
from console.ui.widgets.timechart import TimeChart
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet
from tests.ui.test_app import RecordingControl, _notes


def _with(fleet: FleetSnapshot, **changes: dict[str, object]) -> FleetSnapshot:
    """``fleet`` with per-engine field changes: _with(fleet, vllm_a={"phase": ...})."""
    engines = []
    for e in fleet.engines:
        kw = changes.get(e.name.replace("-", "_"), {})
        engines.append(replace(e, **kw) if kw else e)  # type: ignore[arg-type]
    return replace(fleet, engines=tuple(engines))


def _row(app: object, name: str) -> dict[str, str]:
    table = app.screen.query_one("#engines", RowTable)  # type: ignore[attr-defined]
    keys = list(table.columns)
    return dict(zip(keys, (str(c) for c in table.get_row(name)), strict=True))


async def test_rows_show_no_numbers_while_stopping_loading_or_stale(make_app: AppFactory) -> None:
    # vllm-a is stopping and sglang-b loading, both still answering with fresh-looking data (the
    # lifecycle knows better); trtllm-c's metrics are stale; tgi-d is unreachable. None shows a number.
    fleet = _with(frozen_fleet(), vllm_a={"phase": Phase.STOPPING}, sglang_b={"phase": Phase.LOADING})
    app = make_app(FrozenSource(fleet))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        for name in ("vllm-a", "sglang-b", "trtllm-c", "tgi-d"):
            row = _row(app, name)
            numbers = {k: v for k, v in row.items() if k not in IDENTITY_COLS}
            assert numbers and set(numbers.values()) == {"--"}, (name, numbers)


def test_history_records_gaps_not_the_last_values() -> None:
    fleet = _with(frozen_fleet(), vllm_a={"phase": Phase.STOPPING})
    h = History(capacity=10)
    for k in range(3):
        record(h, replace(fleet, taken_at=T0 + k))
    by: dict[str, EngineSnapshot] = {e.name: e for e in fleet.engines}
    for metric in ENGINE_SERIES:
        for name in ("vllm-a", "trtllm-c", "tgi-d"):  # stopping, stale, unreachable
            vals = h.values((name, metric))
            assert len(vals) == 3 and all(math.isnan(v) for v in vals), (name, metric, vals)
    assert by["sglang-b"].live
    assert h.values(("sglang-b", "running")) == [by["sglang-b"].total.running] * 3  # type: ignore[union-attr]


async def test_chart_says_no_current_value_after_a_gap(make_app: AppFactory) -> None:
    app = make_app()  # tgi-d's frozen history ends in a gap (it went away 30 s ago)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.show_screen("engine", "tgi-d")
        await pilot.pause()
        assert isinstance(app.screen, EngineScreen)
        chart = app.screen.query_one("#chart-generation_tps", TimeChart)
        head = chart.render().plain.splitlines()[0]
        assert "now --" in head and "max" in head


async def test_raw_series_of_a_stale_engine_say_how_old_they_are(make_app: AppFactory) -> None:
    app = make_app()  # trtllm-c: metrics stale, last good sample 12 s ago
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.show_screen("engine", "trtllm-c")
        await pilot.pause()
        app.screen.step_tab(1)  # type: ignore[attr-defined]
        await pilot.pause()
        app.screen.show_fleet(app.fleet)  # type: ignore[attr-defined,arg-type]
        await pilot.pause()
        text = str(app.screen.query_one("#raw-count", Static).content)
        assert "last seen 12 s ago, not current" in text


# -- crashes and deliberate stops (item 5) ------------------------------------------------------


def _ended(fleet: FleetSnapshot, name: str, ended: str, code: int | None, *, ago: float = 12,
           phase: Phase = Phase.EXITED, detail: str = "") -> FleetSnapshot:
    view = LifecycleView(phase, detail=detail, ended=ended, exit_code=code, since=T0 - ago)
    refused = Freshness(SourceState.STALE, updated_at=T0 - ago, stale_since=T0 - ago, reason="connection refused")
    return _with(fleet, **{name.replace("-", "_"): {
        "phase": phase, "reachable": False, "health_detail": detail, "lifecycle": view,
        "health_freshness": refused, "metrics_freshness": refused}})


def test_crash_and_stop_read_differently() -> None:
    fleet = _ended(frozen_fleet(), "vllm-a", "crashed", 137, detail="exited unexpectedly with exit code 137")
    fleet = _ended(fleet, "sglang-b", "stopped", 0, ago=1, detail="stopped (exit code 0)")
    crash, stop = fleet.engine("vllm-a"), fleet.engine("sglang-b")
    assert crash is not None and stop is not None
    wide = fmt.health(crash, T0, 40)
    assert wide.plain == "✖ crashed: exit 137 (SIGKILL) 12 s ago" and wide.style == fmt.CRIT
    assert fmt.health(crash, T0, 20).plain == "✖ crashed 12 s ago"
    assert fmt.health(crash, T0, 13).plain == "✖ crashed"
    grey = fmt.health(stop, T0, 40)
    assert grey.plain == "■ stopped by you 1 s ago" and grey.style == "dim"
    assert fmt.problem(crash, T0) == "crashed: exit 137 (SIGKILL) 12 s ago"
    assert fmt.problem(stop, T0) == "stopped by you 1 s ago"  # no "connection refused (stopped (exit code 0))"
    assert fmt.is_sick(crash) and not fmt.is_sick(stop)
    assert fmt.severity(crash) < fmt.severity(stop) < fmt.PHASE_SEVERITY[Phase.READY]
    oom = replace(crash, lifecycle=replace(crash.lifecycle, oom_killed=True))  # type: ignore[type-var]
    assert fmt.problem(oom, T0) == "crashed: OOMKilled, exit 137 (SIGKILL) 12 s ago"
    outside = _ended(frozen_fleet(), "vllm-a", "outside", 143).engine("vllm-a")
    assert outside is not None
    assert fmt.health(outside, T0, 60).plain == "■ stopped outside this console (SIGTERM) 12 s ago"
    assert fmt.health(outside, T0, 40).plain == "■ stopped outside this console 12 s ago"
    assert fmt.problem(outside, T0) == "stopped outside this console (SIGTERM) 12 s ago"
    failed = _ended(frozen_fleet(), "vllm-a", "failed", 1, phase=Phase.FAILED,
                    detail="exited during loading with exit code 1: RuntimeError: CUDA out of memory").engine("vllm-a")
    assert failed is not None
    assert fmt.problem(failed, T0) == ("start failed 12 s ago: exited during loading with exit code 1: "
                                       "RuntimeError: CUDA out of memory")


def test_stopping_says_the_countdown_once() -> None:
    view = LifecycleView(Phase.STOPPING, detail="SIGTERM sent; SIGKILL in 4 s", countdown=4, since=T0 - 1)
    e = _with(frozen_fleet(), vllm_a={"phase": Phase.STOPPING, "lifecycle": view}).engine("vllm-a")
    assert e is not None
    assert fmt.health(e, T0, 40).plain == "◑ stopping: SIGKILL in 4 s"
    assert fmt.problem(e, T0) == "stopping: SIGTERM sent; SIGKILL in 4 s"


async def test_overview_rows_say_crashed_or_stopped_by_you(make_app: AppFactory) -> None:
    fleet = _ended(frozen_fleet(), "vllm-a", "crashed", 137)
    fleet = _ended(fleet, "sglang-b", "stopped", 0, ago=1)
    app = make_app(FrozenSource(fleet))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        assert _row(app, "vllm-a")["phase"] == "✖ crashed: exit 137 (SIGKILL) 12 s ago"
        assert _row(app, "sglang-b")["phase"] == "■ stopped by you 1 s ago"
        table = app.screen.query_one("#engines", RowTable)
        assert str(table.get_row_at(0)[0]) == "vllm-a"  # the crash sorts first, with the failures
        attention = str(app.screen.query_one("#attention").content)  # type: ignore[attr-defined]
        assert "vllm-a crashed: exit 137 (SIGKILL) 12 s ago" in attention
        assert "sglang-b stopped by you 1 s ago" in attention
        assert "connection refused" not in attention.split("sglang-b")[1].split("\n")[0]
        top = str(app.screen.query_one("#topbar").content)  # type: ignore[attr-defined]
        assert "4 engines 3 need attention" in top  # vllm-a, trtllm-c, tgi-d; a stop you asked for is no alarm
    async with make_app(FrozenSource(fleet)).run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        row = _row(pilot.app, "vllm-a")
        assert row["phase"].startswith("✖ crashed")


def test_plural_and_exit_text() -> None:
    assert fmt.plural(1, "engine") == "1 engine" and fmt.plural(2, "engine") == "2 engines"
    assert fmt.plural(1, "needs", "need") == "1 needs" and fmt.plural(3, "needs", "need") == "3 need"
    assert fmt.exit_text(137) == "exit 137 (SIGKILL)" and fmt.exit_text(1) == "exit 1"
    assert fmt.exit_text(139) == "exit 139 (SIGSEGV)" and fmt.exit_text(None) == "no exit code"


# -- engines enginedeck does not manage (item 8) ------------------------------------------------


class _Unmanaged(RecordingControl):
    def can_control(self, engine: str) -> bool:
        return False


async def test_stop_on_an_unmanaged_engine_says_how_to_manage_it(make_app: AppFactory) -> None:
    app = make_app()
    app.lifecycle = _Unmanaged()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("X")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        note = next(n for n in _notes(app) if "not managed by enginedeck" in n)
        assert "tgi-d" in note and "cannot stop it" in note and "nothing was done" in note
        assert 'managed = "process"' in note and "enginedeck adopt" in note
        assert "not available" not in note
        await app.workers.wait_for_complete()
    assert app.lifecycle.calls == []  # type: ignore[union-attr]
    entries = AuditLog().read()
    assert [(x.action, x.target, x.result) for x in entries] == [("stop", "tgi-d", "refused")]


async def test_start_without_engine_control_names_the_attach_case(make_app: AppFactory) -> None:
    app = make_app()  # no engine control at all: engines attached by URL
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("U")
        await pilot.pause()
        note = next(n for n in _notes(app) if "not managed by enginedeck" in n)
        assert "attached by URL" in note and "cannot start it" in note and "[engines.NAME]" in note


async def test_engine_screen_says_crashed_once(make_app: AppFactory) -> None:
    app = make_app(FrozenSource(_ended(frozen_fleet(), "vllm-a", "crashed", 137)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await app.show_screen("engine", "vllm-a")
        await pilot.pause()
        head = str(app.screen.query_one("#engine-head", Static).content)
        assert "✖ crashed: exit 137 (SIGKILL) 12 s ago" in head and head.count("crashed") == 1


class _DockerTrouble(RecordingControl):
    def restart(self, engine: str) -> None:
        import docker.errors
        import requests

        response = requests.Response()
        response.status_code = 500
        raise docker.errors.APIError("500 Server Error for http+docker://localhost/v1.43/containers/abc/restart",
                                     response=response, explanation="Cannot restart container abc: no such network\n"
                                                                    "(details follow)")


async def test_docker_errors_read_as_the_cli_one_line_message(make_app: AppFactory) -> None:
    app = make_app()
    app.lifecycle = _DockerTrouble()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("R")
        await pilot.pause()
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        note = next(n for n in _notes(app) if "restart failed" in n)
        assert note == "tgi-d: restart failed: docker: Cannot restart container abc: no such network"
