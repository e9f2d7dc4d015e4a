"""End to end: the console on the real Hub over real simulated engines on 127.0.0.1.

A real number must reach the engine's row; killing one simulator must turn its row unreachable
with the reason within two refresh periods (plus slack for a loaded CI box) while the other row
stays live.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from console.config import parse_engine_ref
from console.ports import free_port
from console.telemetry.hub import Hub
from console.ui.app import DeckApp, UiOptions
from console.ui.widgets.line import Line
from console.ui.widgets.row_table import RowTable
from tests import procgroup

REFRESH = 1.0
SLACK = 1.5  # scheduling slack on a shared 2-core CI machine




@contextlib.contextmanager
def _simulator(engine: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    proc = procgroup.popen(
        [sys.executable, "-m", "console", "sim", "--engine", engine, "--host", "127.0.0.1", "--port", str(port),
         "--load-time", "0", "--no-access-log"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _cell(app: DeckApp, row: str, col: str) -> str:
    return str(app.screen.query_one("#engines", RowTable).get_cell(row, col))


@pytest.mark.slow
async def test_live_number_then_unreachable_with_reason() -> None:
    with _simulator("vllm") as (vllm, vllm_url), _simulator("sglang") as (_sg, sg_url):
        a = parse_engine_ref(f"vllm@{vllm_url}")
        b = parse_engine_ref(f"sglang@{sg_url}")
        hub = Hub([a, b], refresh=REFRESH, gpu_source="none")
        hub.start()
        try:
            app = DeckApp(hub, options=UiOptions(), profiles={a.profile.name: a.profile, b.profile.name: b.profile})
            async with app.run_test(size=(160, 48)) as pilot:
                # A real value from the engine's /metrics reaches the row (KV usage, e.g. "0%").
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    await pilot.pause(0.2)
                    if _cell(app, a.name, "kv").endswith("%") and _cell(app, b.name, "phase") == "● ready":
                        break
                assert _cell(app, a.name, "kv").endswith("%"), _cell(app, a.name, "kv")
                assert _cell(app, a.name, "phase") == "● ready"

                os.killpg(vllm.pid, signal.SIGKILL)
                vllm.wait(timeout=10)
                killed = time.monotonic()
                while time.monotonic() - killed < 2 * REFRESH + SLACK + 5:
                    await pilot.pause(0.1)
                    if "unreachable" in _cell(app, a.name, "phase"):
                        break
                took = time.monotonic() - killed
                print(f"row unreachable {took:.2f} s after the kill")
                assert "unreachable" in _cell(app, a.name, "phase")
                assert took <= 2 * REFRESH + SLACK, f"row turned unreachable after {took:.1f} s"
                attention = str(app.screen.query_one("#attention", Line).content)
                assert a.name.removeprefix("vllm@http://") in attention
                assert "unreachable" in attention and ("connect" in attention or "refused" in attention)
                # The other engine stays live.
                await pilot.pause(REFRESH)
                assert _cell(app, b.name, "phase") == "● ready"
                sg = hub.latest().engine(b.name)
                assert sg is not None and not sg.metrics_freshness.stale
        finally:
            hub.stop()
