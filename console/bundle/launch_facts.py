"""How each managed engine was started and what it printed: its launch command (secrets masked
by name, as ``ps`` shows it), its container's ``docker inspect`` data or its process record, and the
tail of its log. Each returns plain data for the bundle, which scrubs every string again on the way
in; a part that cannot be read gives a one-line reason instead."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from console.config import EngineInstance
from console.errors import UserError
from console.secrets import MASK, looks_secret, mask_args, mask_env, secret_values_in_args

DOCKER_TIMEOUT_S = 3.0
SECRET_VARIABLE = "secret-named variable"
SECRET_ARGUMENT = "secret-named argument"


@dataclass(frozen=True, slots=True)
class Facts:
    """``data`` to write (None: nothing to write), ``masked``: kind -> how many values were masked
    by name before the data reached the bundle, ``note``: why there is nothing, or what to know."""

    data: Any = None
    masked: Mapping[str, int] | None = None
    note: str = ""


def _masked_by_name(original: Sequence[str], shown: Sequence[str]) -> int:
    return sum(1 for a, b in zip(original, shown, strict=False) if a != b and MASK in b)


def launch_facts(inst: EngineInstance) -> Facts:
    """The launch the instance gets (what `ps` and the identity tab show), secrets masked."""
    if not inst.managed:
        return Facts(note="monitor-only: started outside enginedeck, so its launch command is not known here")
    from console.lifecycle.launch import build_launch

    try:
        spec = build_launch(inst)
    except UserError as exc:
        return Facts(note=f"launch cannot be built: {exc.message}")
    argv = [*(spec.entrypoint or ()), *spec.argv]
    shown = spec.display_argv()
    env = mask_env(spec.env, spec.secrets)
    data = {
        "backend": spec.backend,
        "command": spec.display(),
        "argv": shown,
        "image": spec.image or None,
        "env": env,
        "address": spec.address,
        "gpus": spec.gpus_text or None,
        "config_hash": spec.config_hash,
        "key_in_argv": spec.key_in_argv,
    }
    masked = {
        SECRET_VARIABLE: sum(1 for k in spec.env if looks_secret(k)),
        SECRET_ARGUMENT: _masked_by_name(argv, shown),
    }
    return Facts(data, masked)


def mask_inspect(attrs: Mapping[str, Any], secrets: Sequence[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """``docker inspect`` data with the environment's secret-named values and secret arguments masked."""
    out = dict(attrs)
    masked = {SECRET_VARIABLE: 0, SECRET_ARGUMENT: 0}
    config = dict(out.get("Config") or {})
    env_list = [str(e) for e in config.get("Env") or []]
    pairs = dict(e.partition("=")[::2] for e in env_list)
    known = (*secrets, *secret_values_in_args([*(config.get("Cmd") or []), *(out.get("Args") or [])]))
    shown_env = mask_env(pairs, known)
    masked[SECRET_VARIABLE] = sum(1 for k in pairs if looks_secret(k))
    config["Env"] = [f"{k}={v}" for k, v in shown_env.items()]
    for holder, key in ((config, "Cmd"), (config, "Entrypoint"), (out, "Args")):
        value = holder.get(key)
        if isinstance(value, list):
            args = [str(a) for a in value]
            holder[key] = mask_args(args, known)
            masked[SECRET_ARGUMENT] += _masked_by_name(args, holder[key])
    out["Config"] = config
    return out, masked


def container_facts(inst: EngineInstance, client: Any) -> Facts:
    """``docker inspect`` of the instance's container (found by label, or the adopted one)."""
    from console.lifecycle import adoption, docker_backend
    from console.secrets import instance_secrets

    handle = docker_backend.attach(client, inst.name)
    container = handle.container if handle is not None else None
    if container is None and (cid := adoption.adopted_id(inst.name)):
        with contextlib.suppress(Exception):
            container = client.containers.get(cid)
    if container is None:
        return Facts(note="no container (not started, or removed by `down`)")
    data, masked = mask_inspect(container.attrs, instance_secrets(inst))
    return Facts(data, masked)


def docker_client() -> tuple[Any, str]:
    """A Docker client with a short timeout, or None and why not."""
    from console.lifecycle import docker_backend
    from console.lifecycle.errors import LifecycleError

    try:
        return docker_backend.connect(timeout=DOCKER_TIMEOUT_S), ""
    except LifecycleError as exc:
        return None, exc.message


def process_facts(inst: EngineInstance) -> Facts:
    """A process engine's record (PID, start time, masked command), as `ps` reads it."""
    from console.lifecycle import process_records

    rec = process_records.read_record(inst.name)
    if rec is None:
        return Facts(note="no process record (not started here, or stopped)")
    data = asdict(rec)
    data["alive"] = rec.alive()
    return Facts(data)


def log_tail(inst: EngineInstance, n: int, client: Any = None) -> Facts:
    """The last ``n`` lines an engine printed: its container's log, or its process log copy."""
    if inst.config.managed == "docker":
        from console.lifecycle import docker_backend

        if client is None:
            return Facts(note="Docker is not reachable")
        handle = docker_backend.attach(client, inst.name)
        if handle is None:
            return Facts(note="no container (not started, or removed by `down`)")
        return Facts(list(handle.tail(n)))
    if inst.config.managed == "process":
        from console.lifecycle import process_backend

        path = process_backend.log_path(inst.name)
        if not path.exists():
            return Facts(note="no log yet (it has not been started as a process here)")
        return Facts(list(process_backend.tail_file(path, n)))
    return Facts(note="monitor-only: its output goes wherever it was started")
