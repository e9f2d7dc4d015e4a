"""A managed container restarted outside enginedeck (docker stop + docker start): the console
watches the same container again, no crash and no exit audit entry (issue 10 item 7). Real
daemon and image."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from console.lifecycle.state import InstanceState
from console.model import Phase
from tests.integration.test_lifecycle_docker import SUFFIX, cfg, manager, ours, sim_engine, state_dir

pytestmark = pytest.mark.docker
__all__ = ["manager", "state_dir"]  # fixtures, used by name


def test_docker_stop_and_start_outside_is_followed_not_a_crash(docker_client: Any, sim_image: str, free_port: Any,
                                                manager: Any) -> None:
    name, port = f"readopt-{SUFFIX}", free_port()
    m = manager(cfg(**{name: sim_engine(sim_image, port)}))
    st = m.start(name).result(timeout=60)
    assert m.wait(name, timeout=60).phase is Phase.READY
    cid = st.container_id
    seen: list[InstanceState] = []
    lock = threading.Lock()

    def on_state(s: InstanceState) -> None:
        with lock:
            seen.append(s)

    m.subscribe(on_state)
    (c,) = ours(docker_client, name)
    # A slow restart from outside (docker stop, then docker start): the supervisor (every 2 s)
    # sees the container down; it is watched for a restart, found running again and followed.
    c.stop(timeout=5)
    time.sleep(2.5)
    c.start()
    st = m.wait(name, until={Phase.READY}, timeout=60)
    assert st.phase is Phase.READY and st.container_id == cid
    with lock:
        states = list(seen)
    assert not [s for s in states if s.phase in (Phase.EXITED, Phase.FAILED)], [s.one_line() for s in states]
    assert [e.action for e in m.audit.read()] == ["start"]
    assert m.stop(name).result(timeout=60).phase is Phase.EXITED
