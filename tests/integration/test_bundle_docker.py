"""An incident bundle of a container engine (real daemon, the simulator image): its `docker inspect`
data and log tail are in the bundle, with the passed-through token and the API key masked (the
secret launch argument of a process engine: tests/bundle/test_planted_secrets.py).

Marked `docker`: a missing daemon or image FAILS this test (tests/integration/conftest.py);
ENGINEDECK_SKIP_DOCKER=1 is the only way to skip it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.bundle.make import BundleRequest, make_bundle
from console.bundle.window import Window
from console.config import parse_config
from console.lifecycle.audit import AuditLog
from console.lifecycle.launch import LABEL_INSTANCE
from console.lifecycle.manager import LifecycleManager
from console.model import Phase
from tests.bundle.conftest import decoded, extract

pytestmark = pytest.mark.docker

NAME = f"bundle-t{os.getpid()}"
KEY = "planted-docker-key-0a9d"
HF = "hf_" + "D0ck3rPl4nt3dT0k3nAbCdEfGhIjKlMnOp"


@pytest.fixture
def manager(docker_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sim_image: str,
            free_port: Any) -> Iterator[LifecycleManager]:  # fmt: skip
    monkeypatch.setenv("ENGINEDECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("BUNDLE_DOCKER_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", HF)
    cfg = parse_config({"engines": {NAME: {
        "profile": "vllm", "managed": "docker", "image": sim_image, "model": "m", "served_name": "opt",
        "port": free_port(), "api_key_env": "BUNDLE_DOCKER_KEY", "env_passthrough": ["HF_TOKEN"],
        "command": ["--engine", "vllm", "--host", "0.0.0.0", "--port", "{port}", "--model", "{served_name}",
                    "--load-time", "0.5"],
    }}}, "test.toml")  # fmt: skip
    m = LifecycleManager(cfg, audit=AuditLog(tmp_path / "state" / "audit.log"))
    try:
        yield m
    finally:
        for c in docker_client.containers.list(all=True, filters={"label": [f"{LABEL_INSTANCE}={NAME}"]}):
            c.remove(force=True, v=True)
        m.close()


def test_container_inspect_and_logs_are_in_the_bundle_masked(manager: LifecycleManager, tmp_path: Path) -> None:
    manager.start(NAME).result(timeout=60)
    assert manager.wait(NAME, timeout=90).phase is Phase.READY
    result = make_bundle(BundleRequest(instances=[manager.config.instance(NAME)], window=Window.last(600, time.time()),
                                       dest=tmp_path / "d.tar.gz", recording_dir=tmp_path / "none"))  # fmt: skip
    root = extract(result.path, tmp_path / "x")
    d = root / "engines" / NAME
    inspect = json.loads((d / "inspect.json").read_text())
    assert f"enginedeck-{NAME}" in inspect["Name"]
    env = dict(e.partition("=")[::2] for e in inspect["Config"]["Env"])
    assert env["HF_TOKEN"] == "****" and env["VLLM_API_KEY"] == "****"
    assert "--engine" in inspect["Args"]
    assert (d / "log.txt").read_text().strip()  # the container's output
    for p in root.rglob("*"):
        if p.is_file():
            for part in decoded(p.read_bytes()):
                text = part.decode("utf-8", "replace")
                assert not [s for s in (KEY, HF) if s in text], p
    masked = json.loads((root / "manifest.json").read_text())["redaction"]["by_file"]
    assert masked[f"engines/{NAME}/inspect.json"]["secret-named variable"] >= 2
