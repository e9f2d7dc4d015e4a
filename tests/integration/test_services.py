"""Smoke tests proving the services the integration tests rely on are really there and behave.

They fail (not skip) when a service is missing; see tests/integration/conftest.py for the policy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration import helpers
from tests.integration.conftest import RunSim, StartLlama


def run_to_completion(
    client: Any, image: str, command: list[str], entrypoint: list[str] | None = None
) -> tuple[int, str]:
    """Run a labelled, network-less container to completion; return (exit code, output). Always removed."""
    container = client.containers.create(
        image,
        command=command,
        entrypoint=entrypoint,
        network_mode="none",
        labels={helpers.TEST_LABEL: helpers.SESSION_ID},
        name=f"enginedeck-test-{helpers.SESSION_ID}-{uuid.uuid4().hex[:6]}",
    )
    try:
        container.start()
        code = int(container.wait(timeout=60)["StatusCode"])
        return code, bytes(container.logs()).decode(errors="replace")
    finally:
        container.remove(force=True)


# --- Docker ------------------------------------------------------------------------------------


@pytest.mark.docker
def test_dockerd_answers_and_base_image_runs_python(docker_client: Any) -> None:
    assert docker_client.ping() is True
    version = docker_client.version()
    assert version["ApiVersion"], version
    base = os.environ.get("ENGINEDECK_BASE_IMAGE", "enginedeck/pybase:bookworm")
    docker_client.images.get(base)  # raises ImageNotFound when provisioning did not build it
    check = "import sys, venv; print(sys.version_info >= (3, 11))"
    code, out = run_to_completion(docker_client, base, ["python3", "-c", check])
    assert (code, out.strip()) == (0, "True")


@pytest.mark.docker
def test_sim_image_runs_enginedeck_cli(docker_client: Any, sim_image: str) -> None:
    code, out = run_to_completion(docker_client, sim_image, ["--help"], entrypoint=["enginedeck"])
    assert code == 0, out
    assert "usage: enginedeck" in out
    # The image's entrypoint is the simulator command; the CLI parser must know it.
    attrs = docker_client.images.get(sim_image).attrs
    assert attrs["Config"]["Entrypoint"] == ["enginedeck", "sim"]


@pytest.mark.docker
def test_failed_container_start_leaves_nothing_behind(docker_client: Any, sim_image: str) -> None:
    # A start that fails (unknown network) must not leave a "Created" container (SDK pitfall).
    import docker

    before = {c.id for c in docker_client.containers.list(all=True, filters={"label": helpers.TEST_LABEL})}
    with pytest.raises(docker.errors.DockerException):
        helpers.start_sim_container(docker_client, sim_image, ["--help"], network=f"missing-{uuid.uuid4().hex[:8]}")
    after = {c.id for c in docker_client.containers.list(all=True, filters={"label": helpers.TEST_LABEL})}
    assert after == before


@pytest.mark.docker
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "tgi", "llamacpp"])
def test_sim_container_serves_models_on_published_port(
    docker_client: Any, run_sim: RunSim, engine: str
) -> None:
    sim = run_sim("--engine", engine)  # waits for 200 on /v1/models through the published port
    with httpx.Client(base_url=sim.base_url, timeout=10) as client:
        models = client.get("/v1/models").json()
        assert models["data"] and all(m["id"] for m in models["data"]), models
        assert client.get("/health").status_code == 200
    labels = sim.container.attrs["Config"]["Labels"]
    assert labels[helpers.TEST_LABEL] == helpers.SESSION_ID


@pytest.mark.docker
def test_sim_container_streams_and_is_removed(docker_client: Any, run_sim: RunSim) -> None:
    sim = run_sim("--engine", "vllm", "--model", "sim-model")
    body = {
        "model": "sim-model",
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.Client(base_url=sim.base_url, timeout=30) as client, client.stream(
        "POST", "/v1/chat/completions", json=body
    ) as r:
        assert r.status_code == 200, r.read()
        events = read_sse(r)
    assert events[-1] == "[DONE]"
    assert events[-2]["usage"]["completion_tokens"] > 0
    # The fixture removes containers at teardown; removing one early must not break that.
    sim.container.remove(force=True)
    assert not docker_client.containers.list(all=True, filters={"id": sim.container.id})


# --- llama.cpp ---------------------------------------------------------------------------------


def read_sse(response: httpx.Response) -> list[Any]:
    """Decode an OpenAI-style SSE stream: the JSON payloads, then the string "[DONE]"."""
    events: list[Any] = []
    for line in response.iter_lines():
        if not line.startswith("data: "):
            continue
        data = line.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


@pytest.mark.llamacpp
def test_llama_server_loads_serves_metrics_and_streams(start_llama_server: StartLlama, medium_gguf: Path) -> None:
    # The socket is bound before the model loads: /health answers 503 "Loading model" while it
    # loads (100-200 ms for the medium model). Catching that window still depends on scheduling on a
    # loaded machine, so allow a few fresh starts.
    for _ in range(5):
        server = start_llama_server(wait=False, model=medium_gguf)
        helpers.wait_health(server)
        if any(code == 503 for code, _ in server.health_polls):
            break
        helpers.stop_process(server.proc)
    polls = server.health_polls
    assert polls[-1][0] == 200, polls
    assert all(code == 503 and "Loading model" in body for code, body in polls[:-1]), polls
    assert any(code == 503 for code, _ in polls), "never saw the loading phase in 5 starts"

    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        models = client.get("/v1/models").json()
        assert [m["id"] for m in models["data"]] == ["tiny-llama"]

        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        assert "llamacpp:requests_processing" in metrics.text

        body = {
            "model": "tiny-llama",
            "messages": [{"role": "user", "content": "tell me about the river"}],
            "max_tokens": 24,
            "seed": 7,  # llama-server samples with a random seed otherwise: a full CI run once ended on "stop"
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        with client.stream("POST", "/v1/chat/completions", json=body) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = read_sse(r)

    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    usage = chunks[-1]["usage"]
    assert chunks[-1]["choices"] == []
    # The model suppresses end-of-sequence, so generation always runs to max_tokens.
    assert finishes == ["length"]
    assert usage["completion_tokens"] == 24
    assert usage["prompt_tokens"] > 0
    assert text.isascii() and text.strip(), text

    # Stopped by PID: llama-server handles SIGTERM and exits 0, unless the signal lands before its handler.
    assert helpers.stop_process(server.proc) in (0, -signal.SIGTERM), server.log_tail()


@pytest.mark.llamacpp
def test_tiny_model_tokenizer_round_trips(start_llama_server: StartLlama) -> None:
    server = start_llama_server()
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        text = "the river and the city\nsaw 42 boats!"
        tokens = client.post("/tokenize", json={"content": text, "with_pieces": True}).json()["tokens"]
        pieces = [t["piece"] for t in tokens]
        # Whole words carry their leading space; a word at the start of text is spelled out in bytes.
        assert pieces[:7] == ["t", "h", "e", " river", " and", " the", " city"], pieces
        ids = [t["id"] for t in tokens]
        assert client.post("/detokenize", json={"tokens": ids}).json()["content"] == text


def test_tiny_gguf_generator_is_deterministic(tmp_path: Path) -> None:
    generator = helpers.GGUF_GENERATOR
    outputs = []
    for name in ("a.gguf", "b.gguf"):
        subprocess.run([sys.executable, str(generator), "-o", str(tmp_path / name)], check=True, capture_output=True)
        outputs.append((tmp_path / name).read_bytes())
    assert outputs[0] == outputs[1]
    assert outputs[0][:4] == b"GGUF"
    # A different shape gives a different (bigger) file.
    bigger = [sys.executable, str(generator), "-o", str(tmp_path / "c.gguf"), "--layers", "3", "--dim", "128"]
    subprocess.run(bigger, check=True, capture_output=True)
    assert (tmp_path / "c.gguf").stat().st_size > len(outputs[0])
