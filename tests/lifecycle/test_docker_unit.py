"""Docker backend pieces that need no daemon: the unreachable-daemon error and pull progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.lifecycle.docker_backend import connect, pull_progress
from console.lifecycle.errors import LifecycleError


def test_missing_socket_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = tmp_path / "no-such.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with pytest.raises(LifecycleError) as info:
        connect(timeout=5)
    assert (
        info.value.message
        == f"cannot connect to the Docker daemon at unix://{sock}: is dockerd running? (or set DOCKER_HOST)"
    )
    assert info.value.exit_code == 2


def test_stale_socket_file_is_the_same_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    sock = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()  # the file stays, nobody listens: ConnectionRefusedError
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with pytest.raises(LifecycleError, match="cannot connect to the Docker daemon"):
        connect(timeout=5)


# The shape of a real `docker pull` JSON stream (two layers; one already present).
PULL_EVENTS: list[dict[str, Any]] = [
    {"status": "Pulling from vllm/vllm-openai", "id": "latest"},
    {"status": "Already exists", "id": "aaa", "progressDetail": {}},
    {"status": "Pulling fs layer", "id": "bbb", "progressDetail": {}},
    {"status": "Pulling fs layer", "id": "ccc", "progressDetail": {}},
    {"status": "Downloading", "id": "bbb", "progressDetail": {"current": 500, "total": 1000}},
    {"status": "Downloading", "id": "ccc", "progressDetail": {"current": 1000, "total": 3000}},
    {"status": "Downloading", "id": "bbb", "progressDetail": {"current": 1000, "total": 1000}},
    {"status": "Download complete", "id": "bbb", "progressDetail": {}},
    {"status": "Extracting", "id": "bbb", "progressDetail": {"current": 1000, "total": 1000}},
    {"status": "Pull complete", "id": "bbb", "progressDetail": {}},
    {"status": "Downloading", "id": "ccc", "progressDetail": {"current": 3000, "total": 3000}},
    {"status": "Extracting", "id": "ccc", "progressDetail": {"current": 1500, "total": 3000}},
    {"status": "Pull complete", "id": "ccc", "progressDetail": {}},
    {"status": "Digest: sha256:0123"},
    {"status": "Status: Downloaded newer image for vllm/vllm-openai:latest"},
]


def test_pull_progress_is_monotonic_and_reaches_100() -> None:
    seen: list[float] = []
    pull_progress(iter(PULL_EVENTS), lambda pct, status: seen.append(pct))
    assert seen == sorted(seen)
    assert seen[-1] == 100.0
    # Only bbb known, half downloaded: 25 %. Then ccc's total appears (18.75 % computed): held at 25.
    assert seen[1] == 25.0 and 18.75 not in seen
    # bbb pulled, ccc downloaded and half extracted: (2 * 1000 + 3000 + 1500) / (2 * 4000).
    assert 81.25 in seen


def test_pull_error_event_raises() -> None:
    events = [{"status": "Pulling"}, {"error": "pull access denied for x, repository does not exist\nmore"}]
    with pytest.raises(LifecycleError, match="pull failed: pull access denied for x"):
        pull_progress(iter(events), lambda pct, status: None)
