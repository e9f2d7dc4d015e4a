"""`ps` probes an engine the configuration knows with that engine's API key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from console.ports import free_port
from tests import procgroup

ENGINEDECK = [sys.executable, "-m", "console"]
KEY = "ps-probe-key-5b7e21"


def _ps_row(conf: Path, pid: int, env: dict[str, str]) -> dict[str, str] | None:
    out = procgroup.run([*ENGINEDECK, "ps", "--json", "--config", str(conf)], capture_output=True, text=True,
                        timeout=60, env=env)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert KEY not in out.stdout
    rows: list[dict[str, str]] = json.loads(out.stdout)["engines"]
    return next((r for r in rows if r["id"] == f"pid {pid}"), None)


def test_ps_probes_a_keyed_engine_with_its_key(tmp_path: Path) -> None:
    port = free_port()
    sim = subprocess.Popen([*ENGINEDECK, "sim", "--engine", "vllm", "--host", "127.0.0.1", "--port", str(port),
                            "--api-key", KEY], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        keyed = tmp_path / "keyed.toml"
        keyed.write_text(f'[engines.watched]\nprofile = "vllm"\nurl = "http://localhost:{port}"\n'
                         'api_key_env = "PS_KEY"\n')  # fmt: skip
        env = {**os.environ, "PS_KEY": KEY}
        deadline = time.monotonic() + 30
        row = None
        while time.monotonic() < deadline and (row is None or row["phase"] not in ("ready", "loading")):
            row = _ps_row(keyed, sim.pid, env)
            time.sleep(0.2)
        assert row is not None and row["phase"] == "ready", row
        # Without the key the same engine answers 401: that is what ps said before it used the key.
        plain = tmp_path / "plain.toml"
        plain.write_text(f'[engines.watched]\nprofile = "vllm"\nurl = "http://localhost:{port}"\n')
        row = _ps_row(plain, sim.pid, env)
        assert row is not None and row["phase"] == "answering (401: API key needed)", row
    finally:
        sim.terminate()
        sim.wait(timeout=30)
