"""Host and per-process CPU/memory from psutil, without ever sleeping.

CPU percentages are deltas between two calls (psutil's ``interval=None`` style): the collector
keeps its own counters, so the first reading after construction already covers the time since
construction and no other psutil user in the process disturbs them (host CPU is ``None`` when
called again within 0.1 s, too short a span to mean anything). A process seen for the first
time has no CPU figure yet (``None`` rather than psutil's meaningless first ``0.0``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from console.model import Freshness, HostSnapshot, SourceState

MIN_CPU_INTERVAL_S = 0.1
TABLE_MAX_AGE = 5.0  # seconds a read of the process table serves process_stats_many


@dataclass(frozen=True, slots=True)
class ProcessStats:
    """CPU and memory of a group of processes (an engine's process tree, or a container's PIDs)."""

    roots: tuple[int, ...]  # the PIDs asked for
    pids: tuple[int, ...]  # the live processes counted (roots and, when asked, their descendants)
    cpu_percent: float | None  # sum over ``pids``; 100 = one full core; None until a second sample
    rss_bytes: int | None  # sum of RSS (pages shared between processes count once per process)
    missing: tuple[int, ...] = ()  # roots that do not exist (exited, or another PID namespace)

    @property
    def alive(self) -> bool:
        return bool(self.pids)


def _cpu_busy_total(t: Any) -> tuple[float, float]:
    # Same accounting as psutil.cpu_percent: guest time is already part of user time on Linux,
    # and iowait counts as idle.
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    idle = t.idle + getattr(t, "iowait", 0.0)
    return total - idle, total


class HostCollector:
    """Host totals plus per-process-group stats. Cheap enough to call every tick on the loop thread."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._last_cpu = _cpu_busy_total(psutil.cpu_times())  # primes the host counter
        self._last_cpu_at = monotonic()
        self._procs: dict[int, tuple[psutil.Process, bool]] = {}  # pid -> (process, cpu primed)
        self._hostname = socket.gethostname()
        self._table: dict[int, list[int]] | None = None  # parent -> children, read at _table_at
        self._table_at = 0.0

    # -- host --------------------------------------------------------------------------------------

    def collect(self) -> HostSnapshot:
        now = self._clock()
        problems: list[str] = []
        cpu: float | None = None
        try:
            mono = self._monotonic()
            # Under MIN_CPU_INTERVAL_S the delta is a handful of clock ticks: noise, not a figure.
            # The baseline is kept then, so the next call measures over the longer span.
            if mono - self._last_cpu_at >= MIN_CPU_INTERVAL_S:
                busy, total = _cpu_busy_total(psutil.cpu_times())
                last_busy, last_total = self._last_cpu
                if total > last_total:
                    cpu = min(100.0, max(0.0, 100.0 * (busy - last_busy) / (total - last_total)))
                self._last_cpu = (busy, total)
                self._last_cpu_at = mono
        except (psutil.Error, OSError) as exc:
            problems.append(f"cpu: {exc}")
        mem_used = mem_total = None
        try:
            vm = psutil.virtual_memory()
            mem_total = int(vm.total)
            mem_used = int(vm.total - vm.available)  # what is really taken; cache/buffers excluded
        except (psutil.Error, OSError) as exc:
            problems.append(f"memory: {exc}")
        load: tuple[float, float, float] | None = None
        try:
            a, b, c = os.getloadavg()
            load = (a, b, c)
        except (OSError, AttributeError):
            load = None  # not on this platform
        self._prune()
        return HostSnapshot(
            taken_at=now,
            cpu_percent=cpu,
            cpu_count=psutil.cpu_count(logical=True),
            mem_used_bytes=mem_used,
            mem_total_bytes=mem_total,
            load_avg=load,
            hostname=self._hostname,
            freshness=Freshness(
                state=SourceState.STALE if problems else SourceState.OK,
                updated_at=now,
                reason="; ".join(problems),
            ),
        )

    # -- processes -------------------------------------------------------------------------------

    def process_stats_many(self, groups: Mapping[str, Iterable[int]]) -> dict[str, ProcessStats]:
        """``process_stats`` (with descendants) of each group, from one read of the process table
        for them all: reading it per group costs every group in proportion to all processes. The
        table (who is whose child) is read again every TABLE_MAX_AGE seconds: a whole pass over the
        process table each second cost more than all else the host collection does, and an engine's
        worker processes are started once, with the engine."""
        if not groups:
            return {}
        mono = self._monotonic()
        if self._table is None or mono - self._table_at >= TABLE_MAX_AGE:
            self._table, self._table_at = process_table(), mono
        table = self._table
        return {name: self.process_stats(roots, table=table) for name, roots in groups.items()}

    def process_stats(self, roots: Iterable[int], *, children: bool = True,
                      table: Mapping[int, Sequence[int]] | None = None) -> ProcessStats:
        """One figure for ``roots`` together (each PID counted once).

        ``children=True``: each root and all its descendants (a natively started engine), found in
        ``table`` (``process_table()``) when given, else by psutil (which reads the table itself).
        ``children=False``: exactly these PIDs (a container's PIDs from ``docker top``/cgroup).
        """
        wanted = tuple(dict.fromkeys(int(p) for p in roots))
        members: dict[int, psutil.Process] = {}
        missing: list[int] = []
        for pid in wanted:
            proc = self._process(pid)
            if proc is None:
                missing.append(pid)
                continue
            members[pid] = proc
            if children and table is not None:
                for kid in _descendants(table, pid):
                    if kid not in members and (kp := self._process(kid)) is not None:
                        members[kid] = kp
            elif children:
                try:
                    for child in proc.children(recursive=True):
                        members.setdefault(child.pid, child)
                except (psutil.Error, OSError):
                    pass
        cpu_total = 0.0
        cpu_seen = False
        rss_total = 0
        counted: list[int] = []
        for pid in members:
            proc = self._process(pid)
            if proc is None:
                continue
            try:
                with proc.oneshot():
                    # A descendant from a table read seconds ago: still the child of one counted
                    # here (its PID may have ended and been reused since).
                    if table is not None and pid not in wanted and proc.ppid() not in members:
                        continue
                    pct = proc.cpu_percent(interval=None)
                    rss = proc.memory_info().rss
            except (psutil.Error, OSError):
                continue  # exited between listing and reading
            counted.append(pid)
            rss_total += int(rss)
            _, primed = self._procs[pid]
            if primed:
                cpu_total += pct
                cpu_seen = True
            else:
                self._procs[pid] = (proc, True)
        return ProcessStats(
            roots=wanted,
            pids=tuple(counted),
            cpu_percent=cpu_total if cpu_seen else None,
            rss_bytes=rss_total if counted else None,
            missing=tuple(missing),
        )

    def per_root(self, roots: Iterable[int]) -> dict[int, ProcessStats]:
        """``process_stats`` for each root and its descendants separately."""
        return {pid: self.process_stats((pid,)) for pid in dict.fromkeys(roots)}

    def _process(self, pid: int) -> psutil.Process | None:
        """A cached Process (CPU deltas live in it); a reused PID gets a fresh object."""
        cached = self._procs.get(pid)
        if cached is not None:
            proc, _ = cached
            try:
                if proc.is_running():  # also False when the PID now belongs to another process
                    return proc
            except (psutil.Error, OSError):
                pass
            del self._procs[pid]
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, OSError, ValueError):
            return None
        self._procs[pid] = (proc, False)
        return proc

    def _prune(self) -> None:
        for pid, (proc, _) in list(self._procs.items()):
            try:
                alive = proc.is_running()
            except (psutil.Error, OSError):
                alive = False
            if not alive:
                del self._procs[pid]


def process_table() -> dict[int, list[int]]:
    """Parent PID -> its children's PIDs, for every process (one pass over the process table)."""
    out: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid:
            out.setdefault(int(ppid), []).append(proc.pid)
    return out


def _descendants(table: Mapping[int, Sequence[int]], root: int) -> list[int]:
    found: list[int] = []
    todo = list(table.get(root, ()))
    seen = {root}
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        todo.extend(table.get(pid, ()))
    return found


# The name the hub uses for the host collector.
HostSource = HostCollector
