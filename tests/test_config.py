"""Configuration: validation errors name file, key and problem; secrets only by env-var name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.config import load_config, parse_engine_ref, resolve_engines
from console.errors import ConfigError, UserError
from tests import procgroup

GOOD = """
[console]
refresh = 2.0

[engines.big-vllm]
profile = "vllm"
url = "http://10.0.0.5:8000/"
api_key_env = "VLLM_KEY"

[engines.qwen-sglang]
profile = "sglang"
managed = "docker"
model = "Qwen/Qwen3-0.6B"
port = 30001
gpus = [2, 3]
env = { SGLANG_LOG_LEVEL = "info" }
env_passthrough = ["HF_TOKEN"]
"""


def write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "config.toml"
    f.write_text(text)
    return f


def test_good_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.console.refresh == 2.0
    a, b = cfg.instances
    assert (a.name, a.profile.name, a.url) == ("big-vllm", "vllm", "http://10.0.0.5:8000")
    assert b.url == "http://127.0.0.1:30001" and b.gpus == (2, 3) and b.managed
    monkeypatch.setenv("VLLM_KEY", "sk-secret")
    assert a.api_key == "sk-secret"


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ('[engines.a]\nprofile = "vllm"\nurl = "http://x:1"\napi_key = "sk-1"\n', "engines.a.api_key", "api_key_env"),
        ('[engines.a]\nprofile = "vllm"\nurl = "http://x:1"\nenv = { HF_TOKEN = "hf_x" }\n', "engines.a.env",
         "env_passthrough"),
        ('[engines.a]\nprofile = "nope"\nurl = "http://x:1"\n', "engines.a.profile", "unknown profile 'nope'"),
        ('[engines.a]\nprofile = "vllm"\nurl = "localhost:8000"\n', "engines.a.url", "not an http(s) URL"),
        ('[engines.a]\nprofile = "vllm"\n', "engines.a", "either url"),
        ('[engines.a]\nprofile = "vllm"\nurl = "http://x:1"\nport = 70000\n', "engines.a.port", "less than"),
        ('[console]\nrefresh = "fast"\n', "console.refresh", "number"),
        ('[engines.a]\nprofile = "vllm"\nurl = "http://x:1"\napi_key_env = "sk-abc123"\n', "engines.a.api_key_env",
         "NAME of an environment variable"),
        ("[engines.a\n", "", "invalid TOML"),
    ],
)
def test_bad_config_one_line(tmp_path: Path, body: str, key: str, problem: str) -> None:
    f = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_config(f)
    msg = str(info.value)
    assert "\n" not in msg and str(f) in msg and key in msg and problem in msg
    assert "sk-1" not in msg and "hf_x" not in msg


def test_engine_refs() -> None:
    inst = parse_engine_ref("vllm@http://127.0.0.1:8000")
    assert inst.profile.name == "vllm" and inst.url == "http://127.0.0.1:8000" and inst.adhoc
    for bad in ("vllm", "@http://x", "vllm@", "vllm@ftp://x"):
        with pytest.raises(UserError):
            parse_engine_ref(bad)
    with pytest.raises(UserError, match="unknown engine profile 'foo'"):
        parse_engine_ref("foo@http://127.0.0.1:1")


def test_resolve_unknown_name(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, GOOD))
    with pytest.raises(UserError, match="no engine named 'x'"):
        resolve_engines(cfg, ["x"])


def _cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **(env_extra or {})}
    return procgroup.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, env=env,
                         timeout=60)


def test_config_show_masks_secrets(tmp_path: Path) -> None:
    f = write(tmp_path, GOOD)
    r = _cli("config", "show", "--json", "--config", str(f), env_extra={"VLLM_KEY": "sk-very-secret"})
    assert r.returncode == 0, r.stderr
    assert "sk-very-secret" not in r.stdout
    doc = json.loads(r.stdout)
    assert doc["engines"]["big-vllm"]["credential_in_environment"] == "set"
    assert doc["engines"]["big-vllm"]["api_key_env"] == "VLLM_KEY"
    r = _cli("config", "path", env_extra={"ENGINEDECK_CONFIG_DIR": str(tmp_path)})
    assert r.stdout.strip() == str(tmp_path / "config.toml")


def test_status_config_error_exit_1(tmp_path: Path) -> None:
    f = write(tmp_path, '[engines.a]\nprofile = "vllm"\n')
    r = _cli("status", "--config", str(f), "--sample", "0", "--gpus", "none")
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "engines.a" in r.stderr and "Traceback" not in r.stderr
