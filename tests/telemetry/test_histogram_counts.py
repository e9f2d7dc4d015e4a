"""A histogram's count is known only from ``_count`` or the ``+Inf`` bucket; otherwise it is n/a.

Neither the largest finite bucket (an excerpt that lost its ``_count`` and ``+Inf`` lines) nor 0 (a
histogram the engine does not have) may stand in for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main
from console.model import EngineSnapshot, FleetSnapshot, GpuFleet
from console.profiles import get_profile
from console.status_doc import status_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState

LAB = 'model_name="m",engine="0"'


def _buckets_only(counts: tuple[float, float, float], with_count: bool = False, with_inf: bool = False) -> str:
    """A vLLM TTFT histogram with finite buckets only (and optionally ``_count`` / ``+Inf``)."""
    lines = ["# TYPE vllm:time_to_first_token_seconds histogram"]
    for le, c in zip(("0.1", "0.5", "1.0"), counts, strict=True):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{LAB},le="{le}"}} {c}')
    if with_inf:
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{{LAB},le="+Inf"}} {counts[-1] + 7}')
    if with_count:
        lines.append(f"vllm:time_to_first_token_seconds_count{{{LAB}}} {counts[-1] + 7}")
    lines.append(f"vllm:time_to_first_token_seconds_sum{{{LAB}}} 12.5")
    lines.append(f"vllm:num_requests_running{{{LAB}}} 1")
    return "\n".join(lines) + "\n"


def _inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str, text: str) -> dict[str, object]:
    f = tmp_path / "metrics.txt"
    f.write_text(text)
    assert main(["inspect-metrics", "--engine", engine, str(f), "--json"]) == 0
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_histogram_without_count_or_inf_bucket_has_no_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Neither _count nor +Inf: the histogram is invalid (the total is unknown), so it has no count
    # (not 95, the largest finite bucket) and no quantile.
    doc = _inspect(tmp_path, capsys, "vllm", _buckets_only((10, 50, 95)))
    assert doc["models"][0]["metrics"]["ttft"] is None  # type: ignore[index]
    # With either _count or +Inf the count is known (here 102) and the quantiles come back.
    for kw in ({"with_count": True}, {"with_inf": True}, {"with_inf": True, "with_count": True}):
        doc = _inspect(tmp_path, capsys, "vllm", _buckets_only((10, 50, 95), **kw))
        ttft = doc["models"][0]["metrics"]["ttft"]  # type: ignore[index]
        assert ttft["count"] == 102.0 and ttft["p50"] is not None and ttft["capped"] == ["p99"]


def test_windowed_histogram_without_count_or_inf_bucket_is_na() -> None:
    vllm = get_profile("vllm")
    st = EngineMetricsState(vllm)
    st.ingest(0.0, normalize(vllm, _buckets_only((0, 0, 0))))
    st.ingest(5.0, normalize(vllm, _buckets_only((10, 50, 95))))
    (m,), total = st.metrics()
    for q in (m.ttft, total.ttft):
        assert q.count is None and q.p50 is None and q.p99 is None and q.mean is None


def test_histogram_the_engine_does_not_have_is_na_in_status() -> None:
    llama = get_profile("llamacpp")  # llama.cpp has no latency histograms at all
    st = EngineMetricsState(llama)
    for t in range(3):
        st.ingest(float(t), normalize(llama, f"llamacpp:requests_processing 1\nllamacpp:prompt_tokens_total {t}\n"))
    models, total = st.metrics()
    engine = EngineSnapshot(name="l", profile="llamacpp", url="http://127.0.0.1:1", taken_at=1.0, models=models,
                            total=total)  # fmt: skip
    doc = status_doc(FleetSnapshot(taken_at=1.0, engines=(engine,), gpus=GpuFleet(source="none")))
    assert doc["schema"] == "enginedeck.status/2"  # count changed meaning (0 -> null)
    for key in ("ttft_s", "itl_s", "tpot_s", "e2e_s", "queue_time_s"):
        q = doc["engines"][0]["summary"][key]
        assert q["count"] is None, key  # not 0: there is no such histogram
        assert q["p50"] is None and q["mean"] is None
