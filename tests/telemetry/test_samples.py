"""Every real sample payload (tests/fixtures/samples; SOURCES.md there says where each comes from) goes
through `inspect-metrics`: values or n/a, never a traceback; specific values asserted for several."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from console.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "samples"
ENGINE_BY_PREFIX = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm", "llamacpp": "llamacpp"}
# Files that are not metrics payloads at all (name inventories, an SSE chat stream): they must
# fail cleanly (one line, exit 1) while still printing an all-n/a report.
NOT_PAYLOADS = {
    "llamacpp-llmkube-live-names.txt",
    "sglang-llmkube-testdata-names.txt",
    "vllm-llmkube-testdata-names.txt",
    "llamacpp-real-server-stream.txt",
}
FILES = sorted(p.name for p in SAMPLES.glob("*.txt"))


def _inspect(capsys: pytest.CaptureFixture[str], name: str) -> tuple[int, dict[str, Any], str]:
    engine = ENGINE_BY_PREFIX[name.split("-", 1)[0]]
    rc = main(["inspect-metrics", "--engine", engine, str(SAMPLES / name), "--json"])
    out, err = capsys.readouterr()
    return rc, json.loads(out), err


def _metric(doc: dict[str, Any], canonical: str, model: str | None = None) -> Any:
    models = {m["model"]: m for m in doc["models"]}
    m = models[model] if model is not None else doc["models"][0]
    return m["metrics"][canonical]


def test_fixture_copies_are_complete() -> None:
    assert len(FILES) == 13
    assert (SAMPLES / "SOURCES.md").is_file()


@pytest.mark.parametrize("name", FILES)
def test_every_sample_gives_values_or_na(capsys: pytest.CaptureFixture[str], name: str) -> None:
    rc, doc, err = _inspect(capsys, name)
    assert "Traceback" not in err
    if name in NOT_PAYLOADS:
        assert rc == 1 and err.count("\n") == 1 and "no metric samples" in err
        assert doc["samples"] == 0 and doc["error_count"] > 0
    else:
        assert rc == 0, err
        assert doc["samples"] > 0
    for model in doc["models"]:
        for canonical, entry in model["metrics"].items():
            assert entry is None or entry["raw_name"], canonical
    # Text mode too.
    engine = ENGINE_BY_PREFIX[name.split("-", 1)[0]]
    rc_text = main(["inspect-metrics", "--engine", engine, str(SAMPLES / name)])
    out, _ = capsys.readouterr()
    assert rc_text == rc and "running" in out


def test_llamacpp_8_streams(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, _ = _inspect(capsys, "llamacpp-real-server-8-streams.txt")
    assert rc == 0 and doc["error_count"] == 0
    assert _metric(doc, "running")["value"] == 8.0
    assert _metric(doc, "waiting")["value"] == 0.0
    assert _metric(doc, "prompt_tokens")["value"] == 352.0
    assert _metric(doc, "cached_prompt_tokens")["value"] == 0.0
    assert _metric(doc, "kv_usage") is None and "kv_usage" in doc["not_in_profile"]
    assert "llamacpp:n_busy_slots_per_decode" in doc["unmapped"]


def test_llamacpp_older_build_lacks_cached_tokens(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc, _ = _inspect(capsys, "llamacpp-pr13196-comment-excerpt.txt")
    assert _metric(doc, "prompt_tokens")["value"] == 143.0
    assert _metric(doc, "generation_tokens")["value"] == 673.0
    assert _metric(doc, "cached_prompt_tokens") is None
    assert set(doc["missing"]) == {"running", "waiting", "cached_prompt_tokens"}


def test_sglang_docs_sample(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc, _ = _inspect(capsys, "sglang-docs-production-metrics.txt")
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert _metric(doc, "running", model)["value"] == 162.0
    assert _metric(doc, "waiting", model)["value"] == 2826.0
    assert _metric(doc, "kv_usage", model)["value"] == 0.28
    assert _metric(doc, "prompt_tokens", model)["value"] == 8128902.0
    itl = _metric(doc, "itl", model)
    assert itl["raw_name"] == "sglang:time_per_output_token_seconds" and itl["legacy"]
    assert itl["count"] == 7400757.0
    ttft = _metric(doc, "ttft", model)
    assert ttft["count"] == 11008.0
    # 8495 of 11008 observations are above the last finite bucket (30 s): every quantile is capped.
    assert ttft["p50"] == 30.0 and ttft["capped"] == ["p50", "p90", "p99"]
    assert "sglang:func_latency_seconds" in doc["unmapped"]  # no model_name label, not mapped
    assert doc["error_count"] == 0


def test_vllm_docs_sample_with_elisions(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, _ = _inspect(capsys, "vllm-docs-design-metrics.txt")
    assert rc == 0
    assert doc["error_count"] == 3 and all("'...'" in e for e in doc["errors"])
    model = "meta-llama/Llama-3.1-8B-Instruct"
    assert _metric(doc, "running", model)["value"] == 8.0
    assert _metric(doc, "generation_tokens", model)["value"] == 27453.0
    assert _metric(doc, "requests_finished", model)["value"] == 132.0
    assert _metric(doc, "requests_failed", model)["value"] == 0.0
    ttft = _metric(doc, "ttft", model)
    assert ttft["count"] == 140.0 and ttft["sum"] is None
    # rank 70 lies in (0.02, 0.04] holding 84 (13 -> 97): 0.02 + 0.02 * (70 - 13) / 84
    assert ttft["p50"] == pytest.approx(0.02 + 0.02 * 57 / 84)


def test_vllm_http_and_cacheinfo_fragment(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, _ = _inspect(capsys, "vllm-docs-http-and-cacheinfo.txt")
    assert rc == 0
    assert doc["error_count"] == 1 and "label" in doc["errors"][0]  # the `...}` inside the label set
    assert "http_requests_total" not in doc["unmapped"]  # read: its 5xx count as failed requests
    read = {k for k, v in doc["models"][0]["metrics"].items() if v is not None}
    assert read == {"requests_finished", "requests_failed"}  # from http_requests_total's 5xx alone


def test_vllm_usage_iteration_tokens_is_a_histogram_not_a_counter(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, _ = _inspect(capsys, "vllm-docs-usage-metrics.txt")
    assert rc == 0
    assert doc["unmapped"] == ["vllm:iteration_tokens_total"]
    assert _metric(doc, "prompt_tokens") is None


def test_trtllm_json_doc_example(capsys: pytest.CaptureFixture[str]) -> None:
    rc, doc, _ = _inspect(capsys, "trtllm-docs-metrics-json.txt")
    assert rc == 0 and doc["format"] == "trtllm-json"
    assert doc["errors"] == ["line 18: elision '...' dropped"]
    assert _metric(doc, "running")["value"] == 1.0
    assert _metric(doc, "kv_usage")["value"] == pytest.approx(3 / 101256)
    assert _metric(doc, "prefix_hit_rate_gauge")["value"] == 0.00128
    assert _metric(doc, "waiting") is None


def test_trtllm_first_release_unprefixed_names(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc_a, _ = _inspect(capsys, "trtllm-pr5785-prometheus-excerpt-a.txt")
    ttft = _metric(doc_a, "ttft", "undefined")
    assert ttft["raw_name"] == "time_to_first_token_seconds" and ttft["legacy"]
    assert ttft["count"] == 2.0
    _, doc_b, _ = _inspect(capsys, "trtllm-pr5785-prometheus-excerpt-b.txt")
    fin = _metric(doc_b, "requests_finished", "undefined")
    assert fin["value"] == 2.0 and fin["raw_name"] == "request_success_total" and fin["legacy"]
