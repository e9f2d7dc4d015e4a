"""`enginedeck demo`'s fleet: four simulated flavours run as managed processes, two GPUs each;
one can be killed, stopped and started again while the others stay up; nothing is left after stop."""

from __future__ import annotations

import os
import signal
import time
import urllib.request

import psutil
import pytest

from console.commands.demo import FLAVOURS, DemoFleet


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def _up(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/health", timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_demo_fleet_is_managed_and_leaves_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path))
    fleet = DemoFleet.start(timeout=60)
    started: list[int] = []
    try:
        instances = fleet.instances()
        assert sorted(i.profile.name for i in instances) == sorted(FLAVOURS)
        assert all(i.config.simulated and i.managed for i in instances)
        assert sorted(g for i in instances for g in i.gpus) == list(range(8))
        assert all(len(i.gpus) == 2 and i.pids for i in instances)
        assert fleet.load_proc is not None and fleet.gone() is None
        started = [p for i in instances for p in i.pids] + [fleet.load_proc.pid]
        # Killing one engine leaves the others (and the load) running.
        victim, others = instances[0], instances[1:]
        os.kill(victim.pids[0], signal.SIGKILL)
        time.sleep(1.5)
        assert not _up(victim.url)
        assert all(_up(i.url) for i in others) and fleet.gone() is None
        # The console's start action brings it back through the process backend.
        fleet.manager.start(victim.name).result(timeout=30)
        st = fleet.manager.wait(victim.name, timeout=30)
        assert st.phase.value == "ready" and _up(victim.url)
        started += list(fleet.pids_of(victim.name))
        fleet.manager.stop(others[0].name).result(timeout=30)
        assert not _up(others[0].url)
    finally:
        fleet.stop()
    time.sleep(0.5)
    assert _alive(started) == []
