"""Refusals and a lost Docker daemon are decided by exception type, not by an error's wording:
every refused action (monitor-only engine, another action in progress) is audited as refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import requests.exceptions

from console.config import parse_config
from console.lifecycle.audit import AuditLog
from console.lifecycle.errors import ActionRefused, DockerUnreachable, LifecycleError, translate_docker_error
from console.lifecycle.manager import LifecycleManager
from console.model import Phase
from console.ports import free_port
from tests.lifecycle.test_process_backend import config, make_manager, sim

__all__ = ["make_manager"]  # the fixture, used by name


def test_every_action_on_a_monitor_only_engine_is_refused(_state_dir: Path) -> None:
    cfg = parse_config({"engines": {"watched": {"profile": "vllm", "url": f"http://127.0.0.1:{free_port()}"}}}, "t")
    m = LifecycleManager(cfg, audit=AuditLog(_state_dir / "audit.log"))
    try:
        for action in (m.start, m.stop, m.restart, m.remove):
            with pytest.raises(ActionRefused, match="monitor-only"):
                action("watched").result(timeout=30)
        assert [(e.action, e.result) for e in m.audit.read()] == [
            ("start", "refused"), ("stop", "refused"), ("restart", "refused"), ("remove", "refused")]  # fmt: skip
    finally:
        m.close()


def test_a_second_action_while_one_runs_is_refused(make_manager: Any) -> None:
    port = free_port()
    m = make_manager(config(busy={"port": port, "command": sim(port, "--load-time", "3")}))
    m.start("busy").result(timeout=30)
    stopping = m.stop("busy", timeout=10)
    m.wait("busy", until={Phase.STOPPING}, timeout=30)
    with pytest.raises(ActionRefused, match="another action is in progress"):
        m.start("busy").result(timeout=30)
    stopping.result(timeout=60)
    assert ("start", "refused") in [(e.action, e.result) for e in m.audit.read()]


def test_an_unreachable_daemon_is_its_own_error_type() -> None:
    err = translate_docker_error(requests.exceptions.ConnectionError("Connection aborted"))
    assert isinstance(err, DockerUnreachable) and "cannot connect to the Docker daemon" in err.message
    other = translate_docker_error(RuntimeError("boom"))
    assert isinstance(other, LifecycleError) and not isinstance(other, DockerUnreachable)
