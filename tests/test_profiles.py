"""Shipped engine profiles load, and broken ones give one-line errors naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.errors import ConfigError
from console.profiles import CANONICAL, load_profile_file, load_profiles

ENGINES = {"vllm", "sglang", "trtllm", "tgi", "llamacpp"}


def test_shipped_profiles_load() -> None:
    profiles = load_profiles()
    assert set(profiles) >= ENGINES
    for p in profiles.values():
        assert set(p.metrics.map) <= set(CANONICAL)
        assert p.container.port > 0


def test_vllm_accepts_old_and_new_names() -> None:
    vllm = load_profiles()["vllm"]
    assert vllm.metrics.map["kv_usage"].names == ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
    assert "vllm:gpu_prefix_cache_hits_total" in vllm.metrics.map["prefix_hits"].names


def test_engines_lacking_metrics_do_not_map_them() -> None:
    profiles = load_profiles()
    assert "kv_usage" not in profiles["tgi"].metrics.map
    assert "ttft" not in profiles["tgi"].metrics.map
    assert "kv_usage" not in profiles["llamacpp"].metrics.map
    assert profiles["tgi"].metrics.prefix_hit_rate is None


def test_api_key_scope() -> None:
    p = load_profiles()
    assert p["llamacpp"].path_needs_key("/metrics")
    assert not p["llamacpp"].path_needs_key("/health")
    assert p["llamacpp"].path_needs_key("/v1/models")  # measured on a real llama-server
    assert not p["vllm"].path_needs_key("/metrics")
    assert p["vllm"].path_needs_key("/v1/models")
    assert not p["trtllm"].path_needs_key("/v1/chat/completions")


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ('name = "bad"\ndisplay_name = "B"\n[container]\nimage = "x"\nport = 0\n', "container.port", "greater"),
        ('name = "bad"\ndisplay_name = "B"\n[container]\nimage = "x"\nport = 1\nbogus = 1\n', "container.bogus",
         "unknown key"),
        ('name = "bad"\ndisplay_name = "B"\n', "container", "required key is missing"),
        ('name = "bad"\ndisplay_name = "B"\n[container]\nimage = "x"\nport = 1\n'
         '[metrics.map.speed]\nnames = ["a"]\nkind = "gauge"\n', "metrics.map", "unknown canonical metric"),
        ('name = "bad"\ndisplay_name = "B"\n[container]\nimage = "x"\nport = 1\n'
         '[metrics.map.ttft]\nnames = ["a"]\nkind = "gauge"\n', "metrics.map", "not allowed"),
        ('name = "bad"\n[container', "", "invalid TOML"),
    ],
)
def test_broken_profile_one_line_error(tmp_path: Path, body: str, key: str, problem: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_profile_file(f)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(f) in msg
    assert key in msg
    assert problem in msg


def test_user_override_replaces_shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGINEDECK_CONFIG_DIR", str(tmp_path))
    (tmp_path / "engines").mkdir()
    shipped = (Path(__file__).parents[1] / "engines" / "tgi.toml").read_text()
    (tmp_path / "engines" / "tgi.toml").write_text(shipped.replace('tag = "3.3.7"', 'tag = "9.9.9"'))
    assert load_profiles()["tgi"].container.tag == "9.9.9"
