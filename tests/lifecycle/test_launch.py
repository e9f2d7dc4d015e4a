from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from console.config import parse_config
from console.errors import UserError
from console.lifecycle.docker_backend import create_kwargs, image_repo
from console.lifecycle.launch import LaunchSpec, build_launch, expand
from console.secrets import mask_args


def spec_for(engine: dict[str, Any], env: dict[str, str] | None = None) -> LaunchSpec:
    cfg = parse_config({"engines": {"e1": engine}}, "test.toml")
    return build_launch(cfg.instance("e1"), environ=env or {})


def test_expand_placeholders_and_extra() -> None:
    out = expand(
        ["{model}", "--port", "{port}", "{extra}", "--x={tp}"], {"model": "m", "port": "1", "tp": "2"}, ["-a", "b"]
    )
    assert out == ["m", "--port", "1", "-a", "b", "--x=2"]
    with pytest.raises(UserError, match=r"unknown placeholder \{nope\}"):
        expand(["--y", "{nope}"], {"model": "m"})
    # JSON arguments keep their braces; {{name}} is a literal {name}.
    assert expand(['{"temperature": 0.5}', "{{model}}"], {"model": "m"}) == ['{"temperature": 0.5}', "{model}"]


def test_vllm_container_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", "sk-secret-1")
    spec = spec_for(
        {
            "profile": "vllm",
            "managed": "docker",
            "model": "Qwen/Qwen3-0.6B",
            "served_name": "qwen",
            "port": 18000,
            "tp": 2,
            "gpus": [0, 1],
            "extra_args": ["--max-model-len", "4096"],
            "api_key_env": "MY_VLLM_KEY",
            "model_cache": "/data/hf",
        },
        env={"HF_TOKEN": "hf_abc123", "UNRELATED": "x"},
    )
    assert spec.image == "vllm/vllm-openai:latest"
    assert spec.argv[:3] == ("Qwen/Qwen3-0.6B", "--served-model-name", "qwen")
    assert "--tensor-parallel-size" in spec.argv and spec.argv[spec.argv.index("--tensor-parallel-size") + 1] == "2"
    assert spec.argv[-2:] == ("--max-model-len", "4096")
    assert spec.argv[spec.argv.index("--port") + 1] == "8000"  # the container port
    assert (spec.bind, spec.host_port, spec.container_port) == ("127.0.0.1", 18000, 8000)
    # Environment by name: HF_TOKEN passed through, the key under the engine's own variable.
    assert spec.env == {"HF_TOKEN": "hf_abc123", "VLLM_API_KEY": "sk-secret-1"}
    assert set(spec.secrets) == {"sk-secret-1", "hf_abc123"}
    assert spec.volumes == {"/data/hf": "/root/.cache/huggingface"}
    assert spec.ipc_mode == "host"
    text = spec.display()
    assert "sk-secret-1" not in text and "hf_abc123" not in text
    assert "-e HF_TOKEN" in text and "--gpus 0,1" in text and "-p 127.0.0.1:18000:8000" in text
    kw = create_kwargs(spec)
    assert kw["init"] is True and kw["detach"] is True
    assert kw["ports"] == {"8000/tcp": ("127.0.0.1", 18000)}
    assert kw["labels"] == {
        "enginedeck.managed": "1",
        "enginedeck.instance": "e1",
        "enginedeck.profile": "vllm",
        "enginedeck.config-hash": spec.config_hash,
    }
    assert kw["device_requests"][0]["DeviceIDs"] == ["0", "1"]
    assert kw["volumes"] == {"/data/hf": {"bind": "/root/.cache/huggingface", "mode": "rw"}}
    assert "entrypoint" not in kw  # the image's own (vllm serve)


def test_gpu_requests_all_and_count() -> None:
    base = {"profile": "vllm", "managed": "docker", "model": "m"}
    all_req = create_kwargs(spec_for({**base, "gpus": "all"}))["device_requests"][0]
    assert all_req["Count"] == -1 and all_req["Capabilities"] == [["gpu"]]
    assert create_kwargs(spec_for({**base, "gpus": 2}))["device_requests"][0]["Count"] == 2
    assert "device_requests" not in create_kwargs(spec_for(base))


def test_sglang_key_as_argument_is_masked_for_display(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGL_KEY", "supersecret42")
    spec = spec_for({"profile": "sglang", "managed": "docker", "model": "m", "api_key_env": "SGL_KEY"})
    assert spec.argv[-2:] == ("--api-key", "supersecret42")
    assert spec.entrypoint == ("python3", "-m", "sglang.launch_server")
    assert spec.shm_size == "32g"
    shown = spec.display_argv()
    assert shown[-2:] == ["--api-key", "****"]
    assert "supersecret42" not in spec.display()


def test_trtllm_ulimits() -> None:
    kw = create_kwargs(spec_for({"profile": "trtllm", "managed": "docker", "model": "m"}))
    assert {u["Name"]: u["Soft"] for u in kw["ulimits"]} == {"memlock": -1, "stack": 67108864}


def test_missing_key_variable_is_a_user_error() -> None:
    with pytest.raises(UserError, match="api_key_env names NOPE_KEY, which is not set"):
        spec_for({"profile": "vllm", "managed": "docker", "model": "m", "api_key_env": "NOPE_KEY"})


def test_process_command_with_python_placeholder() -> None:
    spec = spec_for(
        {
            "profile": "vllm",
            "managed": "process",
            "model": "m",
            "port": 18123,
            "bind": "127.0.0.1",
            "command": ["{python}", "-m", "console", "sim", "--port", "{port}", "--host", "{host}", "{extra}"],
            "extra_args": ["--load-time", "1"],
        }
    )
    assert spec.argv == (
        sys.executable,
        "-m",
        "console",
        "sim",
        "--port",
        "18123",
        "--host",
        "127.0.0.1",
        "--load-time",
        "1",
    )
    assert spec.backend == "process" and spec.host_port == 18123


def test_process_binary_not_on_path() -> None:
    with pytest.raises(UserError, match="'llama-server' is not on PATH"):
        spec_for({"profile": "llamacpp", "managed": "process", "model": "/m.gguf"}, env={})


def test_config_hash_follows_what_changes_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"profile": "vllm", "managed": "docker", "model": "m", "api_key_env": "K"}
    monkeypatch.setenv("K", "key-one")
    h1 = spec_for(base).config_hash
    assert spec_for(base).config_hash == h1  # stable
    monkeypatch.setenv("K", "key-two")
    assert spec_for(base).config_hash == h1  # a rotated key alone is not a config change
    assert spec_for({**base, "extra_args": ["--enforce-eager"]}).config_hash != h1
    assert spec_for({**base, "port": 9000}).config_hash != h1


def test_mask_args_forms() -> None:
    assert mask_args(["--api-key", "k1", "--api-key=k2", "--token", "t", "x=kk3"], ["kk3"]) == [
        "--api-key",
        "****",
        "--api-key=****",
        "--token",
        "****",
        "x=****",
    ]


def test_image_repo() -> None:
    assert image_repo("vllm/vllm-openai:latest") == "vllm/vllm-openai"
    assert image_repo("localhost:5000/a/b:1.2") == "localhost:5000/a/b"
    assert image_repo("ghcr.io/ggml-org/llama.cpp@sha256:abc") == "ghcr.io/ggml-org/llama.cpp"
    assert image_repo("plain") == "plain"


def test_default_model_cache_is_the_users_hf_cache() -> None:
    spec = spec_for({"profile": "vllm", "managed": "docker", "model": "m"})
    assert spec.volumes == {str(Path("~/.cache/huggingface").expanduser()): "/root/.cache/huggingface"}


@pytest.mark.parametrize(("managed", "to"), [("docker", "container"), ("process", "process")])
def test_a_key_for_an_engine_that_takes_none_is_refused(monkeypatch: pytest.MonkeyPatch, managed: str,
                                                         to: str) -> None:
    monkeypatch.setenv("TRT_KEY", "sk-never-passed")  # trtllm-serve has no API key option at all
    engine = {"profile": "trtllm", "managed": managed, "model": "m", "api_key_env": "TRT_KEY",
              "command": [sys.executable, "-c", "pass"]}
    with pytest.raises(UserError, match=rf"^e1: profile trtllm has no way to pass an API key to the {to}$"):
        spec_for(engine, {"TRT_KEY": "sk-never-passed"})


@pytest.mark.parametrize("managed", ["docker", "process"])
def test_sglang_key_goes_on_the_command_line_in_both_backends(monkeypatch: pytest.MonkeyPatch, managed: str) -> None:
    monkeypatch.setenv("SGL_KEY", "sk-sgl")
    engine = {"profile": "sglang", "managed": managed, "model": "m", "api_key_env": "SGL_KEY", "port": 30000,
              "command": [sys.executable, "-m", "sglang.launch_server", "--model-path", "{model}"]}
    spec = spec_for(engine, {"SGL_KEY": "sk-sgl"})
    assert spec.argv[-2:] == ("--api-key", "sk-sgl") and spec.key_in_argv
    assert "sk-sgl" not in spec.env.values()
