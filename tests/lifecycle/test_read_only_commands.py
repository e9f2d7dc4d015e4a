"""Read-only mode binds the headless lifecycle commands too; `restart` confirms like `down`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.lifecycle.process_backend import read_record
from console.ports import free_port
from tests.lifecycle.test_commands import wait_line, write_config

ENGINEDECK = [sys.executable, "-m", "console"]
# An engine that ends at once: were it started, the command would fail with exit 2, not 1.
QUICK_EXIT = '["{python}", "-c", "import sys; sys.exit(3)"]'


def _config(path: Path, *, read_only: bool) -> Path:
    head = "[console]\nread_only = true\n\n" if read_only else ""
    path.write_text(head + '[engines.e]\nprofile = "vllm"\nmanaged = "process"\nmodel = "m"\n'
                    f"port = {free_port()}\ncommand = {QUICK_EXIT}\n")  # fmt: skip
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENGINEDECK, *args], capture_output=True, text=True, timeout=60, env=os.environ.copy(),
                          stdin=subprocess.DEVNULL)  # fmt: skip


@pytest.mark.parametrize("how", ["config", "flag"])
@pytest.mark.parametrize("command", [["up"], ["down", "--yes"], ["restart", "--yes"], ["pull"], ["adopt", "--yes"]])
def test_read_only_refuses_every_mutating_command(tmp_path: Path, command: list[str], how: str) -> None:
    conf = _config(tmp_path / "c.toml", read_only=how == "config")
    flag = ["--read-only"] if how == "flag" else []
    r = _run(command[0], "e", "--config", str(conf), *command[1:], *flag)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().count("\n") == 0 and "read-only" in r.stderr, r.stderr
    assert read_record("e") is None  # nothing was started
    audit = Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log"
    entries = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(x["action"], x["target"], x["result"]) for x in entries] == [(command[0], "e", "refused")]


def test_restart_asks_like_down(tmp_path: Path) -> None:
    conf = _config(tmp_path / "c.toml", read_only=False)
    r = _run("restart", "e", "--config", str(conf))
    assert r.returncode == 1 and "add --yes" in r.stderr, r.stdout + r.stderr
    assert not (Path(os.environ["ENGINEDECK_STATE_DIR"]) / "audit.log").exists()  # nothing was attempted
    # With --yes it restarts (a process engine then stays in the foreground until Ctrl-C).
    conf = write_config(tmp_path / "sim.toml", free_port(), name="e")
    proc = subprocess.Popen([*ENGINEDECK, "restart", "e", "--config", str(conf), "--yes"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_line(proc, "ready at")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
