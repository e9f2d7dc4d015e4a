"""Attribution: cgroup text -> container, PID ancestry -> engine (a real process tree)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator

import psutil
import pytest

from console.model import EngineSnapshot, GpuFleet, GpuProcess, GpuSnapshot
from console.telemetry.gpu.attribution import (
    ContainerRef,
    EngineLocator,
    attribute,
    attribute_fleet,
    container_matches,
    engine_gpu_memory,
    engine_gpus,
    owning_engine_by_pid,
    parent_pid,
    parse_cgroup,
    pids_in_container,
    read_cgroup,
)
from tests import procgroup

A = "4f797c539e6c745de61a93ca3ff892358ecbcaccd8414d5db545c38428142970"
B = "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d"
C = "3e74d3fd9db4c9dd921ae05c2502fb984d0cde1b36e581b13f79c639da4518a1"
D = "0b1d9a1e1f0c3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"

# cgroup v1, docker with the cgroupfs driver (the whole file, as /proc/<pid>/cgroup shows it)
V1_DOCKER = f"""12:pids:/docker/{A}
11:hugetlb:/docker/{A}
10:net_prio:/docker/{A}
9:perf_event:/docker/{A}
8:net_cls:/docker/{A}
7:freezer:/docker/{A}
6:devices:/docker/{A}
5:memory:/docker/{A}
4:blkio:/docker/{A}
3:cpuacct:/docker/{A}
2:cpu:/docker/{A}
1:name=systemd:/docker/{A}
0::/
"""
# cgroup v1, docker with the systemd driver (CentOS 7 style)
V1_DOCKER_SYSTEMD = f"""10:devices:/system.slice/docker-{B}.scope
8:memory:/system.slice/docker-{B}.scope
2:cpuacct,cpu:/system.slice/docker-{B}.scope
1:name=systemd:/system.slice/docker-{B}.scope
"""
# cgroup v2 (unified), docker with the systemd driver (Ubuntu 22.04+, Debian 12, Fedora)
V2_DOCKER = f"0::/system.slice/docker-{B}.scope\n"
# cgroup v2, docker with the cgroupfs driver
V2_DOCKER_CGROUPFS = f"0::/docker/{A}\n"
# kubernetes, containerd CRI, systemd driver, cgroup v2
V2_KUBEPODS_CONTAINERD = (
    "0::/kubepods.slice/kubepods-burstable.slice/"
    f"kubepods-burstable-pod3d274242_8ee0_11e9_a8a6_1e68d864ef1a.slice/cri-containerd-{C}.scope\n"
)
# kubernetes, cgroupfs driver, cgroup v1
V1_KUBEPODS = f"""11:perf_event:/kubepods/besteffort/pod3d274242-8ee0-11e9-a8a6-1e68d864ef1a/{C}
8:cpu,cpuacct:/kubepods/besteffort/pod3d274242-8ee0-11e9-a8a6-1e68d864ef1a/{C}
1:name=systemd:/kubepods/besteffort/pod3d274242-8ee0-11e9-a8a6-1e68d864ef1a/{C}
"""
V2_CRIO = f"0::/kubepods.slice/kubepods-pod3d274242_8ee0_11e9.slice/crio-{D}.scope\n"
V2_PODMAN_ROOTLESS = f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{D}.scope/container\n"
DOCKER_IN_DOCKER = f"1:name=systemd:/docker/{A}/docker/{B}\n"

HOST_LINES = [
    "0::/\n",  # a host process in the root cgroup, or a container with a private cgroup namespace
    "0::/init.scope\n",
    "0::/user.slice/user-1000.slice/session-3.scope\n",
    "0::/system.slice/docker.service\n",  # dockerd itself is not in a container
    "0::/system.slice/containerd.service\n",  # nor are the shims
    "4:memory:/process_api/a0b8ffbed39b88acba8be5637cc6792d\n1:cpu:/\n",  # 32 hex: not a container id
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (V1_DOCKER, ContainerRef(A, "docker")),
        (V1_DOCKER_SYSTEMD, ContainerRef(B, "docker")),
        (V2_DOCKER, ContainerRef(B, "docker")),
        (V2_DOCKER_CGROUPFS, ContainerRef(A, "docker")),
        (V2_KUBEPODS_CONTAINERD, ContainerRef(C, "containerd")),
        (V1_KUBEPODS, ContainerRef(C, "kubernetes")),
        (V2_CRIO, ContainerRef(D, "cri-o")),
        (V2_PODMAN_ROOTLESS, ContainerRef(D, "podman")),
        (DOCKER_IN_DOCKER, ContainerRef(B, "docker")),  # the innermost container
        *[(t, None) for t in HOST_LINES],
        ("", None),
        ("garbage without colons\n", None),
    ],
)
def test_parse_cgroup(text: str, expected: ContainerRef | None) -> None:
    assert parse_cgroup(text) == expected


def test_short_id_and_matching() -> None:
    assert ContainerRef(A, "docker").short_id == A[:12]
    assert container_matches(A, A[:12]) and container_matches(A, "docker://" + A) and container_matches(A, A.upper())
    assert not container_matches(A, B[:12])
    assert not container_matches(A, A[:6])  # too short to be trusted


def test_read_cgroup_of_real_processes() -> None:
    text = read_cgroup(os.getpid())
    assert text is not None and text.strip()
    assert read_cgroup(2**22 + 12345) is None  # no such PID


def gpu(index: int, *procs: GpuProcess) -> GpuSnapshot:
    return GpuSnapshot(index=index, name="X", uuid=f"GPU-{index}", taken_at=0.0, processes=procs)


def test_container_id_to_engine_with_fake_cgroups() -> None:
    cgroups = {100: V2_DOCKER, 101: V1_DOCKER, 102: V2_KUBEPODS_CONTAINERD, 103: "0::/user.slice/x.scope\n"}
    fleet = GpuFleet(
        gpus=(
            gpu(0, GpuProcess(100, 10), GpuProcess(101, 20)),
            gpu(1, GpuProcess(100, 10), GpuProcess(102, 5), GpuProcess(103, 1)),
        )
    )
    engines = {
        "vllm-a": EngineLocator.of(container_ids=[B[:12]]),  # docker's short id
        "sglang-b": EngineLocator.of(container_ids=["docker://" + A]),
    }
    looked_up: list[int] = []

    def cg(pid: int) -> str | None:
        looked_up.append(pid)
        return cgroups.get(pid)

    out = attribute(fleet, engines, cgroup_text=cg, parent_of=lambda pid: None)
    rows = [(g.index, p.pid, p.container, p.engine) for g in out.gpus for p in g.processes]
    assert rows == [
        (0, 100, B, "vllm-a"),
        (0, 101, A, "sglang-b"),
        (1, 100, B, "vllm-a"),
        (1, 102, C, None),  # a container nobody registered: container known, engine not
        (1, 103, None, None),
    ]
    assert sorted(looked_up) == [100, 101, 102, 103]  # PID 100 (two GPUs, TP) read once
    assert fleet.gpus[0].processes[0].engine is None  # the input is not modified
    assert engine_gpus(out) == {"vllm-a": (0, 1), "sglang-b": (0,)}
    assert engine_gpu_memory(out) == {"vllm-a": 20, "sglang-b": 20}


def test_parent_walk_with_injected_lookup() -> None:
    parents = {50: 40, 40: 30, 30: 1, 60: 1, 70: 70}
    owners = {30: "native", 40: "inner"}
    assert owning_engine_by_pid(50, owners, parents.get) == "inner"  # nearest ancestor wins
    assert owning_engine_by_pid(30, owners, parents.get) == "native"
    assert owning_engine_by_pid(60, owners, parents.get) is None
    assert owning_engine_by_pid(70, owners, parents.get) is None  # a loop ends
    assert owning_engine_by_pid(80, owners, parents.get) is None  # unknown PID


def test_already_attributed_processes_are_kept() -> None:
    fleet = GpuFleet(gpus=(gpu(0, GpuProcess(5, 1, engine="sim-a")),))
    out = attribute(fleet, {"other": EngineLocator.of(pids=[5])}, cgroup_text=lambda p: None)
    assert out.gpus[0].processes[0].engine == "sim-a"


@pytest.fixture
def engine_tree() -> Iterator[tuple[int, list[int]]]:
    """A real native "engine": a shell with two worker children, in its own session."""
    proc = procgroup.popen(
        ["sh", "-c", "sleep 60 & sleep 60 & wait"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while len(kids := [c.pid for c in psutil.Process(proc.pid).children()]) < 2:
            assert time.monotonic() < deadline, "children did not start"
            time.sleep(0.02)
        yield proc.pid, kids
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


def test_descendants_of_a_real_engine_process(engine_tree: tuple[int, list[int]]) -> None:
    root, kids = engine_tree
    assert parent_pid(kids[0]) == root
    stranger = os.getpid()
    fleet = GpuFleet(
        gpus=(
            gpu(0, GpuProcess(kids[0], 1 << 30), GpuProcess(stranger, 1 << 20)),
            gpu(1, GpuProcess(kids[1], 1 << 30), GpuProcess(root, None)),
        )
    )
    out = attribute(fleet, {"native": EngineLocator.of(pids=[root]), "other": EngineLocator.of(pids=[1234567])})
    by_pid = {p.pid: p for g in out.gpus for p in g.processes}
    assert by_pid[kids[0]].engine == "native" and by_pid[kids[1]].engine == "native"
    assert by_pid[root].engine == "native"
    assert by_pid[stranger].engine is None
    assert engine_gpus(out) == {"native": (0, 1)}
    assert engine_gpu_memory(out) == {"native": 2 << 30}  # the root's None is skipped, not 0


def test_pids_in_container_scans_cgroups() -> None:
    cgroups = {1: "0::/init.scope\n", 10: V2_DOCKER, 11: V2_DOCKER, 12: V1_DOCKER}
    assert pids_in_container(B[:12], pids=[1, 10, 11, 12, 13], cgroup_text=cgroups.get) == (10, 11)
    assert pids_in_container(C, pids=[1, 10], cgroup_text=cgroups.get) == ()
    # and the real /proc scan runs here without error (this host has no docker container of that id)
    assert pids_in_container(D) == ()


def test_attribute_fleet_from_engine_snapshots(engine_tree: tuple[int, list[int]]) -> None:
    root, kids = engine_tree
    snaps = {
        "native": EngineSnapshot(
            name="native", profile="llamacpp", url="http://127.0.0.1:1", taken_at=0.0, pids=(root,)
        ),
        "docker": EngineSnapshot(name="docker", profile="vllm", url="http://127.0.0.1:2", taken_at=0.0),
    }
    fleet = GpuFleet(gpus=(gpu(0, GpuProcess(kids[0], 1), GpuProcess(900001, 2)),))
    cgroups = {900001: V2_DOCKER}

    def cg(pid: int) -> str | None:
        return cgroups.get(pid, read_cgroup(pid))

    out = attribute_fleet(fleet, snaps, container_ids={"docker": [B[:12]]}, cgroup_text=cg)
    assert [(p.pid, p.engine) for p in out.gpus[0].processes] == [(kids[0], "native"), (900001, "docker")]
    assert out.gpus[0].processes[1].container == B
