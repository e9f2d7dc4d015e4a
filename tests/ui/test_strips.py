"""Energy, speculative decoding, KV transfer and LoRA panels of the engine detail: shown only where
the engine has the series, an estimate always labelled, and `e` on a panel explains it."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from console.model import (
    CacheTiers,
    EnergyView,
    EngineSnapshot,
    KvTransfer,
    LoraState,
    ModelMetrics,
    PdQueues,
    Quantiles,
    Rates,
    SpecDecode,
)
from console.profiles import get_profile
from console.ui.engine_strips import (
    energy_strip,
    kv_strip,
    lora_strip,
    pd_strip,
    phases_strip,
    sched_strip,
    spec_strip,
    tiers_strip,
)
from console.ui.explain import explain
from console.ui.screens.engine import EngineScreen
from tests.ui.conftest import AppFactory
from tests.ui.frozen import FrozenSource, frozen_fleet

BARE = EngineSnapshot(name="e", profile="vllm", url="http://127.0.0.1:1", taken_at=0.0, total=ModelMetrics(model="m"))


def test_no_series_no_panel() -> None:
    assert energy_strip(BARE) is None
    assert BARE.total is not None
    assert spec_strip(BARE.total) is None and kv_strip(BARE.total) is None and lora_strip(BARE.total) is None


def test_an_estimate_is_marked_on_the_number_and_in_words() -> None:
    exact = EnergyView(tokens_per_joule=1.234, joules_per_1k_output=810.0, power_w=600.0, source="counter")
    est = replace(exact, attribution="estimate", reason="GPU 0 is shared (a, b); split by memory share")
    a, b = energy_strip(replace(BARE, energy=exact)), energy_strip(replace(BARE, energy=est))
    assert a is not None and b is not None
    assert "1.23 tok/J" in a.plain and "estimate" not in a.plain and "~" not in a.plain
    assert "~1.23 tok/J (estimate)" in b.plain
    # The mark comes before anything a narrow terminal cuts off.
    assert b.plain.index("(estimate)") < 40


def test_spec_kv_and_lora_panels() -> None:
    spec_d = SpecDecode(0.511, 2.53, 0.6, per_position=(0.7, 0.49))
    m = ModelMetrics(model="m", spec=spec_d, kv_transfer=KvTransfer(2.5e8, 18.8, 0.0028, Rates(r60s=0.5)),
                     lora=LoraState(running=2, waiting=1, slots_total=2))  # fmt: skip
    spec, kv, lora = spec_strip(m), kv_strip(m), lora_strip(m)
    assert spec is not None
    assert "acceptance 51% · length 2.53 tok/step · 60% of output from drafts · per position 0.70 0.49" in spec.plain
    assert kv is not None and "250.0 MB/s · link 18.8 GB/s · 2.8 ms/transfer · failed 0.50/s" in kv.plain
    assert lora is not None and "2 running · 1 waiting · slots 2/2 · slots full" in lora.plain


def test_newer_engine_panels() -> None:
    """vLLM 0.34 / SGLang 0.5.23 / trtllm figures: each panel only where its series are."""
    bare = ModelMetrics(model="m")
    assert pd_strip(bare) is None and tiers_strip(bare) is None and sched_strip(bare) is None
    assert phases_strip(bare) is None
    m = ModelMetrics(
        model="m", pd_queues=PdQueues(bootstrap=2, inflight=1, bootstrap_failures_per_s=Rates(r60s=0.2)),
        cache_tiers=CacheTiers((("device", 90.0), ("disk", 0.0), ("host", 40.0)), external_hit_rate=0.25),
        kv_host_usage=0.125, waiting_capacity=2, waiting_deferred=1, sleep_level=1,
        admission_rejections_per_s=Rates(r60s=0.75),
        prefill_time=Quantiles(p50=0.3, count=50), decode_time=Quantiles(p50=1.1, count=50))  # fmt: skip
    pd, tiers, sched, phases = pd_strip(m), tiers_strip(m), sched_strip(m), phases_strip(m)
    assert pd is not None and "bootstrap 2 · inflight 1 · bootstrap failed 0.20/s" in pd.plain
    assert tiers is not None and "device 90 host 40 tok/s · external hits 25% · host KV 12%" in tiers.plain
    assert sched is not None
    assert "2 for capacity · 1 deferred · asleep (level 1: weights offloaded) · refused 0.75/s" in sched.plain
    assert phases is not None and "prefill p50 0.300 s · decode p50 1.100 s" in phases.plain
    assert "inference" not in phases.plain  # n/a phases are left out


def test_explain_says_what_is_read_and_when_rates_are_coarse() -> None:
    text = explain("prompt_tps", get_profile("llamacpp")).plain
    assert "6 significant digits" in text and "approximate" in text
    assert "printed with" not in explain("prompt_tps", get_profile("vllm")).plain
    pd = explain("pd_queues", get_profile("sglang")).plain
    assert "sglang:num_prefill_bootstrap_queue_reqs" in pd and 'only priority∈{""}' in pd
    tiers = explain("cache_tiers", get_profile("trtllm")).plain
    assert "trtllm_prompt_cache_hit_tokens_total" in tiers and "broken down by its label cache_tier" in tiers


async def test_panels_appear_only_for_engines_with_the_series(make_app: AppFactory) -> None:
    fleet = frozen_fleet()
    plain = fleet.engines[0]
    assert plain.total is not None
    bare = replace(plain, name="plain-e", energy=None,
                   total=replace(plain.total, spec=None, kv_transfer=None, lora=None))  # fmt: skip
    app = make_app(FrozenSource(replace(fleet, engines=(*fleet.engines, bare))))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await app.push_screen(EngineScreen("vllm-a"))
        await pilot.pause()
        shown = {w.id for w in app.screen.query(".engine-strip") if w.display}
        assert shown == {"strip-energy", "strip-spec", "strip-kv", "strip-lora"}
        app.screen.query_one("#strip-energy", Static).focus()
        await pilot.press("e")
        await pilot.pause()
        text = str(app.screen.query_one("#explain-text", Static).render())
        assert "Tokens per joule" in text and "This engine now" in text and "exact" in text
        await pilot.press("escape")
        await app.push_screen(EngineScreen("plain-e"))
        await pilot.pause()
        assert not [w.id for w in app.screen.query(".engine-strip") if w.display]
