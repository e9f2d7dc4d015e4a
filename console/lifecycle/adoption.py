"""Adopted engines: containers enginedeck did not start that a user handed to it (`enginedeck adopt`).

An adopted container is stopped by enginedeck but never removed, and only ever that container is
watched for its instance. The store, ``state_dir()/adopted.json`` (instance name -> container id,
mode 0600), is read by every enginedeck on the host: `ps` and the console in another terminal
see the adoption too. The container side (finding the candidate, the Docker calls) is
``docker_backend.DockerEngines.adopt``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.paths import private_dir, state_dir


def _path() -> Path:
    return state_dir() / "adopted.json"


def adopted() -> dict[str, str]:
    """Instance name -> full container id of every adoption (empty when none or unreadable)."""
    try:
        data = json.loads(_path().read_text())
        return {str(k): str(v) for k, v in data.items()}
    except (OSError, ValueError, AttributeError):
        return {}


def adopted_id(name: str) -> str | None:
    return adopted().get(name)


def save(name: str, container_id: str) -> None:
    """Record ``container_id`` as instance ``name``'s engine (written whole, then renamed)."""
    data = adopted()
    data[name] = container_id
    path = _path()
    private_dir(path.parent)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data))
    tmp.replace(path)
