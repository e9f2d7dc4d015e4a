"""Group 9: something that is not an engine answers on an engine's address.

An HTML login page (200, text/html) on /v1/models or /health, or 204 on every path, left the phase at
"loading" forever. Each case serves such answers from a fake server on 127.0.0.1 and reads it through
the hub's collector (the phase and its detail, as the console and ``status`` show them), through the
lifecycle's readiness probe and phase machine, and through ``status --json`` and ``status``. Real
loading (connection refused, 503 while loading, llama.cpp's "Loading model" on every path, an
empty model list) still reads as loading.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

from console.config import Timeouts, parse_engine_ref
from console.lifecycle.phases import PhaseMachine
from console.lifecycle.probe import probe_ready
from console.model import EngineSnapshot, Phase
from console.telemetry.engine.collector import EngineCollector
from tests.hostile._metrics_fakes import MODELS, FakeEngine, Route, fixed, free_port, serve

LOGIN_PAGE = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body><form>...</form></body></html>"
LOGIN = fixed(200, "text/html; charset=utf-8", LOGIN_PAGE)
NO_CONTENT = fixed(204, "", b"")
REDIRECT = fixed(302, "text/html", b"", {"Location": "/login?next=%2Fv1%2Fmodels"})

# name -> (routes, every other path, what the phase detail must say)
_STRANGERS: dict[str, tuple[dict[str, Route], Route | None, str]] = {
    "login page on /v1/models": ({"/v1/models": LOGIN}, None, "not an engine: /v1/models answered text/html"),
    "login page on /health": ({"/health": LOGIN}, None, "not an engine: /health answered text/html"),
    "login page on every path": ({"/health": LOGIN, "/v1/models": LOGIN}, LOGIN,
                                 "not an engine: /health answered text/html"),
    "204 on every path": ({"/health": NO_CONTENT, "/v1/models": NO_CONTENT}, NO_CONTENT,
                          "not an engine: /v1/models answered 204 with no body"),
    "200 with an empty body": ({"/v1/models": fixed(200, "application/json", b"")}, None,
                               "not an engine: /v1/models answered 200 with no body"),
    "JSON of another shape": ({"/v1/models": fixed(200, "application/json", b'{"status": "ok"}')}, None,
                              "not an engine: /v1/models answered JSON that is not a model list"),
    "a JSON array": ({"/v1/models": fixed(200, "application/json", b'["m"]')}, None,
                     "not an engine: /v1/models answered JSON that is not a model list"),
    "models without ids": ({"/v1/models": fixed(200, "application/json", b'{"data": [{"name": "m"}]}')}, None,
                           "not an engine: /v1/models answered a model list without model ids"),
    "redirect to a login page": ({"/v1/models": REDIRECT}, None,
                                 "not an engine: /v1/models redirected (302) to /login?next=%2Fv1%2Fmodels"),
    "redirect of /health": ({"/health": REDIRECT}, None, "not an engine: /health redirected (302) to /login"),
    "plain text OK": ({"/v1/models": fixed(200, "text/plain", b"OK")}, None,
                      "not an engine: /v1/models answered text/plain"),
    "HTML without its content type": ({"/v1/models": fixed(200, "application/octet-stream", LOGIN_PAGE)}, None,
                                      "not an engine: /v1/models answered an HTML page"),
}
# The ready path alone (what the lifecycle probe asks): the cases that concern /v1/models.
_READY_PATH = {k: v for k, v in _STRANGERS.items() if "/v1/models" in v[2]}


def collect(engine: FakeEngine, profile: str = "vllm", rounds: int = 2, url: str | None = None) -> EngineSnapshot:
    """The hub's collector's snapshot of ``engine`` after ``rounds`` collections."""

    async def run(base: str) -> EngineSnapshot:
        collector = EngineCollector(parse_engine_ref(f"{profile}@{base}"), period=1.0)
        try:
            snap = await collector.collect()
            for _ in range(rounds - 1):
                snap = await collector.collect()
            return snap
        finally:
            collector.probe.close()

    if url is not None:
        return asyncio.run(run(url))
    with serve(engine) as base:
        return asyncio.run(run(base))


@pytest.mark.parametrize("case", sorted(_STRANGERS))
def test_the_hub_says_what_answered(case: str) -> None:
    routes, default, said = _STRANGERS[case]
    snap = collect(FakeEngine(routes, default))
    assert snap.phase is Phase.UNHEALTHY, (snap.phase, snap.health_detail)
    assert snap.health_detail.startswith(said), snap.health_detail
    assert snap.reachable


@pytest.mark.parametrize("case", sorted(_READY_PATH))
def test_the_lifecycle_probe_says_what_answered(case: str) -> None:
    routes, default, said = _READY_PATH[case]
    with serve(FakeEngine(routes, default)) as url:
        result = probe_ready(url, "/v1/models", timeout=2.0)
    assert result.not_engine and not result.ready, result
    now = [100.0]
    machine = PhaseMachine("e", timeouts=Timeouts(), clock=lambda: now[0])
    machine.starting(pid=1)
    machine.probe(result)
    assert machine.state.phase is Phase.UNHEALTHY
    assert machine.state.detail.startswith(said), machine.state.detail
    # A real engine that answers later is ready, as after any unhealthy spell.
    with serve(FakeEngine()) as url:
        machine.probe(probe_ready(url, "/v1/models", timeout=2.0))
    assert machine.phase is Phase.READY


def test_a_redirect_to_a_url_with_credentials_is_masked() -> None:
    routes = {"/v1/models": fixed(302, "", b"", {"Location": "http://admin:hunter2@sso.example/login?token=abc"})}
    snap = collect(FakeEngine(routes))
    assert snap.health_detail.startswith("not an engine: /v1/models redirected (302) to http://"), snap.health_detail
    assert "hunter2" not in snap.health_detail and "abc" not in snap.health_detail


# ------------------------------------------------------------------------- real loading stays loading
def test_connection_refused_is_not_called_a_stranger() -> None:
    snap = collect(FakeEngine(), url=f"http://127.0.0.1:{free_port()}")
    assert snap.phase is Phase.UNREACHABLE and "still loading" in snap.health_detail
    assert "not an engine" not in snap.health_detail


_LOADING_503 = fixed(503, "application/json",
                     b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}')


@pytest.mark.parametrize(("profile", "routes", "default"), [
    # llama.cpp: HTTP up at once, 503 "Loading model" on every route (../reference/engines.md).
    ("llamacpp", {"/health": _LOADING_503, "/v1/models": _LOADING_503}, _LOADING_503),
    # SGLang: 503 on /health until its warm-up request is done.
    ("sglang", {"/health": fixed(503, "text/plain", b"")}, None),
    # Answering with an empty model list: an engine with nothing loaded yet.
    ("vllm", {"/v1/models": fixed(200, "application/json", b'{"object":"list","data":[]}')}, None),
], ids=["llamacpp-503-everywhere", "sglang-503-health", "empty-model-list"])
def test_real_loading_answers_still_read_loading(profile: str, routes: dict[str, Route], default: Route | None) -> None:
    snap = collect(FakeEngine(routes, default), profile=profile)
    assert snap.phase is Phase.LOADING, (snap.phase, snap.health_detail)
    assert "not an engine" not in snap.health_detail


def test_the_lifecycle_probe_keeps_loading_on_503_and_refused() -> None:
    now = [100.0]
    machine = PhaseMachine("e", timeouts=Timeouts(), loading=("refused", "503"), clock=lambda: now[0])
    machine.starting(pid=1)
    with serve(FakeEngine({"/v1/models": _LOADING_503})) as url:
        result = probe_ready(url, "/v1/models", timeout=2.0)
    assert not result.not_engine
    machine.probe(result)
    assert machine.state.phase is Phase.LOADING
    machine.probe(probe_ready(f"http://127.0.0.1:{free_port()}", "/v1/models", timeout=2.0))
    assert machine.state.phase is Phase.LOADING and "refused" in machine.state.detail
    with serve(FakeEngine({"/v1/models": MODELS})) as url:
        machine.probe(probe_ready(url, "/v1/models", timeout=2.0))
    assert machine.phase is Phase.READY


# ---------------------------------------------------------------------------- status --json and status
@pytest.mark.parametrize("case", ["login page on /v1/models", "204 on every path"])
def test_status_says_what_answered(case: str) -> None:
    routes, default, said = _STRANGERS[case]
    with serve(FakeEngine(routes, default)) as url:
        args = [sys.executable, "-m", "console", "status", "--engine", f"vllm@{url}", "--sample", "0",
                "--gpus", "none"]
        doc = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=60, env=os.environ.copy())
        text = subprocess.run(args, capture_output=True, text=True, timeout=60, env=os.environ.copy())
    engine = json.loads(doc.stdout)["engines"][0]
    assert engine["phase"] == "unhealthy" and engine["detail"].startswith(said), engine
    assert f"unhealthy: {said}" in text.stdout, text.stdout
    assert doc.returncode == text.returncode != 0  # not ready: the exit status says so
