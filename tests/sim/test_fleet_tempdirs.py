"""`sim --fleet` leaves no temporary folder behind when it stops (issue 10 item 11): its log folder goes
on SIGTERM and Ctrl-C; only a fleet stopped because an engine died keeps it, and says where."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.sim.fleet import start_fleet


def _fleet_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("enginedeck-fleet-*"))


def _cli(tmp: Path, engines: str) -> subprocess.Popen[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-m", "console", "sim", "--fleet", "--engines", engines, "--no-load"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_cli_fleet_removes_its_temporary_folder(tmp_path: Path, sig: signal.Signals) -> None:
    proc = _cli(tmp_path, "vllm")
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("vllm@http://")
        assert len(_fleet_dirs(tmp_path)) == 1  # it exists while the fleet runs
        proc.send_signal(sig)
        assert proc.wait(20) == 0
        assert _fleet_dirs(tmp_path) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_fleet_keeps_the_log_of_an_engine_that_died(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "tgi")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("tgi@http://")
        import psutil

        (child,) = psutil.Process(proc.pid).children()
        os.killpg(child.pid, signal.SIGKILL)
        assert proc.wait(20) == 1
        assert proc.stderr is not None
        err = proc.stderr.read()
        (kept,) = _fleet_dirs(tmp_path)
        assert f"log kept: {kept / 'tgi.log'}" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_start_fleet_stop_removes_the_log_folder() -> None:
    fleet = start_fleet(["sglang"], load=False)
    folder = fleet.log_dir
    assert folder.is_dir()
    fleet.stop()
    assert not folder.exists()
