"""Real-library conformance: engine-shaped servers built with prometheus_client, FastAPI and uvicorn,
from console.ui.widgets.row_table import RowTable
read through enginedeck's own paths (``status --json`` as a subprocess, the Hub, the console's table).

The servers (``engine_app.py``) serve their registries the way the engines mount them: vLLM's plain
instrumentator route plus the ASGI mount, SGLang's and trtllm-serve's gzip-negotiating ASGI app over a
multiprocess registry. Every gauge must come back exact and every rate within 5% of what went in.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import procgroup
from tests.conformance import engine_app as ea

APP = Path(__file__).with_name("engine_app.py")
RATES = (300.0, 120.0)  # prompt, generation tokens/s per replica
METRICS_PATH = {"vllm": "/metrics", "sglang": "/metrics", "trtllm": "/prometheus/metrics"}


@contextlib.contextmanager
def engine_server(flavour: str, *, gzip_on: bool = True) -> Iterator[str]:
    cmd = [sys.executable, str(APP), "--flavour", flavour, "--rates", ",".join(map(str, RATES))]
    if not gzip_on:
        cmd.append("--no-gzip")
    proc = procgroup.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        if not line.startswith("PORT "):
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"engine_app did not start: {line!r} {err[-2000:]}")
        url = f"http://127.0.0.1:{int(line.split()[1])}"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.05)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def expected(flavour: str) -> dict[str, float]:
    if flavour == "vllm":
        gauges = list(ea.VLLM_ENGINES.values())
        running = sum(g[0] for g in gauges)
        waiting = sum(g[1] for g in gauges)
        kv = max(g[2] for g in gauges)
    else:
        running, waiting, kv = ea.SGLANG_GAUGES if flavour == "sglang" else ea.TRTLLM_GAUGES
        gauges = [(running, waiting, kv)]
    replicas = len(gauges)
    return {"running": running, "waiting": waiting, "kv_usage": kv,
            "prompt_tps": RATES[0] * replicas, "generation_tps": RATES[1] * replicas}


# -- the wire: the servers really answer as the engines do (so the tests below mean something) --------

def test_wire_matches_the_engines() -> None:
    with engine_server("sglang") as url:
        r = httpx.get(url + "/metrics", headers={"Accept-Encoding": "gzip"})
        assert r.headers["content-encoding"] == "gzip"
        assert r.headers.get("transfer-encoding") == "chunked"
        with httpx.Client() as client, client.stream("GET", url + "/metrics",
                                                   headers={"Accept-Encoding": "gzip"}) as raw:
            body = b"".join(raw.iter_raw())
        assert body[:2] == b"\x1f\x8b", "the ASGI app must compress when gzip is accepted"
        assert b"sglang:num_running_reqs" in gzip.decompress(body)
    with engine_server("vllm") as url:
        plain = httpx.get(url + "/metrics", headers={"Accept-Encoding": "gzip"})
        assert "content-encoding" not in plain.headers, "vLLM's instrumentator route is never compressed"
        assert plain.headers["content-type"] == __import__("prometheus_client").CONTENT_TYPE_LATEST
        mounted = httpx.get(url + "/metrics/", headers={"Accept-Encoding": "gzip"})
        assert mounted.headers["content-encoding"] == "gzip"
    with engine_server("trtllm") as url:
        assert httpx.get(url + "/metrics").json() == []
        r = httpx.get(url + "/prometheus/metrics", headers={"Accept-Encoding": "gzip"})
        assert r.headers["content-encoding"] == "gzip"


# -- status --json: the headless path ----------------------------------------------------------------

def _status(ref: str, sample: float = 6.0) -> dict[str, Any]:
    out = procgroup.run(
        [sys.executable, "-m", "console", "status", "--engine", ref, "--json", "--gpus", "none",
         "--sample", str(sample), "--refresh", "0.5", "--config", os.devnull],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr + out.stdout
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _check_model(model: dict[str, Any], flavour: str) -> None:
    want = expected(flavour)
    assert model["running"] == want["running"]
    assert model["waiting"] == want["waiting"]
    assert model["kv_usage"] == pytest.approx(want["kv_usage"], abs=1e-12)
    for key, field in (("prompt_tps", "prompt_tokens_per_s"), ("generation_tps", "generation_tokens_per_s")):
        got = model[field]["5s"]
        assert got is not None, f"{field}: no rate"
        assert got == pytest.approx(want[key], rel=0.05), f"{field} {got} vs {want[key]}"
    ttft = model["ttft_s"]
    assert ttft["p50"] is not None and 0.06 < ttft["p50"] <= 0.08, ttft  # every observation is 0.07 s


@pytest.mark.slow
@pytest.mark.parametrize("flavour,gzip_on", [("vllm", True), ("sglang", True), ("sglang", False),
                                             ("trtllm", True)])
def test_status_json_reads_engine_shaped_registry(flavour: str, gzip_on: bool) -> None:
    with engine_server(flavour, gzip_on=gzip_on) as url:
        doc = _status(f"{flavour}@{url}")
    (engine,) = doc["engines"]
    assert engine["phase"] == "ready", engine
    assert engine["stale"] is False, engine["metrics"]
    (model,) = engine["per_model"]
    assert model["model"] == ea.MODEL
    _check_model(model, flavour)
    if flavour == "vllm":
        assert model["replicas"] == 2
        assert model["kv_usage_mean"] == pytest.approx(sum(g[2] for g in ea.VLLM_ENGINES.values()) / 2)


# -- OpenMetrics negotiation: the same registry in the other format normalises to the same numbers ----

@pytest.mark.parametrize("flavour", ["vllm", "sglang"])
def test_openmetrics_and_text_agree(flavour: str) -> None:
    from console.profiles import load_profiles
    from console.telemetry.metrics.normalize import normalize
    from console.transport.bodies import decode_body

    profile = load_profiles()[flavour]
    path = "/metrics/" if flavour == "vllm" else METRICS_PATH[flavour]  # vLLM negotiates on the ASGI mount
    with engine_server(flavour) as url:
        readings = {}
        for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
            r = httpx.get(url + path, headers={"Accept": accept, "Accept-Encoding": "gzip"})
            assert r.status_code == 200
            if "openmetrics" in accept:
                assert r.headers["content-type"].startswith("application/openmetrics-text")
            readings[accept] = normalize(profile, r.content, full=True)
            # The raw wire bytes decode the same way through enginedeck's own decoder.
            assert decode_body(gzip.compress(r.content), "gzip", 1 << 24) == r.content
    text, om = readings.values()
    assert text.ok and om.ok, (text.error_summary(), om.error_summary())
    want = expected(flavour)
    for reading in (text, om):
        (model,) = reading.models.values()
        assert model.gauges["running"] == want["running"]
        assert model.gauges["waiting"] == want["waiting"]
        assert model.gauges["kv_usage"] == want["kv_usage"]


# -- the console: the numbers reach the engines table -------------------------------------------------

@pytest.mark.slow
async def test_console_table_shows_gzip_engine_numbers() -> None:

    from console.config import parse_engine_ref
    from console.telemetry.hub import Hub
    from console.ui.app import DeckApp, UiOptions
    from console.ui.widgets.row_table import RowTable

    with engine_server("sglang") as sg_url, engine_server("vllm") as v_url:
        a = parse_engine_ref(f"sglang@{sg_url}")
        b = parse_engine_ref(f"vllm@{v_url}")
        hub = Hub([a, b], refresh=0.5, gpu_source="none")
        hub.start()
        try:
            app = DeckApp(hub, options=UiOptions(), profiles={a.profile.name: a.profile, b.profile.name: b.profile})
            async with app.run_test(size=(200, 50)) as pilot:
                table = app.screen.query_one("#engines", RowTable)

                def cell(row: str, col: str) -> str:
                    return str(table.get_cell(row, col))

                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    await pilot.pause(0.2)
                    if cell(a.name, "running") == "5" and cell(b.name, "running") == "7" and \
                            cell(a.name, "gen") not in ("--", "n/a", ""):
                        break
                assert cell(a.name, "running") == str(ea.SGLANG_GAUGES[0])
                assert cell(a.name, "waiting") == str(ea.SGLANG_GAUGES[1])
                assert cell(a.name, "kv") == f"{ea.SGLANG_GAUGES[2] * 100:.0f}%"
                assert cell(b.name, "running") == str(expected("vllm")["running"])
                assert "unparseable" not in str(hub.latest().engine(a.name))
                snap = hub.latest().engine(a.name)
                assert snap is not None and not snap.metrics_freshness.stale
        finally:
            hub.stop()
