"""Docker backend: engines as containers, through the docker SDK.

Every function here blocks on the Docker API; the manager calls them in worker threads only.
Rules: never pull implicitly (``images.get`` first, then ``create`` + ``start``; ``containers.run``
pulls a missing image, https://docker-py.readthedocs.io/en/stable/containers.html), ``init=True`` so
SIGTERM reaches the engine, and a failed start removes its ``Created`` container. Both
``docker.errors.DockerException`` and ``requests.exceptions.ConnectionError`` are caught (a fixed API
version defers connection errors to the first call, as the latter).
"""

from __future__ import annotations

import codecs
import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.errors import UserError
from console.lifecycle import adoption
from console.lifecycle.backend import ExitInfo, Found, Handle, Listed, Listing, PullProgress
from console.lifecycle.errors import DockerUnreachable, LifecycleError, translate_docker_error
from console.lifecycle.launch import LABEL_HASH, LABEL_INSTANCE, LABEL_MANAGED, LABEL_PROFILE, LaunchSpec
from console.lifecycle.logs import LogBuffer
from console.lifecycle.state import Backend

if TYPE_CHECKING:
    from console.config import EngineInstance
    from console.profiles import EngineProfile

API_TIMEOUT = 60.0


def _errors() -> tuple[type[BaseException], ...]:
    import docker.errors
    import requests.exceptions

    return (docker.errors.DockerException, requests.exceptions.RequestException)


def connect(timeout: float = API_TIMEOUT, base_url: str | None = None) -> Any:
    """A DockerClient for ``base_url`` (a remote host's forwarded socket), else DOCKER_HOST (or the
    default socket); raises LifecycleError."""
    import docker

    try:
        client = docker.DockerClient(base_url=base_url, timeout=int(timeout)) if base_url else (
            docker.from_env(timeout=int(timeout)))
        client.ping()
    except _errors() as exc:
        raise translate_docker_error(exc) from None
    return client


class DockerHandle:
    def __init__(self, container: Any) -> None:
        self.container = container

    @property
    def ident(self) -> str:
        return str(self.container.short_id)

    @property
    def pid(self) -> int | None:
        return None

    @property
    def container_id(self) -> str | None:
        return str(self.container.short_id)

    def poll(self) -> ExitInfo | None:
        import docker.errors

        try:
            self.container.reload()
        except docker.errors.NotFound:
            return ExitInfo(None)
        state = self.container.attrs.get("State", {})
        if state.get("Running") or state.get("Restarting"):
            return None
        if self.container.status == "created":
            return ExitInfo(None)
        return ExitInfo(state.get("ExitCode"), bool(state.get("OOMKilled")))

    def _signal(self, sig: str) -> None:
        import docker.errors

        try:
            self.container.kill(signal=sig)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: not running any more
                raise translate_docker_error(exc) from None

    def terminate(self) -> None:
        self._signal("SIGTERM")

    def kill(self) -> None:
        self._signal("SIGKILL")

    def host_pids(self) -> set[int]:
        try:
            top = self.container.top()
        except _errors():
            return set()
        titles = [t.upper() for t in top.get("Titles") or []]
        if "PID" not in titles:
            return set()
        col = titles.index("PID")
        out: set[int] = set()
        for row in top.get("Processes") or []:
            try:
                out.add(int(row[col]))
            except (ValueError, IndexError):
                continue
        return out

    def follow_logs(self, buffer: LogBuffer, on_chunk: Callable[[], None], stop: threading.Event) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            stream: Iterator[bytes] = self.container.logs(stream=True, follow=True, stdout=True, stderr=True)
            for chunk in stream:
                if buffer.feed(decoder.decode(chunk)):
                    on_chunk()
                if stop.is_set():
                    break
        except _errors():
            pass
        buffer.feed(decoder.decode(b"", final=True))
        buffer.flush_partial()
        on_chunk()

    def tail(self, n: int) -> tuple[str, ...]:
        try:
            data: bytes = self.container.logs(tail=n, stdout=True, stderr=True)
        except _errors():
            return ()
        return tuple(line for line in data.decode("utf-8", "replace").splitlines() if line.strip())[-n:]

    def remove(self) -> None:
        import docker.errors

        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except _errors() as exc:
            raise translate_docker_error(exc) from None


def _device_requests(gpus: object) -> list[Any]:
    from docker.types import DeviceRequest

    if gpus == "none" or gpus == 0 or gpus == []:
        return []
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if isinstance(gpus, int):
        return [DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    if isinstance(gpus, list):
        return [DeviceRequest(device_ids=[str(i) for i in gpus], capabilities=[["gpu"]])]
    return []


def create_kwargs(spec: LaunchSpec) -> dict[str, Any]:
    """``containers.create`` arguments for a launch (exposed for tests and `--dry-run`)."""
    from docker.types import Ulimit

    kw: dict[str, Any] = {
        "image": spec.image,
        "command": list(spec.argv),
        "name": spec.container_name,
        "labels": spec.labels(),
        "environment": dict(spec.env),
        "ports": {f"{spec.container_port}/tcp": (spec.bind, spec.host_port)},
        "init": True,
        "detach": True,
    }
    if spec.entrypoint:
        kw["entrypoint"] = list(spec.entrypoint)
    reqs = _device_requests(spec.gpus)
    if reqs:
        kw["device_requests"] = reqs
    if spec.ipc_mode:
        kw["ipc_mode"] = spec.ipc_mode
    if spec.shm_size:
        kw["shm_size"] = spec.shm_size
    if spec.ulimits:
        kw["ulimits"] = [Ulimit(name=k, soft=v, hard=v) for k, v in spec.ulimits.items()]
    if spec.volumes:
        kw["volumes"] = {h: {"bind": c, "mode": "rw"} for h, c in spec.volumes.items()}
    return kw


def find_managed(client: Any, name: str) -> list[Any]:
    """Containers enginedeck started for instance ``name`` (any state)."""
    try:
        return list(
            client.containers.list(all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_INSTANCE}={name}"]})
        )
    except _errors() as exc:
        raise translate_docker_error(exc, instance=name) from None


def remove_by_label(client: Any, name: str) -> int:
    """Remove every container labelled for ``name``; returns how many (best effort)."""
    n = 0
    try:
        for c in client.containers.list(
            all=True, filters={"label": [f"{LABEL_MANAGED}=1", f"{LABEL_INSTANCE}={name}"]}
        ):
            try:
                c.remove(force=True, v=True)
                n += 1
            except _errors():
                pass
    except _errors():
        pass
    return n


def launch(client: Any, spec: LaunchSpec) -> DockerHandle:
    """Create and start the container; on any failure no container of this launch remains."""
    import docker.errors

    try:
        client.images.get(spec.image)
    except docker.errors.ImageNotFound:
        raise LifecycleError(
            f"image {spec.image} is not present locally; run `enginedeck pull {spec.name}` (start never pulls)", 1
        ) from None
    except _errors() as exc:
        raise translate_docker_error(exc, instance=spec.name, image=spec.image) from None

    for old in find_managed(client, spec.name):
        if old.status in ("running", "restarting", "paused"):
            raise LifecycleError(f"{spec.name} is already running (container {old.short_id}); stop or restart it", 1)
        try:
            old.remove(force=True, v=True)  # a leftover from an earlier run of this instance
        except _errors() as exc:
            raise translate_docker_error(exc, instance=spec.name) from None

    container = None
    try:
        container = client.containers.create(**create_kwargs(spec))
        container.start()
        container.reload()
        ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        if container.status == "running" and not ports.get(f"{spec.container_port}/tcp"):
            # dockerd with --bridge=none ignores -p on the default network without an error.
            container.remove(force=True, v=True)
            container = None
            raise LifecycleError(
                f"port {spec.address} was not published (dockerd runs without its default bridge, "
                "--bridge=none?); restart dockerd with bridge networking"
            )
    except _errors() as exc:
        err = translate_docker_error(exc, instance=spec.name, image=spec.image, port=spec.address)
        try:
            if container is not None:
                container.remove(force=True, v=True)
        except _errors():
            pass
        remove_by_label(client, spec.name)
        raise err from None
    return DockerHandle(container)


def attach(client: Any, name: str) -> DockerHandle | None:
    """The newest container of instance ``name``, if one exists."""
    found = find_managed(client, name)
    if not found:
        return None
    found.sort(key=lambda c: str(c.attrs.get("Created", "")), reverse=True)
    return DockerHandle(found[0])


@dataclass(frozen=True, slots=True)
class ContainerInfo:
    id: str
    name: str
    image: str
    status: str  # docker's: running, exited, created...
    ports: tuple[str, ...]  # "127.0.0.1:8000->8000/tcp"
    labels: Mapping[str, str]
    gpus: str
    managed: bool
    instance: str | None
    profile: str | None
    config_hash: str | None
    exit_code: int | None
    oom_killed: bool


def _ports(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    for cport, binds in sorted(ports.items()):
        for b in binds or []:
            out.append(f"{b.get('HostIp', '')}:{b.get('HostPort', '')}->{cport}")
    if not out:  # created/exited containers keep only the requested bindings
        pb = (attrs.get("HostConfig") or {}).get("PortBindings") or {}
        for cport, binds in sorted(pb.items()):
            for b in binds or []:
                out.append(f"{b.get('HostIp', '')}:{b.get('HostPort', '')}->{cport}")
    return tuple(out)


def _gpus(attrs: Mapping[str, Any]) -> str:
    reqs = (attrs.get("HostConfig") or {}).get("DeviceRequests") or []
    for r in reqs:
        if r.get("DeviceIDs"):
            return ",".join(r["DeviceIDs"])
        if r.get("Count") == -1:
            return "all"
        if r.get("Count"):
            return str(r["Count"])
    return ""


def describe(container: Any) -> ContainerInfo:
    attrs = container.attrs
    labels = dict(container.labels or {})
    image = ((attrs.get("Config") or {}).get("Image")) or ""
    state = attrs.get("State") or {}
    managed = labels.get(LABEL_MANAGED) == "1"
    return ContainerInfo(
        id=str(container.short_id),
        name=str(container.name),
        image=str(image),
        status=str(container.status),
        ports=_ports(attrs),
        labels=labels,
        gpus=_gpus(attrs),
        managed=managed,
        instance=labels.get(LABEL_INSTANCE),
        profile=labels.get(LABEL_PROFILE),
        config_hash=labels.get(LABEL_HASH),
        exit_code=state.get("ExitCode") if not state.get("Running") else None,
        oom_killed=bool(state.get("OOMKilled")),
    )


def image_repo(image: str) -> str:
    """``repo`` of ``repo:tag`` / ``repo@digest`` (a registry port's colon is kept)."""
    image = image.split("@", 1)[0]
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        image = image[: len(image) - len(last)] + last.split(":", 1)[0]
    return image


def list_containers(client: Any, profile_images: Mapping[str, str]) -> list[tuple[ContainerInfo, str | None]]:
    """Managed containers (any state) and running containers recognisable as engines.

    ``profile_images`` maps image repo -> profile name. Returns (info, profile) pairs; a
    non-managed container is included only when its image repo matches a profile's image and it
    publishes a port (monitor-only until adopted).
    """
    out: list[tuple[ContainerInfo, str | None]] = []
    try:
        containers = client.containers.list(all=True)
    except _errors() as exc:
        raise translate_docker_error(exc) from None
    for c in containers:
        try:
            info = describe(c)
        except _errors():
            continue
        if info.managed:
            out.append((info, info.profile))
            continue
        profile = profile_images.get(image_repo(info.image))
        if profile and info.status == "running" and info.ports:
            out.append((info, profile))
    return out


def pull_progress(events: Iterator[Mapping[str, Any]], cb: Callable[[float, str], None]) -> None:
    """Turn a pull's JSON event stream into overall percent (download and extract count half each)."""
    total: dict[str, int] = {}
    down: dict[str, int] = {}
    extract: dict[str, int] = {}
    done: set[str] = set()
    last = -1.0
    for ev in events:
        if "error" in ev:
            raise LifecycleError(f"pull failed: {str(ev['error']).splitlines()[0]}")
        layer = str(ev.get("id", ""))
        status = str(ev.get("status", ""))
        detail = ev.get("progressDetail") or {}
        if status.startswith("Downloading") and detail.get("total"):
            total[layer] = int(detail["total"])
            down[layer] = int(detail.get("current", 0))
        elif status.startswith("Extracting") and detail.get("total"):
            total.setdefault(layer, int(detail["total"]))
            down[layer] = total[layer]
            extract[layer] = int(detail.get("current", 0))
        elif status in ("Pull complete", "Already exists", "Download complete"):
            if status == "Download complete" and layer in total:
                down[layer] = total[layer]
            else:
                done.add(layer)
        size = sum(total.values())
        if size:
            got = sum(
                2 * v if k in done else min(down.get(k, 0), v) + min(extract.get(k, 0), v) for k, v in total.items()
            )
            # Totals grow as layers become known: never let the bar go backwards.
            pct = max(last, min(100.0, 50.0 * got / size))
        else:
            pct = max(last, 0.0)
        if pct != last or status.startswith(("Status", "Digest")):
            last = pct
            cb(pct, status)
    cb(100.0, "pulled")


def pull(client: Any, image: str, cb: Callable[[float, str], None]) -> None:
    repo = image_repo(image)
    tag = image[len(repo) + 1 :] if len(image) > len(repo) else "latest"
    try:
        events = client.api.pull(repo, tag=tag, stream=True, decode=True)
        pull_progress(events, cb)
    except _errors() as exc:
        err = translate_docker_error(exc, image=image)
        text = err.message.removeprefix("docker: ")
        if "dial tcp" in text or "no such host" in text or "i/o timeout" in text:
            text = f"the registry is unreachable from this host ({text})"
        raise LifecycleError(f"cannot pull {image}: {text}") from None


def image_of(inst: EngineInstance) -> str:
    """The image an instance runs: its own ``image``, else its profile's image and tag."""
    return inst.config.image or f"{inst.profile.container.image}:{inst.profile.container.tag}"


def find_foreign(client: Any, inst: EngineInstance) -> str | None:
    """A running container no enginedeck started, of this profile's image, publishing the instance's port."""
    port = str(inst.config.port or inst.profile.container.port)
    repo = image_repo(inst.config.image or inst.profile.container.image)
    for c, _ in list_containers(client, {repo: inst.profile.name}):
        if c.managed:
            continue
        if any(p.split("->", 1)[0].rsplit(":", 1)[-1] == port for p in c.ports):
            return c.id
    return None


class DockerEngines:
    """Engines as containers (an ``EngineBackend``). One client, connected at first use and again
    after the daemon was lost (``DockerUnreachable``). ``base_url``: where a remote host's Docker
    Engine is reached (called at each connect: it opens or reuses the ssh tunnel); ``where`` names
    that host in the errors."""

    kind = Backend.DOCKER
    noun = "container"
    keeps_crashed = True
    can_adopt = True

    def __init__(self, base_url: Callable[[], str] | None = None, where: str = "") -> None:
        self._client: Any = None
        self._lock = threading.Lock()
        self._base_url = base_url
        self._where = where

    @contextlib.contextmanager
    def _docker(self) -> Iterator[Any]:
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            client = self._client
        try:
            yield client
        except DockerUnreachable:
            with self._lock:
                if self._client is client:
                    self._client = None
            if self._where:  # not DOCKER_HOST's socket: say whose engine it was
                raise DockerUnreachable(f"lost the Docker Engine of {self._where} (its ssh tunnel ended, or "
                                        "dockerd stopped there); the next action connects again") from None
            raise

    def _connect(self) -> Any:
        if self._base_url is None:
            return connect()
        try:
            return connect(base_url=self._base_url())
        except UserError as exc:  # the tunnel did not come up: its one line, and connect anew next time
            raise DockerUnreachable(exc.message) from None

    def launch(self, spec: LaunchSpec) -> Handle:
        with self._docker() as client:
            return launch(client, spec)

    def attach(self, inst: EngineInstance) -> Found | None:
        with self._docker() as client:
            handle = attach(client, inst.name)
            adopted = False
            if handle is None and (cid := adoption.adopted_id(inst.name)):
                with contextlib.suppress(Exception):  # the adopted container is gone: nothing to attach
                    handle = DockerHandle(client.containers.get(cid))
                    adopted = True
            if handle is None:
                return None
            info = describe(handle.container)
        running = info.status in ("running", "restarting")
        return Found(
            handle,
            running,
            address=", ".join(info.ports),
            gpus=info.gpus,
            config_hash=info.config_hash or "",
            detail="running (found by label)",
            exit=None if running else ExitInfo(info.exit_code, info.oom_killed),
            adopted=adopted,
        )

    def replacement(self, inst: EngineInstance, old: Handle | None, *, adopted: bool) -> Found | None:
        # The same container running again (`docker restart`/`start`), or a newer labelled one.
        handle = old if isinstance(old, DockerHandle) and old.poll() is None else None
        if handle is None and not adopted:  # an adopted container is only ever that container
            with self._docker() as client:
                newer = attach(client, inst.name)
            handle = newer if newer is not None and newer.poll() is None else None
        if handle is None:
            return None
        info = describe(handle.container)
        return Found(handle, True, address=", ".join(info.ports), gpus=info.gpus, config_hash=info.config_hash or "")

    def release(self, old: Handle) -> None:
        """An ended container stays for inspection until `down`/`remove`."""

    def foreign(self, inst: EngineInstance) -> str | None:
        with self._docker() as client:
            return find_foreign(client, inst)

    def adopt(self, inst: EngineInstance, ident: str | None) -> str:
        import docker.errors

        with self._docker() as client:
            if ident is None:
                ident = find_foreign(client, inst)
                if ident is None:
                    raise LifecycleError(
                        f"{inst.name}: no running container of {inst.profile.name} publishes {inst.url}", 1
                    )
            try:
                container = client.containers.get(ident)
            except docker.errors.NotFound:
                raise LifecycleError(f"no container {ident!r}", 1) from None
        adoption.save(inst.name, str(container.id))
        return f"container {container.short_id} ({container.name})"

    def remove_leftovers(self, inst: EngineInstance) -> str:
        with self._docker() as client:
            running = [c for c in find_managed(client, inst.name) if c.status in ("running", "restarting", "paused")]
            if running:
                raise LifecycleError(f"{inst.name} is running ({running[0].short_id}); stop it first", 1)
            return f"removed {remove_by_label(client, inst.name)} container(s)"

    def image(self, inst: EngineInstance) -> str | None:
        return image_of(inst)

    def pull(self, image: str, progress: PullProgress) -> None:
        with self._docker() as client:
            pull(client, image, progress)

    def listing(self, instances: Sequence[EngineInstance], profiles: Mapping[str, EngineProfile]) -> Listing:
        # image repo -> profile: the configured instances' own images first, then every profile's.
        images: dict[str, str] = {}
        for inst in instances:
            if inst.config.image:
                images.setdefault(image_repo(inst.config.image), inst.profile.name)
            images.setdefault(inst.profile.container.image, inst.profile.name)
        for prof in profiles.values():
            images.setdefault(prof.container.image, prof.name)
        try:
            with self._docker() as client:
                found = list_containers(client, images)
        except LifecycleError as exc:
            return Listing(error=exc.message)
        return Listing(tuple(
            Listed(ident=c.id, name=c.name, managed=c.managed, instance=c.instance, status=c.status,
                   address=", ".join(c.ports), gpus=c.gpus, image=c.image, profile=profile or "",
                   config_hash=c.config_hash or "", exit_code=c.exit_code, oom_killed=c.oom_killed)
            for c, profile in found
        ))  # fmt: skip

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
