"""The Docker backend against the real daemon and the simulator image (no mocks).

Marked `docker`: a missing daemon or image FAILS these tests (tests/integration/conftest.py);
ENGINEDECK_SKIP_DOCKER=1 is the only way to skip them. Every test checks that no container with
our labels is left behind, also after errors.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from console.cli import main as cli_main
from console.config import Config, parse_config
from console.lifecycle.audit import AuditLog
from console.lifecycle.errors import LifecycleError
from console.lifecycle.launch import LABEL_HASH, LABEL_INSTANCE, LABEL_MANAGED, LABEL_PROFILE
from console.lifecycle.manager import LifecycleManager
from console.model import Phase
from tests import procgroup

pytestmark = pytest.mark.docker

# Instance names carry a per-process suffix so parallel sessions on one daemon do not collide.
SUFFIX = f"t{os.getpid()}"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(d))
    return d


def ours(client: Any, name: str) -> list[Any]:
    # sparse: the list alone, no inspect of each container. A full list inspects every one it got,
    # and one that a manager removes between the two answers 404 (a CI run failed so, on a loaded
    # machine, while the other manager removed the old container of a restart). reload() for attrs.
    return list(client.containers.list(all=True, sparse=True, filters={"label": [f"{LABEL_INSTANCE}={name}"]}))


def _gone_within(client: Any, name: str, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while ours(client, name):
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def sim_engine(image: str, port: int, *extra: str, **over: Any) -> dict[str, Any]:
    return {
        "profile": "vllm",
        "managed": "docker",
        "image": image,
        "model": "facebook/opt-125m",
        "served_name": "opt",
        "port": port,
        "command": ["--engine", "vllm", "--host", "0.0.0.0", "--port", "{port}", "--model", "{served_name}", *extra],
        **over,
    }


def cfg(**engines: dict[str, Any]) -> Config:
    return parse_config({"engines": engines}, "test.toml")


@pytest.fixture
def manager(docker_client: Any, state_dir: Path) -> Iterator[Any]:
    made: list[LifecycleManager] = []

    def make(config: Config) -> LifecycleManager:
        m = LifecycleManager(config, audit=AuditLog(state_dir / "audit.log"))
        made.append(m)
        return m

    yield make
    for m in made:
        for name in m.names:
            for c in ours(docker_client, name):
                c.remove(force=True, v=True)
        m.close()


def test_start_ready_metrics_stop(docker_client: Any, sim_image: str, free_port: Any, manager: Any) -> None:
    name, port = f"sim-{SUFFIX}", free_port()
    m = manager(cfg(**{name: sim_engine(sim_image, port, "--load-time", "1")}))
    st = m.start(name).result(timeout=60)
    assert st.phase is Phase.STARTING and st.container_id
    st = m.wait(name, timeout=60)
    assert st.phase is Phase.READY, st.one_line()
    assert st.saw(Phase.LOADING)

    r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert r.status_code == 200 and "vllm:num_requests_running" in r.text

    (c,) = ours(docker_client, name)
    c.reload()
    assert c.labels[LABEL_MANAGED] == "1" and c.labels[LABEL_PROFILE] == "vllm"
    assert c.labels[LABEL_HASH] == m.launch_spec(name).config_hash
    assert c.attrs["HostConfig"]["Init"] is True
    assert c.attrs["HostConfig"]["PortBindings"] == {"8000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]}
    assert c.attrs["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostIp"] == "127.0.0.1"
    assert c.attrs["HostConfig"]["IpcMode"] == "host"  # from the vllm profile

    rows = {r.name: r for r in m.ps().result(timeout=30).rows}
    assert rows[name].phase == "ready" and rows[name].managed and not rows[name].monitor_only

    st = m.stop(name).result(timeout=60)
    assert st.phase is Phase.EXITED and st.exit_code in (0, 143)
    assert ours(docker_client, name) == []
    assert [(e.action, e.result) for e in m.audit.read()] == [("start", "ok"), ("stop", "ok")]


def test_crash_shows_exit_code_and_last_logs(docker_client: Any, sim_image: str, free_port: Any, manager: Any) -> None:
    name = f"crash-{SUFFIX}"
    m = manager(cfg(**{name: sim_engine(sim_image, free_port(), "--fault", "crash-after=1")}))
    m.start(name).result(timeout=60)
    st = m.wait(name, until={Phase.EXITED, Phase.FAILED}, timeout=60)
    assert st.exit_code not in (None, 0), st.one_line()
    assert st.last_log_lines, "the last log lines are kept in the state"
    assert f"exit code {st.exit_code}" in st.detail
    if st.phase is Phase.EXITED:  # crashed after ready: the container stays for inspection
        later = manager(cfg(**{name: sim_engine(sim_image, 1, "--fault", "crash-after=1")}))
        found = later.refresh(name).result(timeout=30)
        assert found.phase is Phase.EXITED and found.detail == f"found exited (exit code {st.exit_code})"
        assert found.last_log_lines
        row = next(r for r in later.ps().result(timeout=30).rows if r.name == name)
        assert row.phase == f"exited ({st.exit_code})"
    m.remove(name).result(timeout=30)
    assert ours(docker_client, name) == []


def test_config_change_is_noticed(docker_client: Any, sim_image: str, free_port: Any, manager: Any) -> None:
    name, port = f"cfg-{SUFFIX}", free_port()
    m = manager(cfg(**{name: sim_engine(sim_image, port)}))
    m.start(name).result(timeout=60)
    assert m.wait(name, timeout=60).phase is Phase.READY
    same = manager(cfg(**{name: sim_engine(sim_image, port)})).refresh(name).result(timeout=30)
    assert same.phase is Phase.READY and not same.config_changed
    edited = manager(cfg(**{name: sim_engine(sim_image, port, "--seed", "7")}))
    st = edited.refresh(name).result(timeout=30)
    assert st.config_changed and st.phase is Phase.READY
    row = next(r for r in edited.ps().result(timeout=30).rows if r.name == name)
    assert row.config_changed
    st = edited.restart(name).result(timeout=60)
    assert not st.config_changed and st.config_hash == edited.launch_spec(name).config_hash
    assert edited.wait(name, timeout=60).phase is Phase.READY
    edited.stop(name).result(timeout=60)
    # The first manager still watches this instance: it saw the restart from outside and may be
    # removing the old container at the same moment (Docker then answers "removal already in
    # progress" and lists it until that removal ends). What counts is that nothing stays.
    assert _gone_within(docker_client, name, 15.0), ours(docker_client, name)


def _expect_error(m: LifecycleManager, name: str) -> str:
    with pytest.raises(LifecycleError) as info:
        m.start(name).result(timeout=60)
    assert m.status(name).phase is Phase.FAILED
    assert "\n" not in info.value.message
    return info.value.message


def test_daemon_not_running(
    docker_client: Any, sim_image: str, free_port: Any, manager: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"nodaemon-{SUFFIX}"
    m = manager(cfg(**{name: sim_engine(sim_image, free_port())}))
    sock = tmp_path / "missing.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    msg = _expect_error(m, name)
    assert msg == f"cannot connect to the Docker daemon at unix://{sock}: is dockerd running? (or set DOCKER_HOST)"
    assert ours(docker_client, name) == []


def test_image_not_present_is_never_pulled(docker_client: Any, free_port: Any, manager: Any) -> None:
    import docker.errors

    name, image = f"noimg-{SUFFIX}", "enginedeck/does-not-exist:1"
    m = manager(cfg(**{name: sim_engine(image, free_port())}))
    msg = _expect_error(m, name)
    assert msg == f"image {image} is not present locally; run `enginedeck pull {name}` (start never pulls)"
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(image)
    assert ours(docker_client, name) == []


def test_pull_failure_is_one_line_and_audited(
    docker_client: Any, free_port: Any, manager: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    name, image = f"pull-{SUFFIX}", "enginedeck/does-not-exist:1"
    m = manager(cfg(**{name: sim_engine(image, free_port())}))
    progress: list[float] = []
    with pytest.raises(LifecycleError) as info:
        m.pull(name, lambda pct, status: progress.append(pct)).result(timeout=120)
    assert info.value.message.startswith(f"cannot pull {image}: ")
    assert "\n" not in info.value.message and info.value.exit_code == 2
    assert m.status(name).phase is Phase.FAILED
    assert [(e.action, e.result) for e in m.audit.read()] == [("pull", "failed")]


def test_port_in_use(docker_client: Any, sim_image: str, manager: Any) -> None:
    name = f"busy-{SUFFIX}"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        m = manager(cfg(**{name: sim_engine(sim_image, port)}))
        msg = _expect_error(m, name)
    assert msg.startswith(f"port 127.0.0.1:{port} is already in use (by another process); stop it or set")
    assert ours(docker_client, name) == []


def test_gpu_request_refused(docker_client: Any, sim_image: str, free_port: Any, manager: Any) -> None:
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this daemon has the NVIDIA runtime: a GPU request would be granted")
    name = f"gpu-{SUFFIX}"
    m = manager(cfg(**{name: sim_engine(sim_image, free_port(), gpus="all")}))
    msg = _expect_error(m, name)
    assert msg.startswith(
        'GPU request refused: this Docker has no NVIDIA runtime (could not select device driver "" with '
        "capabilities: [[gpu]]); install nvidia-container-toolkit"
    )
    assert ours(docker_client, name) == []


def test_container_exits_at_once(docker_client: Any, sim_image: str, free_port: Any, manager: Any) -> None:
    name = f"dies-{SUFFIX}"
    engine = sim_engine(sim_image, free_port())
    engine["command"] = ["--engine", "no-such-engine"]
    m = manager(cfg(**{name: engine}))
    m.start(name).result(timeout=60)
    st = m.wait(name, timeout=60)
    assert st.phase is Phase.FAILED
    assert st.exit_code == 2
    assert "invalid choice: 'no-such-engine'" in st.last_log_lines[-1]
    assert st.detail.startswith("exited during ") and "with exit code 2: " in st.detail
    assert ours(docker_client, name) == []


def test_permission_denied_on_the_socket(docker_client: Any) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    if os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock") != "unix:///var/run/docker.sock":
        pytest.skip("the daemon is not on the default socket")
    code = (
        "from console.lifecycle.docker_backend import connect\n"
        "from console.lifecycle.errors import LifecycleError\n"
        "try:\n    connect()\nexcept LifecycleError as e:\n    print(e.message)\n"
    )
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to drop to an unprivileged user")
    drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    out = procgroup.run(
        [*drop, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == (
        "permission denied on the Docker socket (unix:///var/run/docker.sock): "
        "run as a member of the 'docker' group or as root"
    ), out.stderr


def test_monitor_only_until_adopted(docker_client: Any, sim_image: str, run_sim: Any, manager: Any) -> None:
    sim = run_sim("--engine", "vllm")
    name = f"foreign-{SUFFIX}"
    m = manager(cfg(**{name: sim_engine(sim_image, sim.port)}))
    st = m.refresh(name).result(timeout=30)
    assert st.monitor_only and sim.container.short_id == st.container_id
    row = next(r for r in m.ps().result(timeout=30).rows if r.ident == sim.container.short_id)
    assert row.monitor_only and not row.managed and row.phase == "ready"
    with pytest.raises(LifecycleError, match="was not started by enginedeck; adopt it first"):
        m.stop(name).result(timeout=30)
    st = m.adopt(name).result(timeout=30)
    assert not st.monitor_only and st.phase is Phase.READY
    st = m.stop(name, timeout=10).result(timeout=60)
    assert st.phase is Phase.EXITED
    sim.container.reload()
    assert sim.container.status == "exited"  # stopped, but an adopted container is never removed
    actions = [(e.action, e.result) for e in m.audit.read()]
    assert ("adopt", "ok") in actions and ("stop", "refused") in actions


def test_cli_up_ps_logs_down(
    docker_client: Any, sim_image: str, free_port: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, port = f"cli-{SUFFIX}", free_port()
    conf = tmp_path / "config.toml"
    conf.write_text(
        f"""
[engines.{name}]
profile = "vllm"
managed = "docker"
image = "{sim_image}"
model = "facebook/opt-125m"
port = {port}
command = ["--engine", "vllm", "--host", "0.0.0.0", "--port", "{{port}}", "--model", "{{served_name}}"]
"""
    )
    try:
        assert cli_main(["up", name, "--config", str(conf), "--timeout", "60"]) == 0
        assert f"{name} ready at http://127.0.0.1:{port}" in capsys.readouterr().out
        assert cli_main(["ps", "--config", str(conf), "--json"]) == 0
        import json

        rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["engines"]}
        assert rows[name]["phase"] == "ready" and rows[name]["address"] == f"127.0.0.1:{port}->8000/tcp"
        assert cli_main(["logs", name, "--config", str(conf), "--tail", "50"]) == 0
        assert "Starting vLLM API server" in capsys.readouterr().out
        assert cli_main(["down", name, "--config", str(conf)]) == 1  # not a terminal and no --yes
        assert "add --yes" in capsys.readouterr().err
        assert cli_main(["down", name, "--config", str(conf), "--yes"]) == 0
        assert f"{name}: stopped (exit code" in capsys.readouterr().out
        assert ours(docker_client, name) == []
        # The same `up` with the daemon away: one line, exit 2, nothing created.
        os.environ["DOCKER_HOST"] = f"unix://{tmp_path}/none.sock"
        try:
            assert cli_main(["up", name, "--config", str(conf)]) == 2
        finally:
            del os.environ["DOCKER_HOST"]
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            f"enginedeck: cannot connect to the Docker daemon at unix://{tmp_path}/none.sock: "
            "is dockerd running? (or set DOCKER_HOST)"
        ]
    finally:
        for c in ours(docker_client, name):
            c.remove(force=True, v=True)


def test_cli_adopt(docker_client: Any, sim_image: str, run_sim: Any, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    sim = run_sim("--engine", "vllm")
    name = f"adopt-{SUFFIX}"
    conf = tmp_path / "config.toml"
    conf.write_text(
        f"""
[engines.{name}]
profile = "vllm"
managed = "docker"
image = "{sim_image}"
model = "facebook/opt-125m"
served_name = "opt"
port = {sim.port}
command = ["--engine", "vllm", "--host", "0.0.0.0", "--port", "{{port}}", "--model", "{{served_name}}"]
"""
    )
    assert cli_main(["adopt", name, "--config", str(conf)]) == 1  # not a terminal and no --yes
    assert "add --yes" in capsys.readouterr().err
    assert cli_main(["adopt", name, "--config", str(conf), "--yes"]) == 0
    assert f"{name}: adopted (ready" in capsys.readouterr().out
    assert cli_main(["down", name, "--config", str(conf), "--yes"]) == 0
    sim.container.reload()
    assert sim.container.status == "exited"  # stopped; an adopted container is never removed
