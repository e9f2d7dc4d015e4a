"""The version matrix: each supported engine version's own metric declarations (``declared.py``),
served as that engine serves them, read value by value through ``enginedeck status --json`` and,
mapping by mapping, through the collector's pipeline (normalise -> windows -> the status document).

Every figure below is what went into the registry: gauges exactly, rates within 5 % (15 % where they
come from per-tick histogram observations, whose tick jitters), histogram means exactly (Δsum /
Δcount of a fixed observation).
"""

from __future__ import annotations

import contextlib
import dataclasses
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

from console.profiles import EngineProfile, load_profiles
from console.status_doc import model_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests import procgroup
from tests.versions.declared import MODEL, TARGETS

SERVER = Path(__file__).with_name("declared.py")
MiB = 1024 * 1024


def _rate(v: float, rel: float = 0.05) -> Any:
    return pytest.approx(v, rel=rel)


def _exact(v: float) -> Any:
    return pytest.approx(v, rel=1e-9, abs=1e-12)


# target -> (canonical mappings the checks need, {path in the per-model document: expected value}).
# A path is dotted; "x.now" is the rate shown as current. None: the figure must be n/a (null).
EXPECT: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "vllm-0.6.0": (
        ("running", "waiting", "kv_usage", "prompt_tokens", "generation_tokens", "requests_finished",
         "preemptions", "ttft", "itl", "e2e"),
        {"running": 3, "waiting": 1, "kv_usage": _exact(0.25), "prompt_tokens_per_s.now": _rate(300),
         "generation_tokens_per_s.now": _rate(120), "requests_per_s.now": _rate(3.0),
         "preemptions_per_s.now": _rate(0.5), "ttft_s.mean": _exact(0.07), "itl_s.mean": _exact(0.02),
         "e2e_s.mean": _exact(1.5), "queue_time_s.mean": None, "tpot_s.mean": None, "spec_decode": None,
         "kv_transfer": None, "prefill_time_s.mean": None}),
    "vllm-0.8.0": (
        ("running", "waiting", "kv_usage", "prompt_tokens", "generation_tokens", "prefix_hits", "prefix_queries",
         "requests_finished", "requests_failed", "ttft", "itl", "queue_time", "prefill_time", "decode_time",
         "inference_time"),
        {"running": 3, "waiting": 1, "kv_usage": _exact(0.25), "prompt_tokens_per_s.now": _rate(300),
         "generation_tokens_per_s.now": _rate(120), "prefix_hit_rate": _rate(0.25, 0.01),
         "requests_per_s.now": _rate(2.5), "errors_per_s.now": _rate(0.5), "ttft_s.mean": _exact(0.07),
         "itl_s.mean": _exact(0.02), "queue_time_s.mean": _exact(0.05), "prefill_time_s.mean": _exact(0.3),
         "decode_time_s.mean": _exact(1.1), "inference_time_s.mean": _exact(1.4)}),
    "vllm-0.10.0": (
        ("running", "waiting", "kv_usage", "prompt_tokens", "generation_tokens", "prefix_hits", "prefix_queries",
         "requests_finished", "requests_failed", "preemptions", "ttft", "itl", "queue_time", "prefill_time",
         "decode_time"),
        {"running": 3, "waiting": 1, "kv_usage": _exact(0.25), "prompt_tokens_per_s.now": _rate(300),
         "generation_tokens_per_s.now": _rate(120), "prefix_hit_rate": _rate(0.25, 0.01),
         "requests_per_s.now": _rate(2.5), "errors_per_s.now": _rate(0.5), "preemptions_per_s.now": _rate(0.5),
         "ttft_s.mean": _exact(0.07), "itl_s.mean": _exact(0.02), "queue_time_s.mean": _exact(0.05),
         "prefill_time_s.mean": _exact(0.3), "decode_time_s.mean": _exact(1.1)}),
    "vllm-0.34.0": (
        ("running", "waiting", "waiting_capacity", "waiting_deferred", "sleep_discarded", "kv_usage",
         "prefix_hits", "prefix_queries", "prompt_cached_by_tier", "external_prefix_hits", "external_prefix_queries",
         "admission_rejections", "itl", "tpot", "kv_transfer_bytes", "kv_transfer_time", "kv_transfers",
         "kv_transfer_failures", "prefill_time", "decode_time", "inference_time"),
        {"running": 3, "waiting": 3, "waiting_by_reason": {"capacity": 2, "deferred": 1}, "sleep_level": 2,
         "kv_usage": _exact(0.25), "prefix_hit_rate": _rate(0.25, 0.01),
         "prompt_cache_tiers.tokens_per_s.device": _rate(90), "prompt_cache_tiers.tokens_per_s.host": _rate(40),
         "prompt_cache_tiers.tokens_per_s.p2p": _rate(20), "prompt_cache_tiers.tokens_per_s.disk": 0,
         "prompt_cache_tiers.external_hit_rate": _rate(0.25, 0.01), "admission_rejections_per_s.now": _rate(0.75),
         "itl_s.mean": _exact(0.02), "tpot_s.mean": _exact(0.025),
         "kv_transfer.latency_s": _exact(0.02), "kv_transfer.link_gb_s": _rate(2**24 / 0.02 / 1e9, 1e-3),
         "kv_transfer.bytes_per_s": _rate(2**24 * 10, 0.15), "kv_transfer.failures_per_s.now": _rate(0.1),
         "prefill_time_s.mean": _exact(0.3), "decode_time_s.mean": _exact(1.1),
         "inference_time_s.mean": _exact(1.4)}),
    "sglang-0.4.4": (
        ("running", "waiting", "kv_usage", "prompt_tokens", "generation_tokens", "ttft", "itl", "e2e"),
        {"running": 5, "waiting": 2, "kv_usage": _exact(0.375), "spec_decode": None,
         "prompt_tokens_per_s.now": _rate(300), "generation_tokens_per_s.now": _rate(120),
         "ttft_s.mean": _exact(0.07), "itl_s.mean": _exact(0.02), "e2e_s.mean": _exact(1.5), "tpot_s.mean": None}),
    "sglang-0.5.23": (
        ("running", "waiting", "kv_usage", "prompt_tokens", "requests_failed", "tpot", "itl", "kv_transfer_bytes",
         "kv_transfer_time", "kv_transfers", "kv_transfer_failures", "pd_bootstrap_queue", "pd_inflight_queue",
         "pd_bootstrap_failures"),
        {"running": 5, "waiting": 4, "kv_usage": _exact(0.375), "spec_decode": None,
         "prompt_tokens_per_s.now": _rate(300), "errors_per_s.now": _rate(0.25),
         "tpot_s.mean": _exact(0.025), "itl_s.mean": _exact(0.02),
         "kv_transfer.latency_s": _exact(0.04), "kv_transfer.link_gb_s": _rate(64 * MiB / 0.04 / 1e9, 1e-3),
         "kv_transfer.bytes_per_s": _rate(64 * MiB * 10, 0.15), "kv_transfer.failures_per_s.now": _rate(0.1),
         "pd_queues.bootstrap": 2, "pd_queues.inflight": 1, "pd_queues.prealloc": None,
         "pd_queues.bootstrap_failures_per_s.now": _rate(0.2)}),
    "trtllm-main-050f80d": (
        ("running", "waiting", "kv_usage", "kv_host_usage", "prompt_cached_by_tier", "spec_drafts",
         "spec_draft_tokens", "spec_accepted_tokens", "spec_accepted_per_pos", "tpot", "prefill_time",
         "decode_time", "inference_time"),
        {"running": 6, "waiting": 3, "kv_usage": _exact(0.625), "kv_host_usage": _exact(0.125),
         "prompt_cache_tiers.tokens_per_s.gpu": _rate(40), "prompt_cache_tiers.tokens_per_s.host": _rate(20),
         "spec_decode.acceptance_rate": _rate(0.6, 0.01), "spec_decode.acceptance_length": _rate(2.8, 0.01),
         "spec_decode.per_position": [_rate(0.8, 0.01), _rate(0.6, 0.01), _rate(0.4, 0.01)],
         "tpot_s.mean": _exact(0.025), "prefill_time_s.mean": _exact(0.3), "decode_time_s.mean": _exact(1.1),
         "inference_time_s.mean": _exact(1.4)}),
    "tgi-3.3.7": (
        ("running", "waiting", "prompt_tokens", "generation_tokens", "requests_finished", "requests_failed",
         "tpot", "e2e", "queue_time"),
        {"running": 4, "waiting": 2, "prompt_tokens_per_s.now": _rate(3000, 0.15),
         "prompt_tokens_per_s.at_finish": False, "generation_tokens_per_s.now": _rate(1200, 0.15),
         "requests_per_s.now": _rate(2.5), "errors_per_s.now": _rate(0.5), "tpot_s.mean": _exact(0.03),
         "e2e_s.mean": _exact(1.5), "queue_time_s.mean": _exact(0.05), "itl_s.mean": None}),
    "llamacpp-recent": (
        ("running", "waiting", "prompt_tokens", "spec_drafts", "spec_draft_tokens", "spec_accepted_tokens",
         "spec_accepted_per_pos"),
        {"running": 2, "waiting": 1, "prompt_tokens_per_s.now": _rate(300), "prompt_tokens_per_s.approximate": True,
         "prompt_tokens_per_s.now_window": "60s",
         "spec_decode.acceptance_rate": _rate(0.5, 0.01), "spec_decode.acceptance_length": _rate(3.0, 0.01),
         "spec_decode.per_position": [_rate(0.8, 0.01), _rate(0.6, 0.01), _rate(0.4, 0.01), _rate(0.2, 0.01)]}),
}


def mismatches(doc: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Where the per-model document differs from what went in: ``path: got ..., want ...``."""
    out: list[str] = []
    for path, want in expected.items():
        got: Any = doc
        for part in path.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if want is None:
            ok = got is None
        elif isinstance(want, list):
            ok = isinstance(got, list) and len(got) == len(want) and all(g == w for g, w in zip(got, want, strict=True))
        else:
            ok = got is not None and got == want
        if not ok:
            out.append(f"{path}: got {got!r}, want {want!r}")
    return out


@contextlib.contextmanager
def served(targets: list[str]) -> Iterator[dict[str, str]]:
    """Start one declared server per target; yield target -> base URL."""
    procs: list[subprocess.Popen[bytes]] = []
    urls: dict[str, str] = {}
    try:
        for name in targets:
            proc = procgroup.popen([sys.executable, str(SERVER), name], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
            procs.append(proc)
        for name, proc in zip(targets, procs, strict=True):
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            if not line.startswith("PORT "):
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise AssertionError(f"{name} did not start: {line!r} {err[-2000:]}")
            urls[name] = f"http://127.0.0.1:{int(line.split()[1])}"
        for url in urls.values():
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.05)
        yield urls
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)


@pytest.fixture(scope="module")
def status_doc() -> Iterator[dict[str, dict[str, Any]]]:
    """One ``status --json`` over every target at once: target -> its per-model document."""
    names = sorted(TARGETS)
    with served(names) as urls:
        cmd = [sys.executable, "-m", "console", "status", "--json", "--gpus", "none", "--sample", "7",
               "--refresh", "0.5", "--config", os.devnull]
        for name in names:
            cmd += ["--engine", f"{TARGETS[name].engine}@{urls[name]}"]
        out = procgroup.run(cmd, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr + out.stdout
        doc = json.loads(out.stdout)
        by_url = {e["url"].rstrip("/"): e for e in doc["engines"]}
        result: dict[str, dict[str, Any]] = {}
        for name in names:
            engine = by_url[urls[name]]
            assert engine["phase"] == "ready", (name, engine)
            (model,) = engine["per_model"]
            assert model["model"] in (MODEL, ""), (name, model["model"])  # TGI and llama.cpp have no model label
            result[name] = model
        yield result


@pytest.mark.slow
@pytest.mark.parametrize("target", sorted(EXPECT))
def test_status_json_reads_each_version(status_doc: dict[str, dict[str, Any]], target: str) -> None:
    assert mismatches(status_doc[target], EXPECT[target][1]) == []


# -- the six fixes, each on the declaration of the version that needs it ------------------------------

@pytest.mark.slow
def test_sglang_pd_transfer_histograms(status_doc: dict[str, dict[str, Any]]) -> None:
    """1. SGLang 0.5.23's kv_transfer_* are histograms: throughput, link speed and latency from them."""
    pd = status_doc["sglang-0.5.23"]["kv_transfer"]
    assert pd is not None
    assert pd["latency_s"] == _exact(0.04)
    assert pd["link_gb_s"] == _rate(64 * MiB / 0.04 / 1e9, 1e-3)
    assert pd["bytes_per_s"] == _rate(64 * MiB * 10, 0.15)


@pytest.mark.slow
def test_sglang_priority_totals(status_doc: dict[str, dict[str, Any]]) -> None:
    """2. With priority scheduling the totals under priority="" are read, not summed with the rest."""
    model = status_doc["sglang-0.5.23"]
    assert (model["running"], model["waiting"]) == (5, 4)


@pytest.mark.slow
def test_sglang_tpot(status_doc: dict[str, dict[str, Any]]) -> None:
    """3. SGLang's request_time_per_output_token_seconds is the TPOT."""
    assert status_doc["sglang-0.5.23"]["tpot_s"]["mean"] == _exact(0.025)


@pytest.mark.slow
def test_sglang_spec_off_has_no_panel(status_doc: dict[str, dict[str, Any]]) -> None:
    """4. Spec gauges at 0 (speculative decoding off): no spec block."""
    assert status_doc["sglang-0.5.23"]["spec_decode"] is None
    assert status_doc["sglang-0.4.4"]["spec_decode"] is None


@pytest.mark.slow
def test_llamacpp_per_position(status_doc: dict[str, dict[str, Any]]) -> None:
    """5. llama.cpp's per-position acceptance counter."""
    per_pos = status_doc["llamacpp-recent"]["spec_decode"]["per_position"]
    assert per_pos == [_rate(0.8, 0.01), _rate(0.6, 0.01), _rate(0.4, 0.01), _rate(0.2, 0.01)]


@pytest.mark.slow
def test_vllm_mooncake(status_doc: dict[str, dict[str, Any]]) -> None:
    """6. vLLM's Mooncake connector feeds the P/D panel."""
    kv = status_doc["vllm-0.34.0"]["kv_transfer"]
    assert kv is not None
    assert kv["latency_s"] == _exact(0.02)
    assert kv["failures_per_s"]["now"] == _rate(0.1)


# -- every mapping a version needs is needed: without it, its checks fail -----------------------------

def _without(profile: EngineProfile, canonical: str) -> EngineProfile:
    kept = {k: v for k, v in profile.metrics.map.items() if k != canonical}
    hit = profile.metrics.prefix_hit_rate
    if hit is not None and canonical in (*hit.numerator, *hit.denominator):
        hit = None
    return dataclasses.replace(profile, metrics=dataclasses.replace(profile.metrics, map=kept, prefix_hit_rate=hit))


def _pipeline_doc(profile: EngineProfile, payloads: list[tuple[float, bytes]]) -> dict[str, Any]:
    state = EngineMetricsState(profile)
    for t, body in payloads:
        state.ingest(t, normalize(profile, body))
    _, total = state.metrics()
    return model_doc(total)


@pytest.mark.slow
def test_removing_a_needed_mapping_fails_its_version() -> None:
    profiles = load_profiles()
    names = sorted(EXPECT)
    with served(names) as urls:
        payloads: dict[str, list[tuple[float, bytes]]] = {n: [] for n in names}
        for _ in range(4):
            for name in names:
                profile = profiles[TARGETS[name].engine]
                r = httpx.get(urls[name] + profile.metrics.path, headers={"Accept-Encoding": "gzip"})
                payloads[name].append((time.monotonic(), r.content))
            time.sleep(1.0)
    for name in names:
        profile = profiles[TARGETS[name].engine]
        needs, expected = EXPECT[name]
        assert mismatches(_pipeline_doc(profile, payloads[name]), expected) == [], name
        for canonical in needs:
            assert canonical in profile.metrics.map, (name, canonical)
            got = mismatches(_pipeline_doc(_without(profile, canonical), payloads[name]), expected)
            assert got, f"{name}: its checks pass without the {canonical} mapping"
