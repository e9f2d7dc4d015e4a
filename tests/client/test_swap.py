"""`bench --swap`: single-GPU A/B with managed engines; only the engine under test runs."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import psutil
import pytest

from console.ports import free_port
from tests import procgroup


def _engine(flavour: str, port: int) -> str:
    return f"""
[engines.{flavour}-swap]
profile = "{flavour}"
managed = "process"
model = "Qwen/Qwen3-0.6B"
port = {port}
command = ["{{python}}", "-m", "console", "sim", "--engine", "{flavour}", "--port", "{{port}}", "--model", "{{model}}"]
"""


def _sims(ports: dict[str, int]) -> list[psutil.Process]:
    """The simulators serving this test's ports (another test run on the machine has its own)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        args = p.info["cmdline"] or []
        cmd = " ".join(args)
        port = args[args.index("--port") + 1] if "--port" in args[:-1] else None
        if "console sim --engine" in cmd and port in {str(x) for x in ports.values()}:
            out.append(p)
    return out


@pytest.mark.slow
def test_bench_swap_runs_engines_one_at_a_time(tmp_path: Path) -> None:
    ports = {"vllm": free_port(), "sglang": free_port()}
    conf = tmp_path / "config.toml"
    conf.write_text(_engine("vllm", ports["vllm"]) + _engine("sglang", ports["sglang"]))
    out = tmp_path / "swap.json"
    env_state = {"ENGINEDECK_STATE_DIR": str(tmp_path / "state")}
    before = {p.pid for p in _sims(ports)}
    t0 = time.monotonic()
    r = procgroup.run(
        [sys.executable, "-m", "console", "bench", "--config", str(conf), "--engine", "vllm-swap",
         "--engine", "sglang-swap", "--swap", "--concurrency", "2", "--num-prompts", "8", "--input-len", "32",
         "--output-len", "8", "--repeats", "2", "--gpus", "none", "--json", str(out)],
        capture_output=True, text=True, timeout=240, env={**__import__("os").environ, **env_state},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(out.read_text())
    swaps = doc["swaps"]
    # ABBA with 2 repeats: A, B, B, A. Each activation stopped whichever other engine was running.
    assert [s["engine"] for s in swaps] == ["vllm-swap", "sglang-swap", "sglang-swap", "vllm-swap"]
    assert swaps[0]["stopped"] == []
    assert [x["engine"] for x in swaps[1]["stopped"]] == ["vllm-swap"]
    assert swaps[2]["stopped"] == []  # B was already the one running
    assert [x["engine"] for x in swaps[3]["stopped"]] == ["sglang-swap"]
    assert all(x["phase"] == "exited" for s in swaps for x in s["stopped"])
    for run in doc["runs"]:
        assert run["levels"][0]["requests"]["completed"] == 8
    assert "swap: stopping the others, starting sglang-swap" in r.stderr
    # The bench's engines end with it: none of its simulators is left.
    time.sleep(0.5)
    since = time.time() - (time.monotonic() - t0) - 5
    left = [p for p in _sims(ports) if p.pid not in before and p.create_time() > since]
    assert left == []
