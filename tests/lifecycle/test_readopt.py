"""An engine restarted or started outside this enginedeck (a headless `enginedeck restart` or `up`
from another shell) is watched again, not reported as a crash with an exit audit entry; and
every attempted action is audited, failed or not (issue 10 item 7). Real simulator processes;
the "other enginedeck" is a second LifecycleManager working through the same records."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from console.config import parse_config
from console.lifecycle.audit import AuditLog
from console.lifecycle.errors import LifecycleError
from console.lifecycle.state import InstanceState
from console.model import Phase
from console.ports import free_port
from tests.lifecycle.test_process_backend import config, make_manager, sim

__all__ = ["make_manager"]  # the fixture, used by name


def _phases(m: Any) -> tuple[list[InstanceState], threading.Lock]:
    seen: list[InstanceState] = []
    lock = threading.Lock()

    def on_state(st: InstanceState) -> None:
        with lock:
            seen.append(st)

    m.subscribe(on_state)
    return seen, lock


def _until(m: Any, name: str, ok: Any, timeout: float) -> InstanceState:
    """The instance's published state once ``ok`` holds for it, else the last one seen."""
    deadline = time.monotonic() + timeout
    st: InstanceState = m.status(name)
    while not ok(st) and time.monotonic() < deadline:
        time.sleep(0.05)
        st = m.status(name)
    return st


def test_a_restart_from_another_enginedeck_is_followed_not_a_crash(make_manager: Any, _state_dir: Path) -> None:
    port = free_port()
    cfg = config(r={"port": port, "command": sim(port)})
    console, headless = make_manager(cfg), make_manager(cfg)
    first = console.start("r").result(timeout=30).pid
    assert console.wait("r", timeout=60).phase is Phase.READY
    seen, lock = _phases(console)
    headless.restart("r").result(timeout=60)  # stops our process (SIGTERM), launches its own
    assert headless.wait("r", timeout=60).phase is Phase.READY
    new = headless.status("r").pid
    assert new and new != first
    # The console polls a ready engine every PROBE_INTERVAL_READY: it may not have seen the old
    # process end yet, so READY alone can still be the old run's.
    st = _until(console, "r", lambda s: s.phase is Phase.READY and s.pid == new, timeout=30)
    assert st.phase is Phase.READY and st.pid == new, st.one_line()
    with lock:
        states = list(seen)
    assert not [s for s in states if s.phase in (Phase.EXITED, Phase.FAILED)], [s.one_line() for s in states]
    assert any("watching for a restart" in s.detail for s in states)
    assert any("restarted outside this console" in s.detail for s in states)
    actions = [(e.action, e.result) for e in AuditLog(_state_dir / "audit.log").read()]
    assert actions == [("start", "ok"), ("restart-stop", "ok"), ("restart", "ok")]  # no "exit" from us
    # It is ours to stop again, through the other enginedeck's process record.
    assert console.stop("r").result(timeout=30).phase is Phase.EXITED


def test_an_engine_started_elsewhere_after_a_stop_is_watched_again(make_manager: Any, _state_dir: Path) -> None:
    port = free_port()
    cfg = config(r={"port": port, "command": sim(port)})
    console, headless = make_manager(cfg), make_manager(cfg)
    console.start("r").result(timeout=30)
    assert console.wait("r", timeout=60).phase is Phase.READY
    assert console.stop("r").result(timeout=30).ended == "stopped"
    assert console.readopt("r").result(timeout=10).phase is Phase.EXITED  # nothing runs: nothing found
    headless.start("r").result(timeout=30)
    assert headless.wait("r", timeout=60).phase is Phase.READY
    console.readopt("r").result(timeout=30)
    st = console.wait("r", until={Phase.READY}, timeout=30)
    assert st.phase is Phase.READY and st.pid == headless.status("r").pid


def test_an_outside_sigterm_without_restart_ends_as_stopped_outside(
    make_manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from console.lifecycle import watch

    monkeypatch.setattr(watch, "OUTSIDE_RESTART_GRACE", 1.0)
    port = free_port()
    m = make_manager(config(r={"port": port, "command": sim(port)}))
    pid = m.start("r").result(timeout=30).pid
    assert m.wait("r", timeout=60).phase is Phase.READY
    os.killpg(pid, signal.SIGTERM)
    st = m.wait("r", until={Phase.EXITED, Phase.FAILED}, timeout=30)
    assert (st.phase, st.ended) == (Phase.EXITED, "outside") and st.exit_code in (0, 143), st.one_line()


def test_every_attempted_action_is_audited(make_manager: Any, _state_dir: Path) -> None:
    watch_only = parse_config({"engines": {"w": {"profile": "vllm", "url": "http://127.0.0.1:9"}}}, "t.toml")
    port = free_port()
    m = make_manager(watch_only)
    with pytest.raises(LifecycleError, match="monitor-only"):
        m.start("w").result(timeout=10)
    p = make_manager(config(p={"port": port, "command": sim(port)}))
    with pytest.raises(LifecycleError, match="nothing to pull"):
        p.pull("p").result(timeout=10)
    entries = [(e.action, e.target, e.result) for e in AuditLog(_state_dir / "audit.log").read()]
    assert entries == [("start", "w", "refused"), ("pull", "p", "failed")]
