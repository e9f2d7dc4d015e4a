"""One-line panels of the engine detail that appear only where there is something to show: energy
(tokens per joule), speculative decoding, KV transfer and queues of disaggregated prefill/decode,
LoRA, request phases, waiting by reason / sleep / admission, and the prompt cache by tier.

Pure functions from a snapshot to Rich text (None: no panel), so they are tested without a
terminal; ``e`` on a panel explains it (its explain key is the first item of each STRIPS entry).
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from console.model import EngineSnapshot, ModelMetrics
from console.ui import format as fmt

__all__ = ["STRIPS", "energy_strip", "kv_strip", "lora_strip", "pd_strip", "phases_strip", "sched_strip",
           "spec_strip", "tiers_strip"]


def _n(v: float | None, f: str, suffix: str = "") -> str:
    return "n/a" if fmt.is_missing(v) else f.format(v) + suffix


def _label(out: Text, name: str) -> None:
    out.append(f" {name:<10} ", style="bold")


def energy_strip(e: EngineSnapshot) -> Text | None:
    """Most important first (a narrow terminal cuts the end): tok/J, '~' and "estimate" included."""
    v = e.energy
    if v is None:
        return None
    out = Text()
    _label(out, "energy")
    out.append_text(fmt.tok_per_joule(v))
    out.append(" tok/J", style="bold")
    if v.estimate:
        out.append(" (estimate)", style=fmt.WARN)
    out.append(f" · {_n(v.joules_per_1k_output, '{:.0f}', ' J')}/1k out · {_n(v.power_w, '{:.0f}', ' W')} · "
               f"{_n(v.total_tokens_per_joule, '{:.2f}')} tok/J with prompt · idle {_n(v.idle_w, '{:.0f}', ' W')},"
               f" busy {_n(v.busy_w, '{:.0f}', ' W')}")  # fmt: skip
    source = {"integrated": "power ∫10 Hz", "simulated": "simulated"}.get(v.source, v.source)
    out.append(f" · {source}", style="dim")
    return out


def spec_strip(m: ModelMetrics) -> Text | None:
    s = m.spec
    if s is None:
        return None
    out = Text()
    _label(out, "spec dec")
    rate = None if s.acceptance_rate is None else 100 * s.acceptance_rate
    out.append(f"acceptance {_n(rate, '{:.0f}', '%')} · length {_n(s.acceptance_length, '{:.2f}')} tok/step")
    if s.draft_share is not None:
        out.append(f" · {100 * s.draft_share:.0f}% of output from drafts")
    if s.per_position:
        out.append(" · per position " + " ".join(f"{v:.2f}" for v in s.per_position))
    out.append(" (60 s)" if s.window == "60s" else " (engine's gauge)", style="dim")
    return out


def kv_strip(m: ModelMetrics) -> Text | None:
    k = m.kv_transfer
    if k is None:
        return None
    out = Text()
    _label(out, "KV xfer")
    moved = None if k.bytes_per_s is None else k.bytes_per_s / 1e6
    lat = None if k.latency_s is None else 1000 * k.latency_s
    out.append(f"{_n(moved, '{:.1f}', ' MB/s')} · link {_n(k.link_gb_s, '{:.1f}', ' GB/s')} · "
               f"{_n(lat, '{:.1f}', ' ms')}/transfer · failed ")  # fmt: skip
    failed = k.failures_per_s.r60s
    out.append(_n(failed, "{:.2f}", "/s"), style=fmt.CRIT if failed else "")
    return out


def lora_strip(m: ModelMetrics) -> Text | None:
    lo = m.lora
    if lo is None:
        return None
    out = Text()
    _label(out, "LoRA")
    parts = []
    if lo.running is not None:
        parts.append(f"{lo.running:.0f} running")
    if lo.waiting is not None:
        parts.append(f"{lo.waiting:.0f} waiting")
    used = lo.slots_used if lo.slots_used is not None else lo.running
    if lo.slots_total is not None:
        parts.append(f"slots {_n(used, '{:.0f}')}/{lo.slots_total:.0f}")
    out.append(" · ".join(parts) or "n/a")
    if lo.waiting and used is not None and lo.slots_total is not None and used >= lo.slots_total:
        out.append(" · slots full", style=fmt.WARN)
    return out


def phases_strip(m: ModelMetrics) -> Text | None:
    phases = (("prefill", m.prefill_time), ("decode", m.decode_time), ("inference", m.inference_time))
    if all(q.count is None for _, q in phases):
        return None
    out = Text()
    _label(out, "phases")
    out.append(" · ".join(f"{name} p50 {_n(q.p50, '{:.3f}', ' s')}" for name, q in phases if q.count is not None))
    return out


_SLEEP = {0: "awake", 1: "asleep (level 1: weights offloaded)", 2: "asleep (level 2: weights discarded)"}


def sched_strip(m: ModelMetrics) -> Text | None:
    rejected = m.admission_rejections_per_s.r60s
    if m.waiting_capacity is None and m.waiting_deferred is None and m.sleep_level is None and rejected is None:
        return None
    out = Text()
    _label(out, "waiting")
    parts: list[tuple[str, str]] = []
    if m.waiting_capacity is not None or m.waiting_deferred is not None:
        parts.append((f"{_n(m.waiting_capacity, '{:.0f}')} for capacity · {_n(m.waiting_deferred, '{:.0f}')} "
                      "deferred", ""))  # fmt: skip
    if m.sleep_level is not None:
        parts.append((_SLEEP[m.sleep_level], fmt.WARN if m.sleep_level else ""))
    if rejected is not None:
        parts.append((f"refused {rejected:.2f}/s", fmt.CRIT if rejected else ""))
    for i, (text, style) in enumerate(parts):
        if i:
            out.append(" · ")
        out.append(text, style=style)
    return out


def pd_strip(m: ModelMetrics) -> Text | None:
    q = m.pd_queues
    if q is None:
        return None
    out = Text()
    _label(out, "P/D queue")
    named = (("bootstrap", q.bootstrap), ("inflight", q.inflight), ("prealloc", q.prealloc), ("transfer", q.transfer))
    out.append(" · ".join(f"{name} {v:.0f}" for name, v in named if v is not None) + " · bootstrap failed ")
    failed = q.bootstrap_failures_per_s.r60s
    out.append(_n(failed, "{:.2f}", "/s"), style=fmt.CRIT if failed else "")
    return out


def tiers_strip(m: ModelMetrics) -> Text | None:
    t = m.cache_tiers
    if t is None and m.kv_host_usage is None:
        return None
    out = Text()
    _label(out, "cache tier")
    parts = [f"{tier} {v:.0f}" for tier, v in (t.tokens_per_s if t else ()) if v > 0]
    if t is not None and t.tokens_per_s:
        parts = [(" ".join(parts) or "none") + " tok/s"]
    if t is not None and t.external_hit_rate is not None:
        parts.append(f"external hits {100 * t.external_hit_rate:.0f}%")
    if m.kv_host_usage is not None:
        parts.append(f"host KV {100 * m.kv_host_usage:.0f}%")
    out.append(" · ".join(parts) or "n/a")
    return out


def _total(f: Callable[[ModelMetrics], Text | None]) -> Callable[[EngineSnapshot], Text | None]:
    def strip(e: EngineSnapshot) -> Text | None:
        return f(e.total) if e.total is not None else None

    return strip


# (explain key, widget id, render)
STRIPS: tuple[tuple[str, str, Callable[[EngineSnapshot], Text | None]], ...] = (
    ("tokens_per_joule", "strip-energy", energy_strip),
    ("spec_decode", "strip-spec", _total(spec_strip)),
    ("kv_transfer", "strip-kv", _total(kv_strip)),
    ("lora", "strip-lora", _total(lora_strip)),
    ("pd_queues", "strip-pd", _total(pd_strip)),
    ("cache_tiers", "strip-tiers", _total(tiers_strip)),
    ("scheduling", "strip-sched", _total(sched_strip)),
    ("phases", "strip-phases", _total(phases_strip)),
)
