"""Engine control as the console uses it, against a real process-managed simulator: a restart is
"done" only when the engine is ready, and the console shows its phases without a red
"unreachable" in between (issue 10 item 6)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from console.config import Config, parse_config
from console.lifecycle.manager import LifecycleManager
from console.model import EngineSnapshot, FleetSnapshot, Freshness, LifecycleView, Phase, SourceState
from console.ports import free_port
from console.telemetry.hub import Hub, merge_lifecycle
from console.ui.control_lifecycle import ManagerControl

T0 = 1_700_000_000.0


def _config(port: int, *extra: str) -> Config:
    command = ["{python}", "-m", "console", "sim", "--engine", "vllm", "--host", "{host}", "--port", "{port}",
               "--model", "{served_name}", "--no-access-log", *extra]
    return parse_config({"engines": {"r": {"profile": "vllm", "managed": "process", "model": "m", "port": port,
                                           "command": command, "timeouts": {"stopping": 5}}}}, "test.toml")


def test_a_failure_from_before_the_lifecycle_said_ready_is_old_news() -> None:
    refused = Freshness(SourceState.STALE, updated_at=T0 - 5, stale_since=T0 - 3, reason="connection refused")
    e = EngineSnapshot(name="r", profile="vllm", url="http://127.0.0.1:1", taken_at=T0, phase=Phase.UNREACHABLE,
                       reachable=False, health_freshness=refused, metrics_freshness=refused)
    ready_after = merge_lifecycle(e, LifecycleView(Phase.READY, "1 model listed", since=T0 - 1))
    assert ready_after.phase is Phase.LOADING and "first metrics sample" in ready_after.health_detail
    # Ready long before the failure began: that is news (a crash the lifecycle has not seen yet).
    crashed = merge_lifecycle(e, LifecycleView(Phase.READY, "1 model listed", since=T0 - 60))
    assert crashed.phase is Phase.UNREACHABLE
    stopping = merge_lifecycle(e, LifecycleView(Phase.STOPPING, "SIGTERM sent; SIGKILL in 4 s", countdown=4))
    assert stopping.phase is Phase.STOPPING and stopping.lifecycle is not None


def test_restart_is_done_when_ready_and_never_unreachable_between() -> None:
    port = free_port()
    cfg = _config(port, "--load-time", "1.5")
    manager = LifecycleManager(cfg)
    ctl = ManagerControl(manager, cfg)
    hub = Hub(list(cfg.instances), refresh=1.0, gpu_source="none", lifecycle_phase=ctl.phase_of,
              pids_of=ctl.pids_of)
    seen: list[tuple[Phase, str]] = []
    lock = threading.Lock()

    def on_snapshot(s: FleetSnapshot) -> None:
        with lock:
            seen.append((s.engines[0].phase, s.engines[0].health_detail))

    try:
        ctl.start("r")
        assert manager.status("r").phase is Phase.READY  # start, too, is done only when ready
        hub.subscribe(on_snapshot)
        hub.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not hub.latest().engines[0].live:
            time.sleep(0.1)
        assert hub.latest().engines[0].live
        with lock:
            seen.clear()
        ctl.restart("r")
        assert manager.status("r").phase is Phase.READY
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not hub.latest().engines[0].live:
            time.sleep(0.1)
        assert hub.latest().engines[0].live
        with lock:
            phases = [p for p, _ in seen]
        assert Phase.LOADING in phases, seen  # (the stop itself may fall between two snapshots)
        assert Phase.UNREACHABLE not in phases and Phase.UNKNOWN not in phases, seen
    finally:
        hub.stop()
        if manager.status("r").running:
            manager.stop("r", timeout=2).result(timeout=30)
        ctl.close()


def test_console_picks_up_an_engine_started_from_another_shell() -> None:
    port = free_port()
    cfg = _config(port)
    console, headless = LifecycleManager(cfg), LifecycleManager(cfg)
    ctl = ManagerControl(console, cfg)
    try:
        ctl.start("r")
        ctl.stop("r")
        view = ctl.phase_of("r")
        assert view is not None and view.ended == "stopped"
        headless.start("r").result(timeout=30)
        assert headless.wait("r", timeout=60).phase is Phase.READY
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the hub asks every refresh; a look goes out every few seconds
            view = ctl.phase_of("r")
            if view is not None and view.phase is Phase.READY:
                break
            time.sleep(0.3)
        assert view is not None and view.phase is Phase.READY and not view.ended
        assert console.status("r").pid == headless.status("r").pid
    finally:
        if headless.status("r").running:
            headless.stop("r", timeout=2).result(timeout=30)
        headless.close()
        ctl.close()


def test_terminal_loss_applies_the_policy_through_engine_control(tmp_path: Path) -> None:
    from console.lifecycle.audit import AuditLog
    from console.lifecycle.terminal_loss import AUDIT_ACTION

    cfg = _config(free_port())
    audit = AuditLog(tmp_path / "audit.log")
    ctl = ManagerControl(LifecycleManager(cfg, audit=audit), cfg)
    try:
        ctl.on_terminal_loss("stop", "SIGHUP received", time.monotonic() + 1.0)
    finally:
        ctl.close()
    (entry,) = [e for e in audit.read() if e.action == AUDIT_ACTION]
    assert entry.detail.startswith("SIGHUP received; policy stop")
    assert entry.detail.endswith("no managed engine was running")
