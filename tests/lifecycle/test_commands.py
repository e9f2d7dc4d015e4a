"""The headless commands as a user runs them, with process engines (the simulator)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from console.cli import main as cli_main
from console.ports import free_port
from tests import procgroup

ENGINEDECK = [sys.executable, "-m", "console"]


def write_config(path: Path, port: int, *extra: str, name: str = "demo", **over: Any) -> Path:
    cmd = [
        "{python}",
        "-m",
        "console",
        "sim",
        "--engine",
        "vllm",
        "--host",
        "{host}",
        "--port",
        "{port}",
        "--model",
        "{served_name}",
        *extra,
    ]
    lines = [
        f"[engines.{name}]",
        'profile = "vllm"',
        'managed = "process"',
        'model = "demo-model"',
        f"port = {port}",
        f"command = {json.dumps(cmd)}",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in over.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return procgroup.run([*ENGINEDECK, *args], capture_output=True, text=True, timeout=timeout, env=os.environ.copy())


def start_up(conf: Path, name: str = "demo") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*ENGINEDECK, "up", name, "--config", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def wait_line(proc: subprocess.Popen[str], needle: str, timeout: float = 60) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if needle in line:
            return line
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"{needle!r} not printed; stderr: {proc.stderr.read() if proc.stderr else ''}")


def pid_of(conf: Path, name: str = "demo") -> int:
    out = run("ps", "--json", "--config", str(conf))
    row = next(r for r in json.loads(out.stdout)["engines"] if r["name"] == name)
    return int(row["id"].split()[1])


def test_up_prints_ready_at_once_on_a_pipe(tmp_path: Path) -> None:
    """A script reading `up`'s stdout from a pipe gets the ready line while the engine runs on. Without
    PYTHONUNBUFFERED (as on a fresh machine) Python buffers a pipe until exit, so the line must be flushed."""
    conf = write_config(tmp_path / "config.toml", free_port())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    up = subprocess.Popen([*ENGINEDECK, "up", "demo", "--config", str(conf)], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env=env)  # fmt: skip
    try:
        assert up.stdout is not None
        os.set_blocking(up.stdout.fileno(), False)
        out = b""
        deadline = time.monotonic() + 60  # a guard against waiting forever, not a bound on speed
        while b"ready at" not in out and up.poll() is None and time.monotonic() < deadline:
            select.select([up.stdout], [], [], 1.0)
            out += up.stdout.read() or b""
        assert b"demo ready at" in out, f"no ready line on the pipe while up runs (got {out!r})"
    finally:
        up.send_signal(signal.SIGINT)
        up.communicate(timeout=60)


def test_up_ps_logs_down_with_a_process_engine(tmp_path: Path) -> None:
    port = free_port()
    conf = write_config(tmp_path / "c.toml", port, "--load-time", "0.5")
    up = start_up(conf)
    try:
        assert f"demo ready at http://127.0.0.1:{port}" in wait_line(up, "ready at")
        ps = run("ps", "--json", "--config", str(conf))
        assert ps.returncode == 0
        row = next(r for r in json.loads(ps.stdout)["engines"] if r["name"] == "demo")
        assert (row["backend"], row["phase"], row["managed"]) == ("process", "ready", True)
        engine_pid = int(row["id"].split()[1])
        logs = run("logs", "demo", "--config", str(conf), "--tail", "200")
        assert logs.returncode == 0 and "Starting vLLM API server" in logs.stdout
        assert run("down", "demo", "--config", str(conf)).returncode == 1  # no terminal, no --yes
        down = run("down", "demo", "--config", str(conf), "--yes")
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0  # the foreground `up` saw its engine stopped from outside
        assert not psutil.pid_exists(engine_pid) or psutil.Process(engine_pid).status() == psutil.STATUS_ZOMBIE
        audit = [
            json.loads(x) for x in (Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log").read_text().splitlines()
        ]
        actions = [(a["action"], a["result"]) for a in audit]
        # The `up` process may log the engine's exit before `down` logs its stop: both are there.
        assert actions[0] == ("start", "ok") and ("stop", "ok") in actions
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_foreground_up_stops_its_engine_on_ctrl_c_or_sigterm(tmp_path: Path, sig: signal.Signals) -> None:
    conf = write_config(tmp_path / "c.toml", free_port())
    up = start_up(conf)
    try:
        wait_line(up, "ready at")
        engine_pid = pid_of(conf)
        up.send_signal(sig)
        assert up.wait(timeout=60) in (0, 128 + sig)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(engine_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not psutil.pid_exists(engine_pid)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_up_errors_are_one_line_with_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = write_config(tmp_path / "c.toml", free_port())
    assert cli_main(["up", "nope", "--config", str(conf)]) == 1
    assert capsys.readouterr().err.strip() == "enginedeck: no engine named 'nope' (known: demo); or give PROFILE@URL"
    assert cli_main(["up", "demo", "--config", str(tmp_path / "missing.toml")]) == 1
    assert "configuration file not found" in capsys.readouterr().err

    bad = write_config(tmp_path / "bad.toml", free_port(), "--engine", "nosuch", name="bad")
    assert cli_main(["up", "bad", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("enginedeck: bad: start failed: exited during ")
    assert "invalid choice: 'nosuch'" in err[-1]
    assert any(line.startswith("  | ") for line in err)  # the last log lines above the error

    slow = write_config(tmp_path / "slow.toml", free_port(), "--load-time", "30", name="slow")
    proc = procgroup.run(
        [*ENGINEDECK, "up", "slow", "--config", str(slow), "--timeout", "2"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3
    assert "slow: still loading" in proc.stderr and "after 2 s" in proc.stderr


def test_ps_lists_engines_enginedeck_did_not_start(tmp_path: Path) -> None:
    port = free_port()
    sim = subprocess.Popen(
        [
            *ENGINEDECK,
            "sim",
            "--engine",
            "sglang",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--api-key",
            "topsecret-key",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        row = None
        while time.monotonic() < deadline and row is None:
            out = run("ps", "--json")
            row = next((r for r in json.loads(out.stdout)["engines"] if r["id"] == f"pid {sim.pid}"), None)
            time.sleep(0.2)
        assert row is not None
        assert row["monitor_only"] and not row["managed"] and row["profile"] == "sglang"
        assert row["address"] == f"127.0.0.1:{port}"
        assert "topsecret-key" not in out.stdout and "--api-key ****" in row["image"]
    finally:
        sim.terminate()
        sim.wait(timeout=30)


def test_gpu_release_is_checked_and_reported(tmp_path: Path) -> None:
    from console.config import load_config
    from console.lifecycle.manager import LifecycleManager
    from console.model import Phase

    conf = write_config(tmp_path / "c.toml", free_port(), gpus=[0])
    m = LifecycleManager(load_config(conf))
    try:
        m.start("demo").result(timeout=30)
        assert m.wait("demo", timeout=60).phase is Phase.READY
        st = m.stop("demo").result(timeout=120)
        assert st.phase is Phase.EXITED
        # Here NVML is either missing (said so) or shows no process of this engine.
        assert "GPU release not verified (NVML" in st.detail or st.detail.endswith("GPU memory released"), st.detail
    finally:
        m.close()
