"""The ``on_terminal_loss`` policy (console/lifecycle/terminal_loss.py) with real processes: done by
its deadline, every process group this console started ended (killed when it ignores SIGTERM), one
audit entry saying what became of each engine; and the setting in the config file."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from console.config import Config, ConsoleSettings, parse_config
from console.errors import ConfigError
from console.lifecycle.audit import AuditLog
from console.lifecycle.manager import LifecycleManager
from console.lifecycle.terminal_loss import AUDIT_ACTION, carry_out, last_resort
from console.ports import free_port
from tests import procgroup

IGNORES_TERM = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); "
                "time.sleep(60)")


def _config(port: int) -> Config:
    command = ["{python}", "-m", "console", "sim", "--engine", "vllm", "--host", "{host}", "--port", "{port}",
               "--model", "{served_name}", "--no-access-log"]
    return parse_config({"engines": {"sim": {"profile": "vllm", "managed": "process", "model": "m",
                                             "port": port, "command": command}}}, "test.toml")


@pytest.fixture
def manager(_state_dir: Path) -> Iterator[LifecycleManager]:
    m = LifecycleManager(_config(free_port()), audit=AuditLog(_state_dir / "audit.log"))
    try:
        yield m
    finally:
        from console.lifecycle.process_backend import cleanup_all

        cleanup_all(grace=1)
        m.close()


def _group(code: str) -> subprocess.Popen[str]:
    p = procgroup.popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "up"
    return p


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _entry(state: Path) -> Any:
    entries = [e for e in AuditLog(state / "audit.log").read() if e.action == AUDIT_ACTION]
    assert len(entries) == 1
    return entries[0]


def test_stop_ends_the_engines_and_the_extra_groups_by_the_deadline(manager: LifecycleManager,
                                                                    _state_dir: Path) -> None:
    manager.start("sim").result(timeout=30)
    st = manager.wait("sim", timeout=60)
    assert st.phase.value == "ready" and st.pid
    load = _group("import time; print('up', flush=True); time.sleep(60)")
    try:
        t0 = time.monotonic()
        carry_out(manager, "stop", "SIGHUP received", t0 + 3.0, also={load.pid: "synthetic load"})
        assert time.monotonic() - t0 < 3.5
        assert not _running(st.pid) and not _running(load.pid)
    finally:
        load.kill()
        load.wait()
    e = _entry(_state_dir)
    assert (e.target, e.result) == ("console", "ok")
    assert e.detail.startswith("SIGHUP received; policy stop")
    assert "synthetic load" in e.detail and "sim" in e.detail


def test_a_group_that_ignores_sigterm_is_killed_at_the_deadline(manager: LifecycleManager,
                                                                 _state_dir: Path) -> None:
    stubborn = _group(IGNORES_TERM)
    try:
        t0 = time.monotonic()
        carry_out(manager, "keep", "the terminal hung up", t0 + 0.8, also={stubborn.pid: "stubborn"})
        took = time.monotonic() - t0
        stubborn.wait(timeout=5)
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()
    assert stubborn.returncode == -signal.SIGKILL
    assert 0.7 <= took < 2.0
    e = _entry(_state_dir)
    assert "policy keep" in e.detail and "killed at the deadline: stubborn" in e.detail


def test_last_resort_finishes_a_policy_cut_short_by_the_hard_exit(manager: LifecycleManager,
                                                                   _state_dir: Path) -> None:
    stubborn = _group(IGNORES_TERM)
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(
        carry_out(manager, "stop", "SIGHUP received", time.monotonic() + 30, also={stubborn.pid: "stubborn"})))
    try:
        worker.start()
        time.sleep(0.5)  # the policy waits for a group that ignores SIGTERM...
        assert worker.is_alive() and stubborn.poll() is None
        last_resort()  # ...when the hard exit comes
        stubborn.wait(timeout=5)
        worker.join(timeout=5)
    finally:
        if stubborn.poll() is None:
            stubborn.kill()
            stubborn.wait()
    assert stubborn.returncode == -signal.SIGKILL
    assert result == [None]  # the entry was written once, by last_resort
    e = _entry(_state_dir)
    assert e.detail == "SIGHUP received; policy stop; cut short at the deadline, killed: stubborn"


def test_nothing_running_is_said_so(manager: LifecycleManager, _state_dir: Path) -> None:
    carry_out(manager, "stop", "SIGTERM received", time.monotonic() + 1.0)
    e = _entry(_state_dir)
    assert e.result == "ok" and e.detail.endswith("no managed engine was running")


def test_the_setting_in_the_config_file() -> None:
    assert ConsoleSettings().on_terminal_loss == "keep"
    cfg = parse_config({"console": {"on_terminal_loss": "stop"}}, "c.toml")
    assert cfg.console.on_terminal_loss == "stop"
    with pytest.raises(ConfigError, match="on_terminal_loss"):
        parse_config({"console": {"on_terminal_loss": "pause"}}, "c.toml")


def test_an_engine_ended_with_the_console_is_a_stop_not_a_failed_start(manager: LifecycleManager,
                                                                      _state_dir: Path) -> None:
    """The console ends its own engines' process groups at a lost terminal; while one still loads,
    its exit used to be audited as "failed: exited during loading with exit code 0"."""
    manager.start("sim").result(timeout=30)  # not waited for: still starting or loading
    carry_out(manager, "keep", "the terminal hung up", time.monotonic() + 3.0)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and manager.status("sim").phase.value not in ("exited", "failed"):
        time.sleep(0.05)
    st = manager.status("sim")
    assert (st.phase.value, st.ended) == ("exited", "stopped"), st.one_line()
    exits = [e for e in AuditLog(_state_dir / "audit.log").read() if e.action == "exit"]
    assert all(e.result != "failed" for e in exits), exits
