"""Alerts in the console: the header badge counts firing alerts by severity, a firing engine's row is
tinted (and only its cells change), `a` opens the alerts screen (since, value against threshold,
runbook), `e` there explains the rule's formula and this engine's raw inputs, a toast comes on a
change of state only, and the bell rings on firing when asked to."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import DataTable

from console.model import Alert, AlertState, FleetSnapshot
from console.ui.screens.alerts import AlertsScreen
from console.ui.screens.modals import ExplainScreen
from console.ui.screens.overview import OverviewScreen
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet


def _alerts(kv_state: AlertState = AlertState.FIRING) -> tuple[Alert, ...]:
    return (
        Alert("kv_saturated_queue_growing", "vllm-a", "critical", kv_state, "KV cache full while the queue grows",
              since=T0 - 95, value=0.97, condition="kv_usage >= 0.95 (clears at 0.9) and waiting > 0",
              values=(("kv_usage", 0.97), ("waiting", 12.0)), runbook="lower --max-num-seqs"),
        Alert("queue_buildup", "sglang-b", "warning", AlertState.FIRING, "Queue building up", since=T0 - 400,
              value=80.0, condition="waiting > 50 (clears at 40)", values=(("waiting", 80.0),), runbook="scale out"),
        Alert("preempting", "sglang-b", "warning", AlertState.PENDING, "Requests are being preempted",
              since=T0 - 20, value=0.2, condition="preemption_rate > 0", values=(("preemption_rate", 0.2),)),
        Alert("gpu_xid", "tgi-d", "critical", AlertState.NA, "GPU reported an XID error"),
    )


def _fleet(alerts: tuple[Alert, ...]) -> FleetSnapshot:
    return replace(frozen_fleet(), alerts=alerts)


def _tinted(app: object, engine: str) -> bool:
    table = app.screen.query_one("#engines", RowTable)  # type: ignore[attr-defined]
    return all(any("on #5f0000" in str(span.style) for span in cell.spans) for cell in table.get_row(engine))


async def test_badge_tint_screen_and_explain(make_app: AppFactory) -> None:
    app = make_app(FrozenSource(_fleet(_alerts())))
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, OverviewScreen)
        top = str(app.screen.query_one("TopBar").content)  # type: ignore[attr-defined]
        assert "▲ 1 critical 1 warning" in top
        assert _tinted(app, "vllm-a") and not _tinted(app, "tgi-d")
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        table = app.screen.query_one("#alerts", DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        # Firing first (critical before warning), then pending; n/a is not a row.
        assert [r[3] for r in rows] == ["kv_saturated_queue_growing", "queue_buildup", "preempting"]
        assert rows[0][:3] == ["crit", "firing", "vllm-a"] and rows[0][5] == "0.97"
        assert rows[0][4] == "95 s"  # since
        detail = str(app.screen.query_one("#alert-detail").content)  # type: ignore[attr-defined]
        assert "lower --max-num-seqs" in detail
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExplainScreen)
        text = str(app.screen.query_one("#explain-text").render())
        assert "vllm:kv_cache_usage_perc" in text and "KV-cache usage, the fullest replica" in text
        assert "holds for 30 s" in text and "kv_usage = 0.97" in text and "Runbook" in text


async def test_toasts_on_a_change_of_state_only_and_the_bell(make_app: AppFactory) -> None:
    source = FrozenSource(_fleet(()))
    app = make_app(source, alert_bell=True)
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        source.publish(_fleet(_alerts()))
        await pilot.pause()
        source.publish(_fleet(_alerts()))  # same states: no new toast
        await pilot.pause()
        texts = [n.message for n in app._notifications]
        assert len([t for t in texts if "firing" in t]) == 2 and rings == [1]
        assert any("vllm-a: KV cache full while the queue grows (critical, firing)" in t for t in texts)
        source.publish(_fleet(_alerts(AlertState.RESOLVED)))
        await pilot.pause()
        texts = [n.message for n in app._notifications]
        assert len(texts) == 3 and "resolved" in texts[-1] and rings == [1]
        assert not _tinted(app, "vllm-a")
