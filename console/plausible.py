"""Physical ranges of the normalised figures, and the one check that enforces them.

An engine (or a proxy, or a bug) can report any float: a KV-cache usage of 1e308, a negative
number of running requests, a counter of 2**63. Such a value is not a measurement: shown as a number
it misleads, and summed or charted it overflows. ``check`` sets every figure outside its range to
None (n/a) and lists it in ``ModelMetrics.invalid``, so screens and ``status --json`` say which
figure was dropped and why. ``RANGES`` is the single table both the check and the tests read.

The bounds are generous on purpose: they reject what no engine can do (a million requests in one
batch, a billion tokens per second, a latency of weeks), never a busy but real server.
"""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

from console.model import (
    InvalidFigure,
    KvTransfer,
    LoraState,
    ModelMetrics,
    PdQueues,
    Quantiles,
    Rates,
    SpecDecode,
)

Bounds = tuple[float, float]

FRACTION: Bounds = (0.0, 1.0)
REQUESTS: Bounds = (0.0, 1e7)  # requests running or waiting at one moment
LORA: Bounds = (0.0, 1e5)  # adapters
COUNTER: Bounds = (0.0, 1e15)  # a lifetime total: 1e15 tokens is 30 years at a million tokens/s
TOKENS_PER_S: Bounds = (0.0, 1e9)
EVENTS_PER_S: Bounds = (0.0, 1e7)  # requests, errors, preemptions, transfer failures per second
SECONDS: Bounds = (0.0, 1e6)  # a latency or duration: under 12 days
ACCEPT_LENGTH: Bounds = (0.0, 1e3)  # tokens per verification step (SGLang reports 0 when spec is off)
BYTES_PER_S: Bounds = (0.0, 1e13)
GB_PER_S: Bounds = (0.0, 1e4)
SLEEP_LEVEL: Bounds = (0.0, 2.0)  # vLLM engine_sleep_state: awake, weights offloaded, weights discarded

# A fraction computed in floating point may land a rounding error past its bound: that is kept
# (clamped), a real excess is not.
_SLACK = 1e-9

_RATES: dict[str, Bounds] = {
    "prompt_tps": TOKENS_PER_S,
    "generation_tps": TOKENS_PER_S,
    "request_rate": EVENTS_PER_S,
    "error_rate": EVENTS_PER_S,
    "preemption_rate": EVENTS_PER_S,
    "admission_rejections_per_s": EVENTS_PER_S,
}
_QUANTILES = ("ttft", "itl", "tpot", "e2e", "queue_time", "prefill_time", "decode_time", "inference_time")
_GAUGES: dict[str, Bounds] = {
    "running": REQUESTS,
    "waiting": REQUESTS,
    "waiting_capacity": REQUESTS,
    "waiting_deferred": REQUESTS,
    "kv_usage": FRACTION,
    "kv_usage_mean": FRACTION,
    "kv_host_usage": FRACTION,
    "prefix_hit_rate": FRACTION,
    "preemptions_total": COUNTER,
    "sleep_level": SLEEP_LEVEL,
}

# Every numeric figure of ModelMetrics and the range it must lie in (dotted paths as in
# InvalidFigure.field; "*" for every element or key).
RANGES: dict[str, Bounds] = {
    **_GAUGES,
    "counters.*": COUNTER,
    "ttft_cumulative.*": COUNTER,
    **{f"{name}.{w}": b for name, b in _RATES.items() for w in ("r5s", "r15s", "r60s")},
    **{f"{name}.{q}": SECONDS for name in _QUANTILES for q in ("p50", "p90", "p99", "mean")},
    **{f"{name}.count": COUNTER for name in _QUANTILES},
    "spec.acceptance_rate": FRACTION,
    "spec.draft_share": FRACTION,
    "spec.acceptance_length": ACCEPT_LENGTH,
    "spec.per_position.*": FRACTION,
    "kv_transfer.bytes_per_s": BYTES_PER_S,
    "kv_transfer.link_gb_s": GB_PER_S,
    "kv_transfer.latency_s": SECONDS,
    **{f"kv_transfer.failures_per_s.{w}": EVENTS_PER_S for w in ("r5s", "r15s", "r60s")},
    "lora.running": LORA,
    "lora.waiting": LORA,
    "lora.slots_used": LORA,
    "lora.slots_total": LORA,
    **{f"pd_queues.{q}": REQUESTS for q in ("bootstrap", "inflight", "prealloc", "transfer")},
    **{f"pd_queues.bootstrap_failures_per_s.{w}": EVENTS_PER_S for w in ("r5s", "r15s", "r60s")},
    "cache_tiers.tokens_per_s.*": TOKENS_PER_S,
    "cache_tiers.external_hit_rate": FRACTION,
}


def allowed(bounds: Bounds) -> str:
    lo, hi = bounds
    return f"{lo:g}-{hi:g}"


class _Checker:
    def __init__(self) -> None:
        self.invalid: list[InvalidFigure] = []

    def value(self, path: str, v: float | None, bounds: Bounds) -> float | None:
        if v is None or not math.isfinite(v):
            return None  # NaN and +-inf are "no value" (a window could not compute it), not a reading
        lo, hi = bounds
        if lo <= v <= hi:
            return v
        if bounds is FRACTION and lo - _SLACK <= v <= hi + _SLACK:
            return min(hi, max(lo, v))
        self.invalid.append(InvalidFigure(path, v, allowed(bounds)))
        return None

    def record(self, prefix: str, obj: Any, table: dict[str, Bounds]) -> Any:
        """``obj`` (a frozen dataclass of floats) with its out-of-range fields set to None."""
        changes: dict[str, float | None] = {}
        for f in fields(obj):
            bounds = table.get(f.name)
            if bounds is None:
                continue
            old = getattr(obj, f.name)
            new = self.value(f"{prefix}.{f.name}", old, bounds)
            if new is not old:
                changes[f.name] = new
        return replace(obj, **changes) if changes else obj

    def rates(self, prefix: str, r: Rates, bounds: Bounds) -> Rates:
        return self.record(prefix, r, {"r5s": bounds, "r15s": bounds, "r60s": bounds})  # type: ignore[no-any-return]

    def quantiles(self, prefix: str, q: Quantiles) -> Quantiles:
        checked: Quantiles = self.record(prefix, q, {"p50": SECONDS, "p90": SECONDS, "p99": SECONDS,
                                                     "mean": SECONDS, "count": COUNTER})
        if checked is not q and checked.count is None:
            # Quantiles over a window whose count is nonsense are nonsense too.
            checked = replace(checked, p50=None, p90=None, p99=None, mean=None)
        return checked


def check(m: ModelMetrics) -> ModelMetrics:
    """``m`` with every figure outside its physical range set to None and listed in ``invalid``."""
    c = _Checker()
    changes: dict[str, Any] = {}
    for name, bounds in _GAUGES.items():
        old = getattr(m, name)
        new = c.value(name, old, bounds)
        if new is not old:
            changes[name] = new
    for name, bounds in _RATES.items():
        rates: Rates = getattr(m, name)
        checked_rates = c.rates(name, rates, bounds)
        if checked_rates is not rates:
            changes[name] = checked_rates
    for name in _QUANTILES:
        quantiles: Quantiles = getattr(m, name)
        checked_quantiles = c.quantiles(name, quantiles)
        if checked_quantiles is not quantiles:
            changes[name] = checked_quantiles
    counters = {k: v for k, v in m.counters.items() if c.value(f"counters.{k}", v, COUNTER) is not None}
    if len(counters) != len(m.counters):
        changes["counters"] = counters
    counts = m.ttft_cumulative[1]
    if counts and any(c.value("ttft_cumulative", v, COUNTER) is None for v in counts):
        changes["ttft_cumulative"] = ((), ())
    if m.spec is not None:
        spec: SpecDecode = c.record("spec", m.spec, {"acceptance_rate": FRACTION, "draft_share": FRACTION,
                                                     "acceptance_length": ACCEPT_LENGTH})
        per_pos = tuple(c.value(f"spec.per_position.{i + 1}", v, FRACTION) for i, v in enumerate(spec.per_position))
        if any(v is None for v in per_pos):
            spec = replace(spec, per_position=())
        if spec is not m.spec:
            changes["spec"] = spec
    if m.kv_transfer is not None:
        kvt: KvTransfer = c.record("kv_transfer", m.kv_transfer, {"bytes_per_s": BYTES_PER_S, "link_gb_s": GB_PER_S,
                                                                  "latency_s": SECONDS})
        failures = c.rates("kv_transfer.failures_per_s", kvt.failures_per_s, EVENTS_PER_S)
        if failures is not kvt.failures_per_s:
            kvt = replace(kvt, failures_per_s=failures)
        if kvt is not m.kv_transfer:
            changes["kv_transfer"] = kvt
    if m.lora is not None:
        lora: LoraState = c.record("lora", m.lora, {f.name: LORA for f in fields(LoraState)})
        if lora is not m.lora:
            changes["lora"] = lora
    if m.pd_queues is not None:
        pd: PdQueues = c.record("pd_queues", m.pd_queues, {q: REQUESTS for q in ("bootstrap", "inflight", "prealloc",
                                                                                "transfer")})
        failures = c.rates("pd_queues.bootstrap_failures_per_s", pd.bootstrap_failures_per_s, EVENTS_PER_S)
        if failures is not pd.bootstrap_failures_per_s:
            pd = replace(pd, bootstrap_failures_per_s=failures)
        if pd is not m.pd_queues:
            changes["pd_queues"] = pd
    if m.cache_tiers is not None:
        tiers = m.cache_tiers
        kept = tuple((tier, v) for tier, v in tiers.tokens_per_s
                     if c.value(f"cache_tiers.tokens_per_s.{tier}", v, TOKENS_PER_S) is not None)
        hit = c.value("cache_tiers.external_hit_rate", tiers.external_hit_rate, FRACTION)
        if kept != tiers.tokens_per_s or hit is not tiers.external_hit_rate:
            changes["cache_tiers"] = replace(tiers, tokens_per_s=kept, external_hit_rate=hit)
    if not changes:
        return m
    return replace(m, invalid=(*m.invalid, *c.invalid), **changes)


def merge_invalid(total: ModelMetrics, per_model: tuple[ModelMetrics, ...]) -> ModelMetrics:
    """The all-models total marked with every model's invalid figures too: a mean over models can
    hide one model's nonsense, and the engine's metrics are marked either way."""
    # Keyed by the text, not the value: a NaN is never equal to itself.
    seen = {f.describe() for f in total.invalid}
    extra = tuple(f for m in per_model for f in m.invalid if f.describe() not in seen)
    return replace(total, invalid=(*total.invalid, *extra)) if extra else total
