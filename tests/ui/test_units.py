"""Pure helpers: the action registry, cell formatting, charts, explanations."""

from __future__ import annotations

import math

import pytest

from console.model import Freshness, Quantiles, SourceState
from console.profiles import load_profiles
from console.ui import format as fmt
from console.ui.actions import Action, ActionRegistry, display_key
from console.ui.explain import METRICS, explain
from console.ui.widgets.chart import block_chart, spark


def _noop(app: object) -> None:
    return None


@pytest.mark.parametrize("key", ["j", "k", "d", "ctrl+d", "ctrl+k", "space", "enter", "x"])
def test_mutating_action_refuses_navigation_like_keys(key: str) -> None:
    reg = ActionRegistry()
    with pytest.raises(ValueError, match="navigation-like"):
        reg.register(Action("kill", key, "Kill", "Engine", _noop, mutating=True))


def test_registry_hides_mutating_in_read_only() -> None:
    reg = ActionRegistry([
        Action("quit", "q", "Quit", "Global", _noop),
        Action("restart", "R", "Restart", "Engine", _noop, mutating=True, screens=("overview",)),
    ])
    assert [a.id for a in reg.visible(read_only=False)] == ["quit", "restart"]
    assert [a.id for a in reg.visible(read_only=True)] == ["quit"]
    assert [a.id for a in reg.visible(read_only=False, screen="gpus")] == ["quit"]
    with pytest.raises(ValueError, match="twice"):
        reg.register(Action("quit", "Q", "Quit", "Global", _noop))


def test_display_key() -> None:
    assert display_key("question_mark,f1") == "?/f1"
    assert display_key("ctrl+r") == "^r"
    assert display_key("slash") == "/"


def test_none_is_na_never_zero() -> None:
    assert fmt.count(None).plain == "n/a"
    assert fmt.count(None).style == "dim"
    assert fmt.tps(None).plain == "n/a"
    assert fmt.tps(0.0).plain == "0 t/s"
    assert fmt.pct(float("nan")).plain == "n/a"
    assert fmt.hbm(None, 80).plain == "n/a"


def test_units_and_low_sample_quantiles() -> None:
    assert fmt.tps(1234.0).plain == "1.2k t/s"
    assert fmt.hbm(71 * fmt.GIB, 80 * fmt.GIB).plain == "71.0/80.0 GiB 89%"
    assert fmt.quantile(Quantiles(p50=0.085, low_sample=False), "p50").plain == "85 ms"
    low = fmt.quantile(Quantiles(p50=1.5, low_sample=True), "p50")
    assert low.plain == "~1.50 s" and low.style == "dim"
    capped = fmt.quantile(Quantiles(p99=60.0, low_sample=False, capped=("p99",)), "p99")
    assert capped.plain == ">60 s"


def test_staleness_text() -> None:
    f = Freshness(SourceState.STALE, updated_at=88.0, stale_since=88.0, reason="connection refused")
    assert fmt.staleness(f, 100.0) == "stale 12 s: connection refused"
    assert fmt.staleness(Freshness(), 100.0) == ""
    assert fmt.staleness(Freshness(SourceState.UNAVAILABLE, reason="no NVML"), 1.0) == "unavailable: no NVML"


def test_mask_args_hides_secret_values() -> None:
    args = ["--model", "m", "--api-key", "sk-123", "--hf-token=abc", "HF_TOKEN=xyz", "--port", "8000"]
    masked = fmt.mask_args(args)
    assert masked == ["--model", "m", "--api-key", "****", "--hf-token=****", "HF_TOKEN=****", "--port", "8000"]
    assert not any(s in " ".join(masked) for s in ("sk-123", "abc", "xyz"))


def test_charts_draw_gaps_not_zero() -> None:
    line = spark([1.0, math.nan, 4.0], 3)
    assert line == "▂ █"
    rows = block_chart([0.0, math.nan, 2.0], 3, 2)
    assert len(rows) == 2 and rows[-1][1] == "·"  # the gap is marked, not drawn as a zero bar


def test_explain_uses_this_engines_profile() -> None:
    profiles = load_profiles()
    text = explain("kv_usage", profiles["vllm"], engine_name="vllm-a").plain
    assert "vllm:kv_cache_usage_perc" in text and "Healthy" in text
    sg = explain("prefix_hit_rate", profiles["sglang"], engine_name="sg").plain
    assert "sglang:cached_tokens_total" in sg
    tgi = explain("kv_usage", profiles["tgi"], engine_name="tgi-d").plain
    assert "n/a" in tgi  # TGI exports no KV usage: said, not hidden
    for key in METRICS:
        assert explain(key, profiles["vllm"]).plain.strip()
