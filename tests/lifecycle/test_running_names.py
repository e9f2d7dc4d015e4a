"""The commands that take an engine name resolve the engines of a running `enginedeck demo` (managed
process engines of a configuration held in memory), as `ps` lists them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

from console.commands.demo import FLAVOURS, demo_config
from console.lifecycle.manager import LifecycleManager
from console.model import Phase
from console.ports import free_port
from tests import procgroup


def _run(tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ENGINEDECK_CONFIG_DIR": str(tmp_path / "no-config")}  # no configuration file
    return procgroup.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, timeout=timeout,
                         env=env)


def test_status_logs_bench_and_down_resolve_the_demo_engines(tmp_path: Path) -> None:
    config = demo_config({f: free_port() for f in FLAVOURS})
    manager = LifecycleManager(config)
    try:
        manager.start("vllm-sim").result(timeout=60)
        assert manager.wait("vllm-sim", timeout=60).phase is Phase.READY
        pid = manager.status("vllm-sim").pid
        assert pid is not None

        ps = _run(tmp_path, "ps", "--json")
        assert "vllm-sim" in [r["name"] for r in json.loads(ps.stdout)["engines"]]

        status = _run(tmp_path, "status", "--json", "--engine", "vllm-sim", "--sample", "0")
        assert status.returncode == 0, status.stderr
        (engine,) = json.loads(status.stdout)["engines"]
        assert engine["name"] == "vllm-sim" and engine["reachable"] and engine["simulated"]
        assert engine["url"] == config.instance("vllm-sim").url

        logs = _run(tmp_path, "logs", "vllm-sim", "--tail", "50")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.strip()

        bench = _run(tmp_path, "bench", "--engine", "vllm-sim", "--concurrency", "1", "--num-prompts", "2",
                     "--input-len", "16", "--output-len", "4", "--no-gpu", "--json", str(tmp_path / "b.json"))
        assert bench.returncode == 0, bench.stderr
        assert json.loads((tmp_path / "b.json").read_text())

        down = _run(tmp_path, "down", "vllm-sim", "--yes")
        assert down.returncode == 0, down.stderr
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        manager.close()
        st = manager.status("vllm-sim")
        if st.pid is not None and psutil.pid_exists(st.pid):
            os.killpg(os.getpgid(st.pid), 9)


def test_an_unknown_name_is_still_one_line(tmp_path: Path) -> None:
    out = _run(tmp_path, "logs", "no-such-engine")
    assert out.returncode != 0 and "no-such-engine" in out.stderr and "Traceback" not in out.stderr
