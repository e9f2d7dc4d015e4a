"""Process engines get the environment the configuration names, not the console's whole environment."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from console.config import parse_config
from console.lifecycle.launch import build_launch
from console.lifecycle.manager import LifecycleManager
from console.ports import free_port

DUMP = "import json, os, time; print('ENV ' + json.dumps(dict(os.environ)), flush=True); time.sleep(30)"


def _engine_env(monkeypatch: pytest.MonkeyPatch, **engine: Any) -> dict[str, str]:
    cfg = parse_config(
        {"engines": {"e": {"profile": "vllm", "managed": "process", "model": "m", "port": free_port(),
                           "command": ["{python}", "-c", DUMP], **engine}}},
        "t.toml",
    )  # fmt: skip
    m = LifecycleManager(cfg)
    try:
        m.start("e").result(timeout=30)
        deadline = time.monotonic() + 15
        while not (hits := m.logs("e").search("^ENV ", regex=True)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hits, "\n".join(ln.text for ln in m.logs("e").lines())
        line = m.logs("e").get(hits[0])
        assert line is not None
        m.stop("e", timeout=5).result(timeout=30)
    finally:
        m.close()
    env: dict[str, str] = json.loads(line.text.removeprefix("ENV "))
    return env


def test_process_engine_gets_only_what_the_config_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRAY_VAR", "not-for-engines")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-for-engines-either")
    monkeypatch.setenv("MY_SETTING", "wanted")
    monkeypatch.setenv("HF_TOKEN", "hf_token_value")
    monkeypatch.setenv("E_KEY", "the-api-key")
    monkeypatch.setenv("LANG", "C.UTF-8")
    env = _engine_env(monkeypatch, env_passthrough=["MY_SETTING"], env={"VLLM_LOGGING_LEVEL": "DEBUG"},
                      api_key_env="E_KEY", gpus=[1])  # fmt: skip
    assert "STRAY_VAR" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "HF_TOKEN" not in env  # env_passthrough replaces the profile's default list
    assert env["MY_SETTING"] == "wanted" and env["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert env["VLLM_API_KEY"] == "****" and env["CUDA_VISIBLE_DEVICES"] == "1"  # set (and scrubbed in logs)
    assert env["PATH"] and env["HOME"] and env["LANG"] == "C.UTF-8"  # what any program needs
    # Without env_passthrough, the profile's default list (HF_TOKEN) is passed.
    env = _engine_env(monkeypatch)
    assert env["HF_TOKEN"] == "****" and "STRAY_VAR" not in env and "MY_SETTING" not in env


def test_passed_through_values_change_the_launch_hash_but_secrets_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def spec_hash(**engine: Any) -> str:
        cfg = parse_config({"engines": {"e": {"profile": "vllm", "managed": "process", "model": "m",
                                              "command": ["{python}", "-c", "0"], **engine}}}, "t.toml")  # fmt: skip
        return build_launch(cfg.instances[0]).config_hash

    # Values no path holds: the command names the interpreter's path, where a short secret like
    # "one" would be masked inside ".../ci-clone/..." and change the hash for that reason alone.
    monkeypatch.setenv("HF_TOKEN", "hf-token-value-1")
    h = spec_hash()
    monkeypatch.setenv("HF_TOKEN", "hf-token-value-2")
    assert spec_hash() == h  # a rotated token is not a configuration change
    monkeypatch.setenv("MY_SETTING", "a")
    h = spec_hash(env_passthrough=["MY_SETTING"])
    monkeypatch.setenv("MY_SETTING", "b")
    assert spec_hash(env_passthrough=["MY_SETTING"]) != h
