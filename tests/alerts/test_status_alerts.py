"""`status` evaluates the alert rules on a real simulator: the JSON document's ``alerts`` array
(n/a where the engine lacks the inputs), the text report's ALERT lines, exit 4 when a critical
alert fires, and a broken rules file as a one-line configuration error (exit 1)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from tests.sim.conftest import sim


@pytest.fixture(scope="module")
def vllm_sim() -> Iterator[str]:
    ready: list[str] = []
    stop = threading.Event()

    async def serve() -> None:
        async with sim("vllm") as server:
            ready.append(server.url)
            while not stop.is_set():
                await asyncio.sleep(0.05)

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    for _ in range(200):
        if ready:
            break
        stop.wait(0.05)
    assert ready, "simulator did not start"
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(timeout=10)


def test_status_json_has_an_alerts_array_with_na_where_inputs_are_missing(
        vllm_sim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path))
    code = main(["status", "--engine", f"vllm@{vllm_sim}", "--sample", "1", "--gpus", "none", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    alerts = {a["rule"]: a for a in doc["alerts"]}
    assert {"kv_saturated_queue_growing", "unreachable", "decode_stall", "gpu_xid"} <= set(alerts)
    assert alerts["kv_saturated_queue_growing"]["state"] == "ok"
    assert alerts["gpu_xid"]["state"] == "n/a"  # no GPU attributed: never "ok"
    a = alerts["queue_buildup"]
    assert a["engine"] == f"vllm@{vllm_sim}" and a["severity"] == "warning" and a["values"] == {"waiting": 0.0}
    assert a["condition"] == "waiting > 50 (clears at 40)" and a["runbook"]


def test_a_firing_critical_alert_makes_status_exit_4(
        vllm_sim: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts" / "page.toml").write_text(
        '[rules.always]\nsummary = "test page"\nseverity = "critical"\n'
        'when = [{ signal = "running", op = ">=", value = 0 }]\n')
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path))
    code = main(["status", "--engine", f"vllm@{vllm_sim}", "--sample", "1", "--gpus", "none"])
    out = capsys.readouterr().out
    assert code == 4
    assert f"ALERT firing critical always on vllm@{vllm_sim}: test page (running >= 0; now 0)" in out
    # The same rule as a warning: exit 0.
    (tmp_path / "alerts" / "page.toml").write_text('[rules.always]\nsummary = "test"\nseverity = "warning"\n'
                                                   'when = [{ signal = "running", op = ">=", value = 0 }]\n')
    assert main(["status", "--engine", f"vllm@{vllm_sim}", "--sample", "1", "--gpus", "none"]) == 0


def test_a_broken_rules_file_is_exit_1_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts" / "bad.toml").write_text("[rules.queue_buildup]\nseverity = 'loud'\n")
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path))
    code = main(["status", "--engine", "vllm@http://127.0.0.1:9", "--sample", "0", "--gpus", "none"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "bad.toml: rules.queue_buildup.severity" in err
