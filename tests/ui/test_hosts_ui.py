"""The overview with remote hosts: a host column only with more than one host, the name column
without the HOST/ prefix then, sorting by host, a stale host's engines without numbers, and its
one attention line and host line saying why. Single-host screens keep no host column (their
snapshot tests are unchanged)."""

from __future__ import annotations

from dataclasses import replace

from console.model import FleetSnapshot, Freshness, HostView, SourceState
from console.remote.merge import merge
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet


def three_hosts(stale: str | None = None) -> FleetSnapshot:
    local = frozen_fleet()
    parts = []
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        fresh = (Freshness(SourceState.STALE, stale_since=T0 - 2, reason="ssh exited (exit 255): Connection refused")
                 if name == stale else Freshness(updated_at=T0))
        view = HostView(name, f"root@{name}", fresh, last_doc_at=T0 - 3 if name == stale else T0, host=local.host,
                        gpus=local.gpus, engines=len(local.engines))
        parts.append((view, replace(local, alerts=()), ()))
    return merge(None, parts, T0)


def _table(app: object) -> RowTable:
    return app.screen.query_one("#engines", RowTable)  # type: ignore[attr-defined, no-any-return]


async def test_three_hosts_show_a_host_column_and_a_stale_host_reads_right(make_app: AppFactory) -> None:
    fleet = three_hosts(stale="gpu-b")
    app = make_app(FrozenSource(fleet))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        table = _table(app)
        keys = list(table.columns)
        assert keys[:2] == ["host", "name"]
        row = dict(zip(keys, (str(c) for c in table.get_row("gpu-b/vllm-a")), strict=True))
        assert row["host"] == "gpu-b" and row["name"] == "vllm-a" and row["running"] == "--", row
        assert "unreachable" in row["phase"]
        live = dict(zip(keys, (str(c) for c in table.get_row("gpu-a/vllm-a")), strict=True))
        assert live["running"] not in ("--", "n/a")
        attention = app.screen.query_one("#attention", Line).render()
        assert "host gpu-b stale" in str(attention) and "4 engines not live" in str(attention)
        hosts = str(app.screen.query_one("#hosts", Line).render())
        assert "fleet 12 engines on 3 hosts" in hosts and "gpu-b STALE ssh exited" in hosts
        assert "gpu-a ✓" in hosts
        for _ in range(len(keys)):  # sort by host: every column in turn until the host one
            await pilot.press("s")
            if app.screen.sort_key == "host":  # type: ignore[attr-defined]
                break
        await pilot.pause()
        order = table.ordered_row_keys
        assert order == sorted(order, key=lambda n: (n.split("/")[0], n)), order


async def test_80x24_keeps_the_host_column(make_app: AppFactory) -> None:
    app = make_app(FrozenSource(three_hosts(stale="gpu-c")))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        keys = list(_table(app).columns)
        assert "host" in keys and "name" in keys and "phase" in keys


async def test_one_host_has_no_host_column(make_app: AppFactory) -> None:
    app = make_app(FrozenSource(frozen_fleet()))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        assert "host" not in list(_table(app).columns)
        assert not app.screen.query_one("#hosts", Line).display
