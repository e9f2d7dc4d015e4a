"""HostCollector against the real psutil and real child processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from console.model import SourceState
from console.telemetry.host.usage import HostCollector
from tests import procgroup

BUSY = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def spawn(args: list[str]) -> subprocess.Popen[bytes]:
    return procgroup.popen(args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is only what it started
        except ProcessLookupError:
            pass
    proc.wait(10)


@pytest.fixture
def busy() -> Iterator[subprocess.Popen[bytes]]:
    proc = spawn([sys.executable, "-c", BUSY])
    try:
        # Until the interpreter is up: just after the fork, the child is still a few hundred KB
        # (a CI run under load read 483 KB).
        deadline = time.monotonic() + 10
        while psutil.Process(proc.pid).memory_info().rss <= 1_000_000:
            assert time.monotonic() < deadline, "the interpreter did not start"
            time.sleep(0.02)
        yield proc
    finally:
        stop(proc)


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    proc = spawn(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(psutil.Process(proc.pid).children(recursive=True)) < 2:
            assert time.monotonic() < deadline, "children did not start"
            time.sleep(0.02)
        yield proc
    finally:
        stop(proc)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait(10)
    return proc.pid


def test_host_snapshot_fields() -> None:
    host = HostCollector(clock=lambda: 123.0)
    snap = host.collect()
    vm = psutil.virtual_memory()
    assert snap.taken_at == 123.0 and snap.freshness.state is SourceState.OK and snap.freshness.updated_at == 123.0
    assert snap.cpu_count == psutil.cpu_count() and snap.hostname == socket.gethostname()
    assert snap.mem_total_bytes == vm.total
    assert snap.mem_used_bytes is not None and 0 < snap.mem_used_bytes <= vm.total
    assert snap.load_avg is not None and len(snap.load_avg) == 3 and all(x >= 0 for x in snap.load_avg)


def test_host_cpu_needs_a_real_interval() -> None:
    now = [0.0]
    host = HostCollector(monotonic=lambda: now[0])
    assert host.collect().cpu_percent is None  # no time has passed since construction
    now[0] = 0.05
    assert host.collect().cpu_percent is None
    now[0] = 1.0
    time.sleep(0.2)  # let the kernel's CPU counters move (they tick every 10 ms)
    cpu = host.collect().cpu_percent
    assert cpu is not None and 0.0 <= cpu <= 100.0


def test_host_cpu_is_non_blocking_and_sees_a_busy_process(busy: subprocess.Popen[bytes]) -> None:
    host = HostCollector()
    time.sleep(1.0)
    t0 = time.monotonic()
    snap = host.collect()
    assert time.monotonic() - t0 < 0.5  # no sampling interval inside collect()
    ncpu = psutil.cpu_count() or 1
    # One core spinning: the host is at least about 1/ncpu busy (more if the box is shared).
    assert snap.cpu_percent is not None and 50.0 / ncpu <= snap.cpu_percent <= 100.0


def test_process_cpu_needs_two_samples_then_follows_the_process(busy: subprocess.Popen[bytes]) -> None:
    host = HostCollector()
    first = host.process_stats([busy.pid])
    assert first.pids == (busy.pid,) and first.missing == ()
    assert first.cpu_percent is None  # psutil's first reading is meaningless
    assert first.rss_bytes is not None and first.rss_bytes > 1_000_000
    time.sleep(1.0)
    second = host.process_stats([busy.pid])
    assert second.cpu_percent is not None and second.cpu_percent > 10.0  # a spinning loop, tolerant


def test_idle_process_uses_little_cpu(tree: subprocess.Popen[bytes]) -> None:
    host = HostCollector()
    host.process_stats([tree.pid])
    time.sleep(0.5)
    stats = host.process_stats([tree.pid])
    assert stats.cpu_percent is not None and stats.cpu_percent < 5.0


def test_tree_includes_descendants_and_group_does_not(tree: subprocess.Popen[bytes]) -> None:
    host = HostCollector()
    kids = {c.pid for c in psutil.Process(tree.pid).children(recursive=True)}
    whole = host.process_stats([tree.pid])
    assert set(whole.pids) == {tree.pid, *kids} and whole.roots == (tree.pid,)
    only = host.process_stats([tree.pid], children=False)
    assert only.pids == (tree.pid,)
    assert only.rss_bytes is not None and whole.rss_bytes is not None and whole.rss_bytes > only.rss_bytes
    # a container's PID list: exactly those PIDs, each counted once
    group = host.process_stats([*kids, *kids], children=False)
    assert set(group.pids) == kids
    per = host.per_root([tree.pid, *kids])
    assert set(per) == {tree.pid, *kids} and all(per[k].pids == (k,) for k in kids)


def test_missing_and_exited_processes(tree: subprocess.Popen[bytes]) -> None:
    host = HostCollector()
    gone = dead_pid()
    stats = host.process_stats([gone])
    assert stats.missing == (gone,) and stats.pids == () and not stats.alive
    assert stats.cpu_percent is None and stats.rss_bytes is None
    assert host.process_stats([tree.pid]).alive
    stop(tree)
    after = host.process_stats([tree.pid])
    assert after.missing == (tree.pid,) and not after.alive
    host.collect()  # prunes cached dead processes without complaint


def _sleepers(pid: int) -> set[int]:
    """The ``sleep 60`` children of ``pid`` (not the shell's short-lived helpers)."""
    out = set()
    for p in psutil.Process(pid).children():
        with contextlib.suppress(psutil.Error):
            if p.cmdline() == ["sleep", "60"]:
                out.add(p.pid)
    return out


def test_a_group_counts_its_tree_from_a_process_table_read_every_few_seconds(tmp_path: Path) -> None:
    from console.telemetry.host.usage import TABLE_MAX_AGE

    clock = [1000.0]
    host = HostCollector(monotonic=lambda: clock[0])
    go = tmp_path / "go"
    # A shell that starts one child now and another once told to.
    proc = spawn(["sh", "-c", f"sleep 60 & while [ ! -e {go} ]; do sleep 0.02; done; sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 10
        while not _sleepers(proc.pid):
            assert time.monotonic() < deadline, "the first child did not start"
            time.sleep(0.02)
        first = _sleepers(proc.pid)
        assert first <= set(host.process_stats_many({"e": [proc.pid]})["e"].pids)
        go.touch()
        while len(_sleepers(proc.pid)) < 2:
            assert time.monotonic() < deadline, "the second child did not start"
            time.sleep(0.02)
        late = _sleepers(proc.pid) - first
        # Within TABLE_MAX_AGE the table read before is used: the new child is not known yet.
        clock[0] += TABLE_MAX_AGE / 2
        assert not late & set(host.process_stats_many({"e": [proc.pid]})["e"].pids)
        clock[0] += TABLE_MAX_AGE
        assert late <= set(host.process_stats_many({"e": [proc.pid]})["e"].pids)
        # A child that ended (and was reaped by its shell) is no longer counted, table or not.
        gone = next(iter(late))
        os.kill(gone, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.pid_exists(gone):
            assert time.monotonic() < deadline, "the shell did not reap its child"
            time.sleep(0.02)
        clock[0] += 0.5
        assert gone not in host.process_stats_many({"e": [proc.pid]})["e"].pids
    finally:
        stop(proc)
