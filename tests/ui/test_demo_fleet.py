"""`enginedeck demo`'s fleet: four simulated flavours, two GPUs each, and nothing left after stop."""

from __future__ import annotations

import psutil
import pytest

pytest.importorskip("console.sim.fleet")

from console.commands.demo import FLAVOURS, SimFleet


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


@pytest.mark.slow
def test_demo_fleet_starts_labelled_instances_and_stops_everything() -> None:
    fleet = SimFleet.start(timeout=60)
    try:
        leader = psutil.Process(fleet.proc.pid)
        started = [fleet.proc.pid, *(c.pid for c in leader.children(recursive=True))]
        instances = fleet.instances()
        assert sorted(i.profile.name for i in instances) == sorted(FLAVOURS)
        assert all(i.config.simulated for i in instances)
        assert sorted(g for i in instances for g in i.gpus) == list(range(8))
        assert all(len(i.gpus) == 2 and i.pids for i in instances)
        assert len(started) >= 1 + len(FLAVOURS)
    finally:
        fleet.stop()
    assert _alive(started) == []
