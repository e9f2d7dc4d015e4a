"""One engine target type: what every client of an engine works from, and the one reader of API keys."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from console.config import load_config, parse_engine_ref
from console.profiles import get_profile
from console.target import EngineTarget, api_key_from_env

CONFIG = """
[engines.a]
profile = "vllm"
url = "http://10.0.0.5:8000/"
api_key_env = "TARGET_TEST_KEY"
gpus = [2, 3]

[engines.b]
profile = "sglang"
managed = "docker"
model = "m"
port = 30001
"""


def test_api_key_from_env_reads_the_named_variable_only_when_set() -> None:
    env = {"K": "sk-1", "EMPTY": ""}
    assert api_key_from_env("K", env) == "sk-1"
    # An empty variable sends no credential, as an unset one.
    assert api_key_from_env("EMPTY", env) is None
    assert api_key_from_env("MISSING", env) is None
    assert api_key_from_env(None, env) is None
    assert api_key_from_env("", env) is None


def test_the_key_is_read_when_needed_never_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TARGET_TEST_KEY", raising=False)
    t = EngineTarget("a", get_profile("vllm"), "http://h:1", "TARGET_TEST_KEY")
    assert t.api_key is None
    monkeypatch.setenv("TARGET_TEST_KEY", "sk-later")
    assert t.api_key == "sk-later"
    # The bench hands targets to a child process: they pickle, and the key's value is not in them.
    data = pickle.dumps(t)
    assert b"sk-later" not in data
    assert pickle.loads(data) == t


def test_a_configured_instance_derives_its_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "config.toml"
    f.write_text(CONFIG)
    a, b = load_config(f).instances
    assert a.target == EngineTarget("a", a.profile, "http://10.0.0.5:8000", "TARGET_TEST_KEY", (2, 3))
    assert b.target == EngineTarget("b", b.profile, "http://127.0.0.1:30001", None, ())
    monkeypatch.setenv("TARGET_TEST_KEY", "sk-conf")
    assert a.api_key == a.target.api_key == "sk-conf"
    assert b.target.api_key is None
    adhoc = parse_engine_ref("tgi@http://h:9", api_key_env="TARGET_TEST_KEY").target
    assert (adhoc.name, adhoc.profile.name, adhoc.url, adhoc.api_key) == ("tgi@http://h:9", "tgi", "http://h:9",
                                                                           "sk-conf")
