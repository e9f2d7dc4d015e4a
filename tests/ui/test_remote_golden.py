"""The golden test's SSH half: the same engines shown through a remote host (a real OpenSSH server on
127.0.0.1, the real ssh client, ``RemoteFleet``) and attached directly give the same cells on every
screen (overview, GPUs, alerts, each engine's detail with its energy, spec decode, KV transfer and
LoRA strips), a stop you made (lifecycle state and its reason) and alerts among them.

Timing: two collectors of the same engines read them at different moments, so their figures differ
by the second they were taken. The remote side therefore sends the status document of one fixed
snapshot (the replay golden test's ``rich(k)``, written by ``status_json``, the function behind each
line of ``status --json --watch``) again every 0.3 s over ssh, and the direct side is the console
fed that snapshot: both show one and the same moment, and every cell can be compared.

What differs by design is taken out, and only that:
- a remote engine is named ``HOST/NAME`` and the overview has a host column: both are mapped back
  before comparing, and runs of spaces are read as one (a shorter name shifts what follows);
- the remote-hosts lines exist only for a console that watches hosts, and the overview's trends
  draw the watching console's own history, stamped when each snapshot arrived (``BY_DESIGN``);
- at 80 columns the host column takes room, so the overview's engine table may show fewer columns
  or a narrower health cell: it is compared column by column, every column both show, a narrower
  cell reading as the start of the wider one.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from console.hosts import HostTarget
from console.ports import free_port
from console.profiles import load_profiles
from console.remote.fleet import RemoteFleet
from console.status_doc import status_json
from console.ui.app import DeckApp, UiOptions
from console.ui.widgets.row_table import RowTable
from tests.remote.sshd import HOW_SSHD, SshLab, missing_tools, skip_ssh
from tests.ui.test_replay import _live_app
from tests.ui.test_replay_golden import SNAPS, STOPPED_AT, N, _patch_live, _views

pytestmark = [pytest.mark.ssh]
HOST = "h1"
BY_DESIGN = frozenset({"hosts", "sparks"})
Table = dict[str, dict[str, tuple[int, str]]]  # engine -> column -> (width, cell)


def _canonical(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = re.sub(rf"^{HOST} \| ", "", line)  # the host column
        line = re.sub(rf"\b{HOST}/", "", line)
        out.append(re.sub(r" {2,}", " ", line).strip())
    return out


async def _engine_table(app: DeckApp, size: tuple[int, int]) -> Table:
    """The overview's engine table: each engine's cells by column, with the column's width."""
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        t = app.screen.query_one("#engines", RowTable)
        return {re.sub(rf"^{HOST}/", "", str(t.get_cell(row, "name"))): {
                    key: (c.width, str(t.get_cell(row, key))) for key, c in t.columns.items() if key != "host"}
                for row in t.ordered_row_keys}  # fmt: skip


async def _remote(lab: SshLab, tmp_path: Path, k: int, size: tuple[int, int],
                  hidden: frozenset[str]) -> tuple[dict[str, list[str]], Table]:
    doc = tmp_path / "doc.jsonl"
    doc.write_text(status_json(SNAPS[k]) + "\n")
    srv = lab.server(HOST, free_port("127.0.0.1"))
    target = HostTarget(name=HOST, destination="127.0.0.1", port=srv.port,
                        command=f"while cat {doc}; do sleep 0.3; done; true",
                        ssh_options=("-F", str(lab.client_config)), period=0.3)  # fmt: skip
    fleet = RemoteFleet([target], refresh=0.3)
    fleet.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                (s := fleet.latest()).engines and all(not h.freshness.stale for h in s.hosts)):
            time.sleep(0.05)
        assert fleet.latest().engines, fleet.latest().hosts

        def app() -> DeckApp:
            return DeckApp(fleet, options=UiOptions(simulated=True), profiles=load_profiles(),
                           clock=lambda: SNAPS[k].taken_at)  # fmt: skip

        views = await _views(app(), size, hidden)
        table = await _engine_table(app(), size)
        assert all(not h.freshness.stale for h in fleet.latest().hosts), fleet.latest().hosts
        return views, table
    finally:
        fleet.stop()


@pytest.mark.parametrize("k", [8, N - 1])
@pytest.mark.parametrize("size", [(200, 50), (80, 24)])
async def test_a_remote_hosts_engines_show_the_same_cells_as_attached_directly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, k: int, size: tuple[int, int]) -> None:
    if skip_ssh():
        pytest.skip("ENGINEDECK_SKIP_SSH is set")
    missing = missing_tools()
    if missing:
        pytest.fail(f"not found: {', '.join(missing)}\n-> {HOW_SSHD}", pytrace=False)
    _patch_live(monkeypatch)
    wide = size[0] >= 200
    # At 80 columns the engine table is compared column by column below; every other line as it is.
    hidden = BY_DESIGN if wide else BY_DESIGN | {"engines"}
    lab = SshLab(tmp_path / "ssh")
    try:
        remote, remote_table = await _remote(lab, tmp_path, k, size, hidden)
    finally:
        lab.close()
    live = await _views(_live_app(k), size, hidden)
    for screen in live:
        assert _canonical(remote[screen]) == _canonical(live[screen]), screen
    live_table = await _engine_table(_live_app(k), size)
    assert set(remote_table) == set(live_table) == {f"eng-{i}" for i in range(4)}
    for engine, cells in live_table.items():
        shared = set(cells) & set(remote_table[engine])
        assert {"name", "phase", "tpj"} <= shared or not wide, (engine, sorted(shared))
        if wide:
            assert set(cells) == set(remote_table[engine])
        for key in shared:
            (lw, lc), (rw, rc) = cells[key], remote_table[engine][key]
            if key == "name":
                continue  # HOST/NAME, mapped back above
            if lw == rw:
                assert lc == rc, (engine, key)
            else:  # a narrower cell is the start of the wider one (cut with an ellipsis, or not)
                short, full = (lc, rc) if lw < rw else (rc, lc)
                assert full.startswith(short.rstrip("…").rstrip()), (engine, key, short, full)
    text = "\n".join(line for lines in remote.values() for line in lines)
    if k >= STOPPED_AT - SNAPS[0].taken_at:
        assert "stopped by you" in text and "connection refused (stopped" not in text
    if wide:
        assert remote_table["eng-0"]["tpj"][1] == f"{2.5 + k / 100:.2f}"

