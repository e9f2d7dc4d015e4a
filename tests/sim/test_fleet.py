"""The fleet: child processes, synthetic load that moves the numbers, clean stop, no orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

import pytest

from console.sim.fleet import start_fleet


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_start_fleet_with_load_moves_numbers_and_stops_cleanly() -> None:
    fleet = start_fleet(["vllm", "llamacpp"], load=True, seed=3)
    try:
        assert [p for p, _, _ in fleet.endpoints] == ["vllm", "llamacpp"]
        pids = [pid for _, _, pid in fleet.endpoints]
        assert all(_alive(p) for p in pids)
        seen_running = {p: 0 for p, _, _ in fleet.endpoints}
        kv_values: set[float] = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            for profile, url, _ in fleet.endpoints:
                st = _get(f"{url}/_sim/state")
                seen_running[profile] = max(seen_running[profile], st["running"])
                if profile == "vllm":
                    kv_values.add(round(st["kv_usage"], 4))
            time.sleep(0.25)
        for profile, url, _ in fleet.endpoints:
            st = _get(f"{url}/_sim/state")
            assert st["counters"]["requests_finished"] > 0, profile
            assert st["counters"]["prefix_cache_hits"] > 0, profile  # shared system prompts hit
        assert all(v > 0 for v in seen_running.values())
        assert len(kv_values) > 3  # KV usage moves
    finally:
        fleet.stop()
    assert _wait_gone(pids, 5) == []


def test_cli_fleet_print_json_and_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "console", "sim", "--fleet", "--engines", "sglang,tgi",
                             "--no-load", "--print-json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert [x["profile"] for x in lines] == ["sglang", "tgi"]
        for x in lines:
            assert set(x) == {"profile", "url", "pid", "model"}
            assert _get(f"{x['url']}/v1/models")["data"][0]["id"] == x["model"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert _wait_gone([x["pid"] for x in lines], 5) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_cli_fleet_plain_lines_and_children_exit_when_the_parent_is_killed() -> None:
    import psutil

    proc = subprocess.Popen([sys.executable, "-m", "console", "sim", "--fleet", "--engines", "trtllm",
                             "--no-load"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    children: list[int] = []
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        profile, url = line.split("@", 1)
        assert profile == "trtllm" and url.startswith("http://127.0.0.1:")
        assert _get(f"{url}/version")["version"]
        children = [c.pid for c in psutil.Process(proc.pid).children()]
        assert len(children) == 1
        proc.kill()  # SIGKILL: the fleet parent gets no chance to clean up
        proc.wait()
        assert _wait_gone(children, 6) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in children:
            if _alive(pid):
                os.killpg(pid, signal.SIGKILL)
