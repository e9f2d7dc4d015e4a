"""`up` and `restart` share one path: a restart that times out on a process engine stops the engine
and says so, as `up` does (before, restart left it to the exit cleanup and said nothing of it)."""

from __future__ import annotations

import json
from pathlib import Path

import psutil

from console.lifecycle.process_backend import read_record
from console.ports import free_port
from tests import procgroup
from tests.lifecycle.test_commands import ENGINEDECK, write_config


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_up_and_restart_time_out_alike_on_a_process_engine(tmp_path: Path) -> None:
    conf = write_config(tmp_path / "slow.toml", free_port(), "--load-time", "30", name="slow")
    for command in (["up", "slow"], ["restart", "slow", "--yes"]):
        proc = procgroup.run([*ENGINEDECK, *command, "--config", str(conf), "--timeout", "2"], capture_output=True,
                             text=True, timeout=90)  # fmt: skip
        assert proc.returncode == 3, (command, proc.stderr)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("enginedeck: slow: still loading") and "after 2 s" in last, (command, last)
        assert last.endswith("; stopped it (process engines end with enginedeck)"), (command, last)
        assert read_record("slow") is None, command  # stopped, not just left to the exit cleanup
        audit = [json.loads(x) for x in (Path(tmp_path / "state") / "audit.log").read_text().splitlines()]
        assert (audit[-1]["action"], audit[-1]["result"]) == ("stop", "ok"), (command, audit[-1])
        started = [e for e in audit if e["action"] in ("start", "restart") and e["result"] == "ok"][-1]
        pid = int(started["detail"].split()[1])  # "pid N on HOST:PORT: ..."
        assert _gone(pid), command
