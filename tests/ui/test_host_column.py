"""The overview's host column is as wide as the host names (issue 31 item 11): a host named by its
address ("127.0.0.1:2222") reads whole at 200 columns, not "127.0.0."."""

from __future__ import annotations

from dataclasses import replace

from console.model import FleetSnapshot, Freshness, HostView
from console.remote.merge import merge
from console.ui.widgets.row_table import RowTable
from tests.ui.conftest import AppFactory
from tests.ui.frozen import T0, FrozenSource, frozen_fleet


def _two_address_hosts() -> FleetSnapshot:
    local = frozen_fleet()
    parts = []
    for name in ("127.0.0.1:2222", "127.0.0.1:2223"):
        view = HostView(name, f"root@{name}", Freshness(updated_at=T0), last_doc_at=T0, host=local.host,
                        gpus=local.gpus, engines=len(local.engines))
        parts.append((view, replace(local, alerts=()), ()))
    return merge(None, parts, T0)


async def test_an_address_host_reads_whole(make_app: AppFactory) -> None:
    app = make_app(FrozenSource(_two_address_hosts()))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        table = app.screen.query_one("#engines", RowTable)
        keys = list(table.columns)
        assert keys[:2] == ["host", "name"]
        assert table.columns["host"].width >= len("127.0.0.1:2222")
        row = dict(zip(keys, (str(c) for c in table.get_row("127.0.0.1:2223/vllm-a")), strict=True))
        assert row["host"] == "127.0.0.1:2223" and row["name"] == "vllm-a"
