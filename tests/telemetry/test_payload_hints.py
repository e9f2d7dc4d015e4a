"""What a payload that is not the profile's says: trtllm's drained ``[]`` is normal, a payload of an
engine no profile knows (Triton's ``nv_inference_*``) gets a one-line hint and a failing exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main

TRITON = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="ensemble",version="1"} 120
# HELP nv_inference_count Number of inferences performed
# TYPE nv_inference_count counter
nv_inference_count{model="ensemble",version="1"} 120
# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="ensemble",version="1"} 51234
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{model="tensorrt_llm",request_type="active",version="1"} 3
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5
"""


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["inspect-metrics", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_trtllm_json_empty_list_is_the_drained_state_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "metrics.json"
    f.write_text("[]\n")
    rc, out, err = _run(capsys, "--engine", "trtllm", str(f))
    assert rc == 0, err
    assert "already drained" in out and "no metric samples" not in out + err
    rc, out, err = _run(capsys, "--engine", "trtllm", str(f), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["format"] == "trtllm-json" and "already drained" in doc["note"]
    assert doc["error_count"] == 0


def test_payload_of_an_engine_no_profile_knows_gets_a_hint_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "triton.txt"
    f.write_text(TRITON)
    for extra in ([], ["--json"]):
        rc, out, err = _run(capsys, "--engine", "vllm", str(f), *extra)
        assert rc == 1
        assert err.count("\n") == 1, err
        assert "no vLLM metrics" in err and "nv_inference_request_success" in err and "Triton" in err
        assert out  # the report is still printed


def test_payload_of_another_known_engine_names_its_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "sglang.txt"
    f.write_text('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="q",tp_rank="0"} 2\n')
    rc, _, err = _run(capsys, "--engine", "vllm", str(f))
    assert rc == 1 and "--engine sglang" in err


def test_an_idle_engine_with_only_unmapped_own_families_is_not_foreign(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "tgi.txt"
    f.write_text("# TYPE tgi_batch_current_max_tokens gauge\ntgi_batch_current_max_tokens 0\n")
    rc, _, err = _run(capsys, "--engine", "tgi", str(f))
    assert rc == 0, err


def test_first_use_counter_with_no_series_yet_reads_zero_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "tgi.txt"
    f.write_text("# TYPE tgi_queue_size gauge\ntgi_queue_size 0\n")  # TGI before any failure
    rc, out, _ = _run(capsys, "--engine", "tgi", str(f), "--json")
    assert rc == 0
    failed = json.loads(out)["models"][0]["metrics"]["requests_failed"]
    assert failed["value"] == 0.0 and failed["none_yet"] is True
    rc, out, _ = _run(capsys, "--engine", "tgi", str(f))
    assert "no series yet" in out
