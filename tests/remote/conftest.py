"""Fixtures for the remote-host tests: real sshd servers on 127.0.0.1 (tests/remote/sshd.py), and
simulated engines for the hosts to report.

A missing sshd, ssh or ssh-keygen FAILS the test with how to install it; ENGINEDECK_SKIP_SSH=1
skips the tests marked `ssh` explicitly (tests/conftest.py; listed by `-ra`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from console.hosts import HostTarget
from console.ports import free_port
from console.sim.fleet import Fleet, start_fleet
from tests.remote.sshd import HOW_SSHD, SshLab, SshServer, missing_tools, skip_ssh

HostMaker = Callable[..., tuple[HostTarget, SshServer]]


@pytest.fixture
def ssh_lab(tmp_path: Path) -> Iterator[SshLab]:
    if skip_ssh():
        pytest.skip("ENGINEDECK_SKIP_SSH is set")
    missing = missing_tools()
    if missing:
        pytest.fail(f"not found: {', '.join(missing)}\n-> {HOW_SSHD}", pytrace=False)
    lab = SshLab(tmp_path / "ssh")
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture(scope="session")
def sim_fleet() -> Iterator[Fleet]:
    """Simulated engines every host's configuration points at (started once: a 2-core machine)."""
    fleet = start_fleet(["vllm", "sglang", "tgi", "trtllm"], load=False)
    try:
        yield fleet
    finally:
        fleet.stop()


def host_config(folder: Path, endpoints: list[tuple[str, str]], *, gpus: str = "none") -> Path:
    """A remote host's own config.toml: its simulated engines (name, url) and GPU source."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["[console]", f'gpu_source = "{gpus}"', ""]
    for profile, url in endpoints:
        lines += [f"[engines.{profile}]", f'profile = "{profile}"', f'url = "{url}"', "simulated = true", ""]
    (folder / "config.toml").write_text("\n".join(lines))
    return folder


def remote_command(folder: Path) -> str:
    """The host's enginedeck command line: this checkout's, on the host's own config folder."""
    return (f"env ENGINEDECK_CONFIG_DIR={folder} ENGINEDECK_STATE_DIR={folder / 'state'} "
            f"{sys.executable} -m console")


@pytest.fixture
def make_host(ssh_lab: SshLab, sim_fleet: Fleet, tmp_path: Path) -> HostMaker:
    """``make_host(name, engines=2)``: an sshd for ``name`` and the HostTarget that reaches it,
    its remote enginedeck reporting ``engines`` of the simulated engines."""

    def make(name: str, engines: int = 2, *, command: str | None = None, path: str | None = None,
             period: float = 1.0) -> tuple[HostTarget, SshServer]:
        srv = ssh_lab.server(name, free_port("127.0.0.1"), path=path)
        eps = [(p, u) for p, u, _pid in sim_fleet.endpoints][:engines]
        folder = host_config(tmp_path / f"host-{name}", eps)
        target = HostTarget(name=name, destination="127.0.0.1", port=srv.port,
                            command=command or remote_command(folder),
                            ssh_options=("-F", str(ssh_lab.client_config)), period=period)
        return target, srv

    return make
