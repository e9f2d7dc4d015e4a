"""Profile options for counters (plus, first_use/present_with, at_finish): validated, one-line
errors, and what the shipped profiles declare."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.errors import ConfigError
from console.profiles import load_profile_file, load_profiles
from console.telemetry.metrics.normalize import normalize, wanted_names

HEAD = 'name = "bad"\ndisplay_name = "B"\n[container]\nimage = "x"\nport = 1\n'


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('[metrics.map.running]\nnames = ["a"]\nkind = "gauge"\nfirst_use = true\n', "counters only"),
        ('[metrics.map.ttft]\nnames = ["a"]\nkind = "histogram"\nat_finish = true\n', "counters only"),
        ('[metrics.map.requests_failed]\nnames = ["a"]\nkind = "counter"\npresent_with = ["b"]\n', "first_use"),
        ('[metrics.map.requests_failed]\nnames = ["a"]\nkind = "counter"\n'
         '[[metrics.map.requests_failed.plus]]\nnames = ["b"]\nkind = "gauge"\n', "one counter"),
    ],
)
def test_counter_options_are_checked(tmp_path: Path, body: str, problem: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(HEAD + body)
    with pytest.raises(ConfigError) as info:
        load_profile_file(f)
    assert "\n" not in str(info.value) and problem in str(info.value) and "metrics.map" in str(info.value)


def test_shipped_profiles_declare_first_use_and_at_finish() -> None:
    p = load_profiles()
    at_finish = {name for name, prof in p.items() if prof.metrics.map.get("generation_tokens")
                 and prof.metrics.map["generation_tokens"].at_finish}  # fmt: skip
    assert at_finish == {"llamacpp", "sglang", "trtllm", "tgi"}  # vLLM counts tokens every step
    assert p["tgi"].metrics.map["requests_failed"].first_use
    assert [q.names for q in p["tgi"].metrics.map["requests_finished"].plus] == [("tgi_request_failure",)]
    assert [q.names for q in p["trtllm"].metrics.map["requests_failed"].plus] == [("trtllm_request_error_total",)]


def test_parsing_only_the_mapped_families_still_reads_created_and_plus_parts() -> None:
    """The hub parses with ``full=False``: the wanted names must cover ``_created`` and plus parts."""
    trt = load_profiles()["trtllm"]
    names = wanted_names(trt)
    assert {"trtllm_request_error_total", "trtllm_request_success_created"} <= names
    lab = 'model_name="m",engine_type="trtllm"'
    text = (
        f'trtllm_request_success_total{{{lab},finished_reason="stop"}} 4\n'
        f'trtllm_request_success_created{{{lab},finished_reason="stop"}} 1.8e9\n'
        f'trtllm_request_error_total{{{lab},http_code="500"}} 1\n'
        f"trtllm_unrelated_family{{{lab}}} 7\n"
    )
    r = normalize(trt, text, full=False)
    m = r.models["m"]
    assert m.counter_total("requests_finished") == 5.0 and m.counter_total("requests_failed") == 1.0
    assert list(m.created["requests_finished"].values()) == [1.8e9]
    assert "trtllm_unrelated_family" not in r.parsed.families
