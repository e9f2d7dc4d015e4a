"""The alerts screen at 80x24 and 200x50 (issue 31 item 10): a firing alert waiting out its clear
period reads "clearing" with the seconds left, no column is cut at 80 columns (the condition moves
under the table), a resolve by a stop says "stopped by you", and v lists every rule."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.widgets import DataTable

from console.model import Alert, AlertState, FleetSnapshot
from console.ui.screens.alerts import AlertsScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet

KV_CONDITION = "kv_usage >= 0.95 (clears at 0.9) and waiting > 0"


def _alerts() -> tuple[Alert, ...]:
    return (
        Alert("kv_saturated_queue_growing", "vllm-a", "critical", AlertState.FIRING,
              "KV cache full while the queue grows", since=T0 - 95, value=0.97, condition=KV_CONDITION,
              values=(("kv_usage", 0.97), ("waiting", 12.0)), runbook="lower --max-num-seqs"),
        Alert("preempting", "sglang-b", "warning", AlertState.FIRING, "Requests are being preempted",
              since=T0 - 300, value=0.0, condition="preemption_rate > 0", clears_at=T0 + 42),
        Alert("queue_buildup", "trtllm-c", "warning", AlertState.RESOLVED, "Queue building up", since=T0 - 10,
              condition="waiting > 50 (clears at 40)", note="stopped by you"),
        Alert("decode_stall", "vllm-a", "critical", AlertState.OK, "Decode stalled", since=T0 - 900,
              value=0.0, condition="decode_stalled_s >= 10"),
        Alert("gpu_xid", "tgi-d", "critical", AlertState.NA, "GPU reported an XID error"),
        Alert("prefix_hit_drop", "sglang-b", "warning", AlertState.NO_DATA, "Prefix-cache hit rate dropped",
              condition="prefix_hit_vs_baseline < 0.5 (clears at 0.7)"),
    )  # fmt: skip


def _fleet() -> FleetSnapshot:
    return replace(frozen_fleet(), alerts=_alerts())


def _rows(table: DataTable[object]) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def _detail(screen: AlertsScreen) -> str:
    return str(screen.query_one("#alert-detail").content)  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_clearing_countdown_whole_columns_and_every_rule(make_app: AppFactory, size: tuple[int, int]) -> None:
    app = make_app(FrozenSource(_fleet()))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        table = screen.query_one("#alerts", DataTable)
        rows = _rows(table)
        assert [r[3] for r in rows] == ["kv_saturated_queue_growing", "preempting", "queue_buildup"]
        # Firing, but its condition stopped holding: it says so and how long the clear period has left.
        assert rows[1][1:5] == ["clearing", "sglang-b", "preempting", "in 42 s"]
        assert rows[0][1] == "firing" and rows[0][4] == "95 s"
        # Every column whole on screen: the table is no wider than its room, each title fits its column.
        assert table.virtual_size.width <= table.scrollable_content_region.width, table.virtual_size
        titles = {str(c.label): c.width for c in table.columns.values()}
        assert all(len(title) <= width for title, width in titles.items()), titles
        if size[0] == 80:
            assert "condition" not in titles  # no room: under the table instead of a column of "con"
        else:
            assert titles["condition"] >= len(KV_CONDITION) and rows[0][6] == KV_CONDITION
        assert KV_CONDITION in _detail(screen)  # the selected alert's condition, at any width
        await pilot.press("down")
        await pilot.pause()
        assert "clearing in 42 s" in _detail(screen)
        await pilot.press("down")
        await pilot.pause()
        assert "stopped by you" in _detail(screen)

        summary = str(screen.query_one("#alerts-summary").content)  # type: ignore[attr-defined]
        assert "1 ok · 1 n/a · 1 no data" in summary and "v: list them all" in summary
        await pilot.press("v")
        await pilot.pause()
        states = [r[1] for r in _rows(table)]
        assert states == ["firing", "clearing", "resolved", "no data", "n/a", "ok"]
        assert "v: only what fires" in str(screen.query_one("#alerts-summary").content)  # type: ignore[attr-defined]
        await pilot.press("v")
        await pilot.pause()
        assert table.row_count == 3
