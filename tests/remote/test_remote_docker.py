"""Remote lifecycle through a forwarded Docker socket, end to end: a real sshd on 127.0.0.1 is the
"remote" host, whose /var/run/docker.sock is this machine's real dockerd; DOCKER_HOST points
nowhere, so the ssh tunnel is the only way the backend reaches Docker. The simulator image is
started and stopped as the host's own configuration (read over ssh) says, its readiness probed
through a forwarded port. Also the tunnel's one-line errors within their deadline.

Marked `ssh` and `docker`: a missing sshd, dockerd or simulator image FAILS (the fixtures say how to
provide them); ENGINEDECK_SKIP_SSH=1 / ENGINEDECK_SKIP_DOCKER=1 skip explicitly.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.config import load_config
from console.errors import UserError
from console.hosts import HostTarget
from console.lifecycle.launch import LABEL_INSTANCE
from console.lifecycle.remote_docker import fetch_config, open_remote, remote_manager
from console.model import Phase
from console.ports import free_port
from console.remote.tunnel import Tunnels
from tests import procgroup
from tests.integration.conftest import docker_client, sim_image  # noqa: F401  (the Docker fixtures)
from tests.remote.conftest import remote_command
from tests.remote.sshd import SshLab

REPO = Path(__file__).resolve().parents[2]
SUFFIX = f"r{os.getpid()}"


def ours(client: Any, name: str) -> list[Any]:
    return list(client.containers.list(all=True, sparse=True, filters={"label": [f"{LABEL_INSTANCE}={name}"]}))


def host_with_engine(lab: SshLab, folder: Path, image: str, name: str, port: int) -> HostTarget:
    """An sshd for host "gpu1" whose enginedeck configuration has one Docker engine of the simulator image."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(
        f'[engines.{name}]\nprofile = "vllm"\nmanaged = "docker"\nimage = "{image}"\nmodel = "facebook/opt-125m"\n'
        f'served_name = "opt"\nport = {port}\n'
        'command = ["--engine", "vllm", "--host", "0.0.0.0", "--port", "{port}", "--model", "{served_name}", '
        '"--load-time", "1"]\n'
        f'[engines.watched]\nprofile = "vllm"\nurl = "http://127.0.0.1:1"\n')
    srv = lab.server("gpu1", free_port("127.0.0.1"))
    return HostTarget(name="gpu1", destination="127.0.0.1", port=srv.port, command=remote_command(folder),
                      ssh_options=("-F", str(lab.client_config)))


def host_port(folder: Path) -> int:
    """The engine's port on the host, from the host's configuration."""
    import tomllib

    return int(next(iter(tomllib.loads((folder / "config.toml").read_text())["engines"].values()))["port"])


def ssh_children() -> list[int]:
    """This test process's ssh children still running."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                comm = (entry / "comm").read_text().strip()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[1]) == os.getpid() and comm == "ssh":
                out.append(int(entry.name))
    return out


@pytest.mark.ssh
@pytest.mark.docker
def test_start_and_stop_a_remote_engine_through_the_forwarded_socket(
        ssh_lab: SshLab, docker_client: Any, sim_image: str, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"rsim-{SUFFIX}"
    target = host_with_engine(ssh_lab, tmp_path / "gpu1", sim_image, name, free_port("127.0.0.1"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker-here.sock")  # only the tunnel reaches Docker
    tunnels = Tunnels()
    manager = remote_manager(fetch_config(target), target, tunnels)
    try:
        assert manager.names == (name,)  # the host's Docker engines only, not its watched one
        t0 = time.monotonic()
        st = manager.start(name).result(timeout=60)
        assert st.phase is Phase.STARTING and st.container_id, st.one_line()
        st = manager.wait(name, timeout=60)
        took = time.monotonic() - t0
        assert st.phase is Phase.READY, st.one_line()
        (c,) = ours(docker_client, name)
        assert c.short_id == st.container_id
        # The engine's port on the host, reached through a forwarded local port.
        url = manager.config.instance(name).url
        assert url != f"http://127.0.0.1:{manager.config.instance(name).config.port}"
        assert "vllm:num_requests_running" in httpx.get(f"{url}/metrics", timeout=5).text
        sockets = [t for t in tunnels.tunnels() if t.remote == "/var/run/docker.sock"]
        assert len(sockets) == 1 and sockets[0].folder is not None
        assert stat.S_IMODE(os.stat(sockets[0].folder).st_mode) == 0o700
        opened = tunnels.opened  # one socket tunnel + one port tunnel, reused by every later call

        st = manager.stop(name).result(timeout=60)
        assert st.phase is Phase.EXITED, st.one_line()
        manager.remove(name).result(timeout=30)
        assert ours(docker_client, name) == []
        assert tunnels.opened == opened == 2
        assert [(e.target, e.action, e.result) for e in manager.audit.read()[-3:]] == [
            (f"gpu1/{name}", "start", "ok"), (f"gpu1/{name}", "stop", "ok"), (f"gpu1/{name}", "remove", "ok")]
        print(f"remote start to ready through the tunnel: {took:.2f} s")
    finally:
        manager.close()
        for c in ours(docker_client, name):
            c.remove(force=True, v=True)
        folder = next((t.folder for t in tunnels.tunnels() if t.folder), None)
        tunnels.close_all()
    assert ssh_children() == []  # every tunnel's ssh ended
    assert folder is not None and not Path(folder).exists()
    assert "paramiko" not in sys.modules


@pytest.mark.ssh
@pytest.mark.docker
def test_up_and_down_with_host_on_the_command_line(ssh_lab: SshLab, docker_client: Any, sim_image: str,  # noqa: F811
                                                   tmp_path: Path) -> None:
    name = f"rcli-{SUFFIX}"
    target = host_with_engine(ssh_lab, tmp_path / "gpu1", sim_image, name, free_port("127.0.0.1"))
    local = tmp_path / "local.toml"
    opts = ", ".join(f'"{o}"' for o in target.ssh_options)
    local.write_text(f'[hosts.gpu1]\nssh = "{target.display}"\ncommand = "{target.command}"\nssh_options = [{opts}]\n')
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker-here.sock",
           "ENGINEDECK_STATE_DIR": str(tmp_path / "state")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return procgroup.run([sys.executable, "-m", "console", *args, "--config", str(local)], env=env, cwd=REPO,
                             capture_output=True, text=True, timeout=120)

    try:
        up = cli("up", name, "--host", "gpu1", "--timeout", "60")
        assert up.returncode == 0, up.stderr
        port = host_port(tmp_path / "gpu1")
        assert up.stdout.startswith(f"gpu1/{name} ready at 127.0.0.1:{port} on gpu1 ("), up.stdout  # not the forward
        assert len(ours(docker_client, name)) == 1
        down = cli("down", f"gpu1/{name}", "--yes")
        assert down.returncode == 0, down.stderr
        assert down.stdout.startswith(f"gpu1/{name}: ")
        assert ours(docker_client, name) == []
        ro = cli("down", f"gpu1/{name}", "--yes", "--read-only")
        assert ro.returncode == 1 and ro.stderr.strip().count("\n") == 0 and "read-only" in ro.stderr
        bad = cli("up", "watched", "--host", "gpu1")
        assert bad.returncode == 1 and "monitor-only there" in bad.stderr and "Traceback" not in bad.stderr
        unknown = cli("up", name, "--host", "nope")
        assert unknown.returncode == 1 and "no host named 'nope' (known: gpu1)" in unknown.stderr
    finally:
        for c in ours(docker_client, name):
            c.remove(force=True, v=True)


@pytest.mark.ssh
@pytest.mark.docker
def test_the_console_s_control_starts_and_stops_host_slash_name(
        ssh_lab: SshLab, docker_client: Any, sim_image: str, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What the console's U/X keys call after their confirmation (console/ui/engine_control.py)."""
    from console.ui.control_remote import HostsControl

    name = f"rui-{SUFFIX}"
    target = host_with_engine(ssh_lab, tmp_path / "gpu1", sim_image, name, free_port("127.0.0.1"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker-here.sock")
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path / "state"))
    control = HostsControl(None, [target], Tunnels())
    try:
        assert control.can_control(f"gpu1/{name}") and not control.can_control(name)
        assert not control.can_control("other/x")
        control.start(f"gpu1/{name}")  # returns once ready
        view = control.phase_of(f"gpu1/{name}")
        assert view is not None and view.phase is Phase.READY, view
        assert len(ours(docker_client, name)) == 1
        assert not control.can_control("gpu1/watched")  # known now: monitor-only there
        with pytest.raises(UserError, match="monitor-only there"):
            control.start("gpu1/watched")
        assert "docker run" in (control.launch_command(f"gpu1/{name}") or "")
        control.stop(f"gpu1/{name}")
        view = control.phase_of(f"gpu1/{name}")
        assert view is not None and view.phase is Phase.EXITED, view
        assert control.log_tail(f"gpu1/{name}", 5)
    finally:
        control.close()
        for c in ours(docker_client, name):
            c.remove(force=True, v=True)
    assert ssh_children() == []


@pytest.mark.ssh
def test_a_socket_that_never_answers_is_one_line_within_the_deadline(ssh_lab: SshLab, tmp_path: Path) -> None:
    target = host_with_engine(ssh_lab, tmp_path / "gpu1", "unused:dev", "e", 1)
    tunnels = Tunnels(deadline=5)
    t0 = time.monotonic()
    with pytest.raises(UserError) as err:
        tunnels.docker_url(target, f"{tmp_path}/no/such/docker.sock")
    took = time.monotonic() - t0
    assert took < 5.5 and "\n" not in err.value.message
    assert err.value.message.startswith("gpu1: ssh to 127.0.0.1:")
    assert "no Docker Engine socket there" in err.value.message
    assert tunnels.tunnels() == [] and ssh_children() == []

    # A host whose sshd is gone: ssh's own reason, as soon as ssh exits.
    dead = HostTarget(name="gone", destination="127.0.0.1", port=free_port("127.0.0.1"),
                      ssh_options=target.ssh_options)
    t0 = time.monotonic()
    with pytest.raises(UserError) as err:
        tunnels.docker_url(dead)
    assert time.monotonic() - t0 < 5 and "Connection refused" in err.value.message and "\n" not in err.value.message
    assert ssh_children() == []


@pytest.mark.ssh
def test_a_host_that_does_not_answer_in_time_is_one_line(ssh_lab: SshLab, tmp_path: Path) -> None:
    # sshd logs in, but the "remote" end of the forward is a socket that accepts and never answers.
    import socket

    target = host_with_engine(ssh_lab, tmp_path / "gpu1", "unused:dev", "e", 1)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(tmp_path / "silent.sock"))
    silent.listen(16)
    try:
        tunnels = Tunnels(deadline=2)
        t0 = time.monotonic()
        with pytest.raises(UserError) as err:
            tunnels.docker_url(target, str(tmp_path / "silent.sock"))
        assert time.monotonic() - t0 < 2.5
        assert "did not answer through ssh to 127.0.0.1:" in err.value.message and "within 2 s" in err.value.message
        assert ssh_children() == []
    finally:
        silent.close()


@pytest.mark.ssh
def test_the_host_s_configuration_errors_are_one_line(ssh_lab: SshLab, tmp_path: Path) -> None:
    target = host_with_engine(ssh_lab, tmp_path / "gpu1", "unused:dev", "e", 1)
    local = tmp_path / "local.toml"
    local.write_text(f'[hosts.gpu1]\nssh = "{target.display}"\ncommand = "{target.command}"\n'
                     f'ssh_options = ["-F", "{target.ssh_options[1]}"]\n')
    cfg = load_config(local)
    known = r"^gpu1 has no engine named 'nope' in its configuration \(known: e, watched\)$"
    with pytest.raises(UserError, match=known), open_remote(cfg, "gpu1", "nope"):
        pass
    (tmp_path / "gpu1" / "config.toml").write_text("[engines.x\n")
    with pytest.raises(UserError, match=r"^gpu1:config.toml: not valid TOML"):
        fetch_config(target)
    assert ssh_children() == []
