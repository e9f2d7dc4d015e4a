"""Work per engine that must not grow with the number of engines the hub watches.

Against real simulator processes: each engine scrapes over its own connection pool (a shared pool
is scanned whole on every request, so its cost per scrape grows with the engines), a scrape does
not retry a failed import each time, and one host round lists the process table once, not once per
engine.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from types import ModuleType

import psutil
import pytest

from console.config import EngineInstance, parse_engine_ref
from console.ports import free_port
from console.telemetry.host.usage import HostSource
from console.telemetry.hub import Hub
from tests import procgroup

DEADLINE = 30.0  # seconds a step may take on a slow, shared host


@pytest.fixture
def sim_url() -> Iterator[tuple[str, int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = procgroup.popen([sys.executable, "-m", "console", "sim", "--engine", "vllm", "--port", str(port),
                            "--no-access-log"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                urllib.request.urlopen(f"{url}/v1/models", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "simulator did not start"
                time.sleep(0.1)
        yield url, proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def _engines(url: str, n: int, pids: Sequence[int] = ()) -> list[EngineInstance]:
    base = parse_engine_ref(f"vllm@{url}")
    return [dataclasses.replace(base, name=f"engine-{i}", pids=(pids[i],) if pids else ()) for i in range(n)]


def _samples(hub: Hub) -> dict[str, float | None]:
    return {e.name: e.metrics_freshness.updated_at for e in hub.latest().engines}


def _wait_rounds(hub: Hub, rounds: int) -> None:
    """Until every engine has ``rounds`` new metrics samples."""
    counts: Counter[str] = Counter()
    last = _samples(hub)
    deadline = time.monotonic() + DEADLINE
    while min((counts[n] for n in last), default=0) < rounds:
        assert time.monotonic() < deadline, f"samples per engine: {dict(counts)}"
        time.sleep(0.05)
        now = _samples(hub)
        for name, at in now.items():
            if at is not None and at != last[name]:
                counts[name] += 1
        last = now


class _Lookups(importlib.abc.MetaPathFinder):
    """Counts the modules the import system searches for (it finds none itself)."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        self.names[fullname] += 1


def test_scrapes_do_not_search_for_modules_each_time(sim_url: tuple[str, int]) -> None:
    hub = Hub(_engines(sim_url[0], 2), refresh=0.2, gpu_source="none")
    lookups = _Lookups()
    try:
        hub.start()
        _wait_rounds(hub, 2)  # every lazy import of the collection path has happened
        sys.meta_path.insert(0, lookups)
        _wait_rounds(hub, 5)
    finally:
        if lookups in sys.meta_path:
            sys.meta_path.remove(lookups)
        hub.stop()
    # A module looked up again and again is a failed import retried per request (httpcore asks
    # for sniffio on every request: a walk of sys.path each time when it is not installed).
    again = {name: n for name, n in lookups.names.items() if n > 1}
    assert not again, again


def test_each_engine_scrapes_over_its_own_kept_alive_connection(sim_url: tuple[str, int]) -> None:
    n = 8
    hub = Hub(_engines(sim_url[0], n), refresh=0.3, gpu_source="none")
    try:
        hub.start()
        _wait_rounds(hub, 3)
        clients = {name: c.probe.client for name, c in hub._collectors.items()}
        # Between two requests every connection is back in its pool; on a loaded host a request may
        # be under way at any one look, so look until all are idle (never more than one each).
        deadline = time.monotonic() + DEADLINE
        while True:
            conns = {name: len(client._all) for name, client in clients.items()}
            reused = {name: len(client._idle) for name, client in clients.items()}
            if max(conns.values()) != 1 or min(reused.values()) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    finally:
        hub.stop()
    # One client per engine: a request never searches a pool shared with the other engines.
    assert len({id(c) for c in clients.values()}) == n
    # Health, identity and metrics go one after another over one kept-alive connection.
    assert max(conns.values()) == 1 and min(reused.values()) == 1, (conns, reused)


def test_https_engines_share_one_tls_context() -> None:
    # Loading the CA store for each engine's client costs tens of ms per engine.
    engines = [dataclasses.replace(parse_engine_ref(f"vllm@https://127.0.0.1:{free_port()}"), name=f"e{i}")
               for i in range(3)]
    hub = Hub([*engines, parse_engine_ref(f"sglang@http://127.0.0.1:{free_port()}")], refresh=0.2, gpu_source="none")
    try:
        hub.start()
        deadline = time.monotonic() + DEADLINE
        while any(e.health_detail == "" for e in hub.latest().engines):  # each has tried once
            assert time.monotonic() < deadline, hub.latest().engines
            time.sleep(0.05)
        contexts = {name: c.probe.client.tls for name, c in hub._collectors.items()}
    finally:
        hub.stop()
    shared = {id(contexts[e.name]) for e in engines}
    assert len(shared) == 1 and contexts["e0"] is not None


def test_one_host_round_lists_the_processes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 6
    procs = [procgroup.popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                             start_new_session=True, stdout=subprocess.PIPE)
             for _ in range(n)]
    # Read them once they are running Python: just after exec a process holds under 1 MB.
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == b"up\n"
    try:
        hub = Hub(_engines(f"http://127.0.0.1:{free_port()}", n, [p.pid for p in procs]), refresh=1.0,
                  gpu_source="none")
        source = HostSource()
        platform: ModuleType = psutil._psplatform  # type: ignore[attr-defined]
        real = platform.pids
        scans = 0

        def counting() -> list[int]:
            nonlocal scans
            scans += 1
            result: list[int] = real()
            return result

        monkeypatch.setattr(platform, "pids", counting)
        hub._host_side.collect(source)
        first = scans
        hub._host_side.collect(source)
        stats = dict(hub._host_side.proc_stats())
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
    # Each engine's process tree, from one read of the process table per round (not one per engine).
    assert first <= 1 and scans - first <= 1, (first, scans)
    assert set(stats) == {f"engine-{i}" for i in range(n)}
    assert all(rss is not None and rss > 1_000_000 for _cpu, rss in stats.values()), stats
    assert all(cpu is not None for cpu, _rss in stats.values()), stats
