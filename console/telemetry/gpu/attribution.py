"""Who owns a GPU process: PID -> container (from its cgroup) -> engine instance.

NVML reports host PIDs. vLLM and SGLang rename their workers (``VLLM::EngineCore``), so names are
no help; the cgroup and the parent chain are. An engine is found either by the container it runs
in (container id -> instance, given by the lifecycle layer) or because the GPU process is one of
its PIDs or a descendant of one (a natively started engine and its worker processes).

The parsing functions take text and the PID walk takes an injectable ``parent_of`` so all of it can
be tested without containers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import psutil

from console.model import EngineSnapshot, GpuFleet, GpuProcess

CgroupReader = Callable[[int], str | None]
ParentLookup = Callable[[int], int | None]

_MAX_DEPTH = 64  # parent hops before giving up (loops in a fake lookup, or very deep trees)
_ID = r"[0-9a-f]{64}"
# The runtime prefixes seen in cgroup paths, v1 and v2, cgroupfs and systemd drivers:
#   /docker/<id>                          docker, cgroupfs driver (v1 and v2)
#   /system.slice/docker-<id>.scope       docker, systemd driver
#   .../cri-containerd-<id>.scope         containerd CRI (kubernetes, systemd driver)
#   .../crio-<id>.scope                   CRI-O
#   .../libpod-<id>.scope                 podman
#   /kubepods/<qos>/pod<uid>/<id>         kubernetes, cgroupfs driver
#   /ecs/<task>/<id>                      AWS ECS
_SEGMENT = re.compile(rf"(?:^|/)(?:(docker|cri-containerd|containerd|crio|libpod)-)?({_ID})(?:\.scope)?(?=/|$)")
_RUNTIME_BY_PREFIX = {
    "docker": "docker",
    "cri-containerd": "containerd",
    "containerd": "containerd",
    "crio": "cri-o",
    "libpod": "podman",
}


@dataclass(frozen=True, slots=True)
class ContainerRef:
    id: str  # full 64-hex container id
    runtime: str  # docker, containerd, cri-o, podman, kubernetes, ecs, or "unknown"

    @property
    def short_id(self) -> str:
        return self.id[:12]


@dataclass(frozen=True, slots=True)
class EngineLocator:
    """How to recognise one engine instance's processes."""

    pids: frozenset[int] = frozenset()  # root PIDs (host PID namespace); descendants count too
    container_ids: frozenset[str] = frozenset()  # full or short (>= 12 hex) ids, "docker://" allowed

    @classmethod
    def of(cls, pids: Iterable[int] = (), container_ids: Iterable[str] = ()) -> EngineLocator:
        return cls(frozenset(int(p) for p in pids), frozenset(container_ids))


def parse_cgroup_path(path: str) -> ContainerRef | None:
    """Container of one cgroup path; the innermost one when containers are nested."""
    matches = list(_SEGMENT.finditer(path.strip()))
    if not matches:
        return None
    last = matches[-1]
    prefix = last.group(1)
    if prefix:
        runtime = _RUNTIME_BY_PREFIX[prefix]
    elif "/docker/" in path or path.startswith("docker/"):
        runtime = "docker"
    elif "kubepods" in path:
        runtime = "kubernetes"
    elif path.startswith("/ecs/"):
        runtime = "ecs"
    else:
        runtime = "unknown"
    return ContainerRef(id=last.group(2), runtime=runtime)


def parse_cgroup(text: str) -> ContainerRef | None:
    """Container of a ``/proc/<pid>/cgroup`` file (v1 ``N:controllers:/path`` lines or v2 ``0::/path``).

    None for a host process (``0::/``, ``/user.slice/...``, ``/init.scope``) and for a container
    with a private cgroup namespace whose paths are relative (``0::/``): nothing to tell from there.
    """
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        ref = parse_cgroup_path(parts[2])
        if ref is not None:
            return ref
    return None


def read_cgroup(pid: int, proc_root: str = "/proc") -> str | None:
    """The text of ``/proc/<pid>/cgroup``, or None if the process is gone or not visible."""
    try:
        with open(os.path.join(proc_root, str(pid), "cgroup"), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def parent_pid(pid: int) -> int | None:
    """Parent PID via psutil; None at the top or when the process is not visible."""
    try:
        ppid = psutil.Process(pid).ppid()
    except (psutil.Error, OSError, ValueError):
        return None
    return ppid or None


def normalise_container_id(value: str) -> str:
    """Lower case, without a ``docker://`` / ``containerd://`` scheme."""
    text = value.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    return text


def container_matches(full_id: str, wanted: str) -> bool:
    """``wanted`` names ``full_id`` (same id, or a prefix of at least 12 characters)."""
    w = normalise_container_id(wanted)
    f = normalise_container_id(full_id)
    if len(w) < 12 or len(f) < 12:
        return w == f and bool(w)
    return f.startswith(w) or w.startswith(f)


def owning_engine_by_pid(
    pid: int,
    engine_pids: Mapping[int, str],
    parent_of: ParentLookup = parent_pid,
    max_depth: int = _MAX_DEPTH,
) -> str | None:
    """Engine whose root PID is ``pid`` or its nearest ancestor (walking up ``parent_of``)."""
    seen: set[int] = set()
    current: int | None = pid
    for _ in range(max_depth):
        if current is None or current <= 0 or current in seen:
            return None
        name = engine_pids.get(current)
        if name is not None:
            return name
        seen.add(current)
        current = parent_of(current)
    return None


class Attributor:
    """Joins GPU processes to containers and engines; keeps per-call memo so TP ranks cost once."""

    def __init__(
        self,
        engines: Mapping[str, EngineLocator],
        *,
        cgroup_text: CgroupReader = read_cgroup,
        parent_of: ParentLookup = parent_pid,
    ) -> None:
        self._engines = dict(sorted(engines.items()))  # sorted: deterministic when two would match
        self._cgroup_text = cgroup_text
        self._parent_of = parent_of
        self._engine_pids: dict[int, str] = {}
        for name, loc in self._engines.items():
            for p in loc.pids:
                self._engine_pids.setdefault(p, name)
        self._memo: dict[int, tuple[str | None, str | None]] = {}

    def container_of(self, pid: int) -> ContainerRef | None:
        text = self._cgroup_text(pid)
        return parse_cgroup(text) if text else None

    def resolve(self, pid: int) -> tuple[str | None, str | None]:
        """(container id, engine name) for one PID; either may be None."""
        if pid in self._memo:
            return self._memo[pid]
        ref = self.container_of(pid)
        engine: str | None = None
        if ref is not None:
            for name, loc in self._engines.items():
                if any(container_matches(ref.id, c) for c in loc.container_ids):
                    engine = name
                    break
        if engine is None and self._engine_pids:
            engine = owning_engine_by_pid(pid, self._engine_pids, self._parent_of)
        result = (ref.id if ref is not None else None, engine)
        self._memo[pid] = result
        return result

    def process(self, proc: GpuProcess) -> GpuProcess:
        container, engine = self.resolve(proc.pid)
        # Values already set (the simulated source knows its engines) win over guesses.
        return replace(proc, container=proc.container or container, engine=proc.engine or engine)

    def fleet(self, fleet: GpuFleet) -> GpuFleet:
        gpus = tuple(replace(g, processes=tuple(self.process(p) for p in g.processes)) for g in fleet.gpus)
        return replace(fleet, gpus=gpus)


def attribute(
    fleet: GpuFleet,
    engines: Mapping[str, EngineLocator],
    *,
    cgroup_text: CgroupReader = read_cgroup,
    parent_of: ParentLookup = parent_pid,
) -> GpuFleet:
    """A copy of ``fleet`` with ``GpuProcess.container`` (full id) and ``.engine`` filled where known."""
    return Attributor(engines, cgroup_text=cgroup_text, parent_of=parent_of).fleet(fleet)


def attribute_fleet(
    fleet: GpuFleet,
    engines: Mapping[str, EngineSnapshot],
    *,
    container_ids: Mapping[str, Iterable[str]] | None = None,
    cgroup_text: CgroupReader = read_cgroup,
    parent_of: ParentLookup = parent_pid,
) -> GpuFleet:
    """``attribute`` with locators built from engine snapshots (their ``pids``), plus container ids
    per engine name where the lifecycle layer knows them."""
    ids = container_ids or {}
    names = set(engines) | set(ids)
    locators = {n: EngineLocator.of(engines[n].pids if n in engines else (), ids.get(n, ())) for n in sorted(names)}
    locators = {n: loc for n, loc in locators.items() if loc.pids or loc.container_ids}
    return attribute(fleet, locators, cgroup_text=cgroup_text, parent_of=parent_of)


def engine_gpus(fleet: GpuFleet) -> dict[str, tuple[int, ...]]:
    """Engine name -> indices of the GPUs it has processes on (for ``EngineSnapshot.gpus``)."""
    out: dict[str, list[int]] = {}
    for g in fleet.gpus:
        for name in g.engines:
            out.setdefault(name, []).append(g.index)
    return {k: tuple(v) for k, v in out.items()}


def engine_gpu_memory(fleet: GpuFleet) -> dict[str, int]:
    """Engine name -> GPU memory its processes hold across all GPUs (processes without a figure skipped)."""
    out: dict[str, int] = {}
    for g in fleet.gpus:
        for p in g.processes:
            if p.engine and p.used_bytes is not None:
                out[p.engine] = out.get(p.engine, 0) + p.used_bytes
    return out


def pids_in_container(
    container_id: str,
    *,
    pids: Iterable[int] | None = None,
    cgroup_text: CgroupReader = read_cgroup,
) -> tuple[int, ...]:
    """PIDs whose cgroup names ``container_id`` (a fallback when ``docker top`` is not available).

    Scans every visible process unless ``pids`` narrows it; fine at a few hundred processes per tick.
    """
    candidates = psutil.pids() if pids is None else pids
    found: list[int] = []
    for pid in candidates:
        text = cgroup_text(pid)
        ref = parse_cgroup(text) if text else None
        if ref is not None and container_matches(ref.id, container_id):
            found.append(pid)
    return tuple(found)
