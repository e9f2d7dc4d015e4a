"""Speculative decoding, disaggregated P/D (KV transfer, queues), LoRA, prompt-cache tiers and sleep
figures of one model, from the canonical metrics of the optional mappings (``engines/*.toml``:
``optional = true``).

Each is None where the engine exposes none of its series, so a panel appears only where there is
something to show. Ratios over the 60 s window (as vLLM's Speculative Decoding dashboard computes
them): acceptance rate = Δaccepted / Δdraft tokens, acceptance length = 1 + Δaccepted / Δdrafts,
per-position acceptance = Δaccepted at position i / Δdrafts, draft share = Δaccepted / Δgenerated;
KV transfer = Δbytes / Δt and Δbytes / Δtransfer time. Where
the engine has gauges instead (SGLang), the gauges. llama.cpp always exports its spec-decode counters
(0 without a draft model): the panel waits for the first draft token. SGLang likewise always sets
its gauges, to 0 with speculative decoding off; with it on a step yields at least the bonus token
(acceptance length >= 1), so gauges reading 0 / 0 are "off", not a panel of zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from console.model import CacheTiers, KvTransfer, LoraState, PdQueues, Rates, SpecDecode

Increase = Callable[[str], float | None]  # canonical counter -> its increase over the window (None: absent)
Gauge = Callable[[str], float | None]  # canonical gauge -> its value (None: absent)
Total = Callable[[str], float | None]  # canonical counter -> its current total (None: absent)

__all__ = ["cache_tiers", "kv_transfer", "lora", "pd_queues", "sleep_level", "spec_decode"]


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    r = num / den
    return r if math.isfinite(r) else None  # 1e308 / 1e-3 from a bad payload: no number, not inf


def spec_decode(increase: Increase, gauge: Gauge, total: Total,
                per_pos: Mapping[str, float] | None = None) -> SpecDecode | None:  # fmt: skip
    """``per_pos``: Δaccepted tokens per draft position (label value -> increase), where exported."""
    rate_g, length_g = gauge("spec_accept_rate"), gauge("spec_accept_length")
    drafted = total("spec_draft_tokens")
    if drafted is not None and drafted > 0:
        d_acc, d_tok, d_steps = increase("spec_accepted_tokens"), increase("spec_draft_tokens"), increase("spec_drafts")
        rate = _ratio(d_acc, d_tok)
        steps = _ratio(d_acc, d_steps)
        positions = sorted((per_pos or {}).items(), key=lambda kv: _pos(kv[0]))
        return SpecDecode(
            per_position=tuple(v / d_steps for _, v in positions) if d_steps else (),
            acceptance_rate=rate if rate is not None else rate_g,
            acceptance_length=1.0 + steps if steps is not None else length_g,
            draft_share=_ratio(d_acc, increase("generation_tokens")),
            window="60s",
        )
    if not rate_g and not length_g:  # None, or 0 / 0: speculative decoding is off
        return None
    return SpecDecode(acceptance_rate=rate_g, acceptance_length=length_g, window="gauge")


def _pos(label: str) -> int:
    try:
        return int(label)
    except ValueError:
        return 1 << 30


def kv_transfer(increase: Increase, gauge: Gauge, window_s: float | None, failures: Rates) -> KvTransfer | None:
    names = ("kv_transfer_bytes", "kv_transfer_time", "kv_transfers", "kv_transfer_failures")
    d = {n: increase(n) for n in names}
    speed, latency = gauge("kv_transfer_gb_s"), gauge("kv_transfer_latency")
    if all(v is None for v in d.values()) and speed is None and latency is None:
        return None
    moved, took = d["kv_transfer_bytes"], d["kv_transfer_time"]
    link = _ratio(moved, took)
    return KvTransfer(
        bytes_per_s=_ratio(moved, window_s),
        link_gb_s=link / 1e9 if link is not None else speed,
        latency_s=_ratio(took, d["kv_transfers"]) if took is not None else latency,
        failures_per_s=failures,
    )


def lora(gauge: Gauge) -> LoraState | None:
    values = {n: gauge(n) for n in ("lora_running", "lora_waiting", "lora_slots_used", "lora_slots_total")}
    if all(v is None for v in values.values()):
        return None
    return LoraState(running=values["lora_running"], waiting=values["lora_waiting"],
                     slots_used=values["lora_slots_used"], slots_total=values["lora_slots_total"])  # fmt: skip


def pd_queues(gauge: Gauge, failures: Rates) -> PdQueues | None:
    q = {n: gauge(f"pd_{n}_queue") for n in ("bootstrap", "inflight", "prealloc", "transfer")}
    if all(v is None for v in q.values()):
        return None  # not a disaggregated engine (the gauges exist only in P/D mode)
    return PdQueues(bootstrap=q["bootstrap"], inflight=q["inflight"], prealloc=q["prealloc"],
                    transfer=q["transfer"], bootstrap_failures_per_s=failures)  # fmt: skip


def cache_tiers(by_tier: Mapping[str, float] | None, window_s: float | None,
                increase: Increase) -> CacheTiers | None:  # fmt: skip
    """``by_tier``: Δcached tokens per tier over the window (None: the engine has no such counter)."""
    external = _ratio(increase("external_prefix_hits"), increase("external_prefix_queries"))
    if by_tier is None and external is None:
        return None
    per_s = tuple((tier, v / window_s) for tier, v in sorted((by_tier or {}).items())
                  if window_s and tier)  # fmt: skip
    if not per_s and external is None:
        return None
    return CacheTiers(tokens_per_s=per_s, external_hit_rate=external)


def sleep_level(gauge: Gauge) -> int | None:
    """vLLM's engine_sleep_state: awake=1 -> 0; weights_offloaded=1 -> 1; discard_all=1 -> 2."""
    awake, offloaded, discarded = gauge("sleep_awake"), gauge("sleep_offloaded"), gauge("sleep_discarded")
    if discarded:
        return 2
    if offloaded:
        return 1
    if awake is None:
        return None
    return 0 if awake else 1  # asleep without saying which level: at least level 1
