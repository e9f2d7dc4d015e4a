"""Each simulator flavour end to end through the collectors, with and without an API key."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from console.config import parse_engine_ref
from console.model import Phase
from console.ports import free_port
from console.telemetry.hub import Hub
from tests import procgroup

# What each engine really has: (kv usage, prefix hit rate, ttft histogram, itl histogram).
# TGI and trtllm publish a per-request TPOT instead of an ITL histogram.
HAS = {
    "vllm": (True, True, True, True),
    "sglang": (True, True, True, True),
    "trtllm": (True, True, True, False),
    "tgi": (False, False, False, False),
    "llamacpp": (False, True, False, False),
}


def _start(engine: str, port: int, api_key: str | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "console", "sim", "--engine", engine, "--port", str(port), "--seed", "5"]
    if api_key:
        cmd += ["--api-key", api_key]
    return procgroup.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _load(url: str, key: str | None, stop: threading.Event) -> None:
    import json

    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    prefix = "you are a helpful assistant that answers in one short line " * 8
    model = ""
    while not model and not stop.is_set():
        try:
            req = urllib.request.Request(f"{url}/v1/models", headers=headers)
            with urllib.request.urlopen(req, timeout=2) as resp:
                model = json.load(resp)["data"][0]["id"]
        except OSError:
            time.sleep(0.1)
    i = 0
    while not stop.is_set():
        i += 1
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prefix + f"question {i}"}],
                           "max_tokens": 16}).encode()
        try:
            req = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=headers)
            urllib.request.urlopen(req, timeout=5).close()
        except OSError:
            time.sleep(0.1)


@pytest.mark.parametrize("engine", sorted(HAS))
@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "api-key"])
def test_flavour_through_hub(engine: str, with_key: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if with_key and engine == "trtllm":
        pytest.skip("trtllm-serve has no API key option (nothing to test)")
    key = "sk-test-key-123" if with_key else None
    if key:
        monkeypatch.setenv("ENGINEDECK_TEST_KEY", key)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start(engine, port, key)
    stop = threading.Event()
    inst = parse_engine_ref(f"{engine}@{url}", api_key_env="ENGINEDECK_TEST_KEY" if key else None)
    hub = Hub([dataclasses.replace(inst)], refresh=0.5, gpu_source="none")
    drivers = [threading.Thread(target=_load, args=(url, key, stop), daemon=True) for _ in range(3)]
    try:
        hub.start()
        for d in drivers:
            d.start()
        deadline = time.monotonic() + 25
        e = hub.latest().engines[0]
        while time.monotonic() < deadline:
            e = hub.latest().engines[0]
            if e.phase is Phase.READY and e.total is not None and e.total.generation_tps.r5s:
                break
            time.sleep(0.2)
        assert e.phase is Phase.READY, (e.phase, e.health_detail, e.metrics_freshness)
        assert not e.metrics_freshness.stale, e.metrics_freshness
        assert e.identity.version and e.identity.models
        m = e.total
        assert m is not None and m.running is not None and m.waiting is not None
        assert m.generation_tps.r5s and m.generation_tps.r5s > 0
        kv, hit, ttft, itl = HAS[engine]
        assert (m.kv_usage is not None) is kv
        time.sleep(1.5)
        m = hub.latest().engines[0].total
        assert m is not None
        assert (m.prefix_hit_rate is not None) is hit, m.prefix_hit_rate
        if hit:
            assert m.prefix_hit_rate is not None and m.prefix_hit_rate > 0.3  # the prompts share a long prefix
        assert ((m.ttft.count or 0) > 0) is ttft  # count None: no such histogram
        assert ((m.itl.count or 0) > 0) is itl
        assert ((m.tpot.count or 0) > 0) is (engine in ("vllm", "tgi", "trtllm", "sglang"))  # SGLang 0.5.23 has it
    finally:
        stop.set()
        hub.stop()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def test_llamacpp_key_missing_marks_metrics_stale_with_reason() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = _start("llamacpp", port, "sk-other")
    hub = Hub([parse_engine_ref(f"llamacpp@{url}")], refresh=0.5, gpu_source="none")
    try:
        hub.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            e = hub.latest().engines[0]
            if e.reachable and not e.metrics_freshness.pending:
                break
            time.sleep(0.1)
        e = hub.latest().engines[0]
        assert e.reachable and e.metrics_freshness.stale
        assert "401" in e.metrics_freshness.reason and "API key" in e.metrics_freshness.reason
        assert e.phase is Phase.DEGRADED
    finally:
        hub.stop()
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
