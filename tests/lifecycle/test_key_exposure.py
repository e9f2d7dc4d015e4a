"""Where an engine's API key travels: by environment where the engine reads one (vLLM, TGI,
llama.cpp), so it stays out of `ps` and `docker inspect`; SGLang reads it only from `--api-key`
(its server_args.py reads no environment variable for it), and `up` says so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from console.config import parse_config
from console.lifecycle.launch import build_launch
from console.ports import free_port
from tests.lifecycle.test_commands import wait_line

KEY = "exposure-test-key-4c1d"
ENGINEDECK = [sys.executable, "-m", "console"]


@pytest.mark.parametrize(("profile", "env_name"), [("vllm", "VLLM_API_KEY"), ("tgi", "API_KEY"),
                                                   ("llamacpp", "LLAMA_API_KEY"), ("sglang", None)])  # fmt: skip
def test_key_goes_by_environment_where_the_engine_reads_one(
    profile: str, env_name: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXPOSURE_KEY", KEY)
    cfg = parse_config({"engines": {"e": {"profile": profile, "managed": "docker", "model": "m",
                                          "api_key_env": "EXPOSURE_KEY"}}}, "t.toml")  # fmt: skip
    spec = build_launch(cfg.instances[0])
    in_argv = any(KEY in a for a in (*(spec.entrypoint or ()), *spec.argv))
    if env_name:
        assert spec.env[env_name] == KEY and not in_argv and not spec.key_in_argv
    else:
        assert in_argv and spec.key_in_argv  # SGLang has no environment variable for its key
    assert KEY not in spec.display()


def test_up_says_when_the_key_is_on_the_command_line(tmp_path: Path) -> None:
    command = ["{python}", "-m", "console", "sim", "--engine", "sglang", "--host", "{host}", "--port", "{port}",
               "--model", "{served_name}"]  # fmt: skip
    conf = tmp_path / "c.toml"
    conf.write_text('[engines.s]\nprofile = "sglang"\nmanaged = "process"\nmodel = "m"\napi_key_env = "EXPOSURE_KEY"\n'
                    f"port = {free_port()}\ncommand = {json.dumps(command)}\n")  # fmt: skip
    up = subprocess.Popen([*ENGINEDECK, "up", "s", "--config", str(conf)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env={**os.environ, "EXPOSURE_KEY": KEY})  # fmt: skip
    try:
        wait_line(up, "ready at")
    finally:
        up.send_signal(signal.SIGINT)
        out, err = up.communicate(timeout=60)
    assert "sglang takes its API key only on the command line" in err and "`ps`" in err
    assert KEY not in out + err
