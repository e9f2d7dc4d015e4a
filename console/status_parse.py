"""The inverse of ``status_doc``: an ``enginedeck.status/2`` document back into a ``FleetSnapshot``.

A replay and a remote host show documents on the normal screens, which read snapshots. Every field
the screens show comes back (energy, speculative decoding, KV transfer, LoRA, engine control's
lifecycle view, alerts), so a replay or a remote engine reads as the live console did; tested field
by field in tests/test_status_roundtrip.py. What the document does not hold (raw series, counters,
the cumulative TTFT histogram the alert rules read, per-part ``taken_at``) comes back empty or as
the document's own ``taken_at``. A document of another schema, or one that
is not shaped like ours, raises ``DocumentError`` with what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from console import plausible
from console.model import (
    Alert,
    AlertState,
    CacheTiers,
    EnergyView,
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuProcess,
    GpuSnapshot,
    HostSnapshot,
    HostView,
    InvalidFigure,
    KvTransfer,
    LifecycleView,
    LoraState,
    ModelMetrics,
    PdQueues,
    Phase,
    Quantiles,
    Rates,
    SourceState,
    SpecDecode,
)
from console.status_doc import SCHEMA

Doc = Mapping[str, Any]


class DocumentError(ValueError):
    """A status document this console cannot read back."""


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def _i(v: Any) -> int | None:
    return None if v is None else int(v)


def quantiles_from(d: Doc) -> Quantiles:
    return Quantiles(p50=_f(d["p50"]), p90=_f(d["p90"]), p99=_f(d["p99"]), count=_f(d["count"]),
                     mean=_f(d["mean"]), low_sample=bool(d["low_sample"]), capped=tuple(d.get("capped") or ()))


def rates_from(d: Doc) -> Rates:
    return Rates(r5s=_f(d["5s"]), r15s=_f(d["15s"]), r60s=_f(d["60s"]), at_finish=bool(d.get("at_finish", False)),
                 step=_f(d.get("step")) or 0.0)


def freshness_from(d: Doc) -> Freshness:
    return Freshness(state=SourceState(d["state"]), updated_at=_f(d["updated_at"]),
                     stale_since=_f(d["stale_since"]), reason=d["reason"] or "")


def spec_from(d: Doc | None) -> SpecDecode | None:
    if d is None:
        return None
    return SpecDecode(acceptance_rate=_f(d["acceptance_rate"]), acceptance_length=_f(d["acceptance_length"]),
                      draft_share=_f(d["draft_share"]), window=d["window"],
                      per_position=tuple(_nan(v) for v in d["per_position"]))


def kv_transfer_from(d: Doc | None) -> KvTransfer | None:
    if d is None:
        return None
    return KvTransfer(bytes_per_s=_f(d["bytes_per_s"]), link_gb_s=_f(d["link_gb_s"]), latency_s=_f(d["latency_s"]),
                      failures_per_s=rates_from(d["failures_per_s"]))


def lora_from(d: Doc | None) -> LoraState | None:
    if d is None:
        return None
    return LoraState(running=_f(d["running"]), waiting=_f(d["waiting"]), slots_used=_f(d["slots_used"]),
                     slots_total=_f(d["slots_total"]))


def energy_from(d: Doc | None) -> EnergyView | None:
    if d is None:
        return None
    return EnergyView(
        joules=_f(d["joules"]), window_s=_f(d["window_s"]), power_w=_f(d["power_w"]),
        tokens_per_joule=_f(d["tokens_per_joule"]), total_tokens_per_joule=_f(d["total_tokens_per_joule"]),
        joules_per_1k_output=_f(d["joules_per_1k_output_tokens"]), idle_w=_f(d["idle_w"]), busy_w=_f(d["busy_w"]),
        total_joules=_f(d["total_joules"]), source=d["source"] or "", attribution=d["attribution"],
        reason=d["reason"] or "", gpus=tuple(int(g) for g in d["gpus"]), simulated=bool(d["simulated"]),
    )


def lifecycle_from(d: Doc | None) -> LifecycleView | None:
    if d is None:
        return None
    return LifecycleView(phase=Phase(d["phase"]), detail=d["detail"] or "", ended=d["ended"] or "",
                         exit_code=_i(d["exit_code"]), oom_killed=bool(d["oom_killed"]), since=_f(d["since"]),
                         countdown=_i(d["countdown"]))


def model_from(d: Doc) -> ModelMetrics:
    """A model's figures from a document, checked again: an older or foreign writer may not have."""
    return plausible.check(ModelMetrics(
        model=d["model"],
        running=_f(d["running"]),
        waiting=_f(d["waiting"]),
        kv_usage=_f(d["kv_usage"]),
        kv_usage_mean=_f(d["kv_usage_mean"]),
        replicas=int(d["replicas"]),
        prefix_hit_rate=_f(d["prefix_hit_rate"]),
        prefix_hit_rate_window=d["prefix_hit_rate_window"],
        prompt_tps=rates_from(d["prompt_tokens_per_s"]),
        generation_tps=rates_from(d["generation_tokens_per_s"]),
        request_rate=rates_from(d["requests_per_s"]),
        error_rate=rates_from(d["errors_per_s"]),
        preemptions_total=_f(d["preemptions_total"]),
        preemption_rate=rates_from(d["preemptions_per_s"]),
        ttft=quantiles_from(d["ttft_s"]),
        itl=quantiles_from(d["itl_s"]),
        tpot=quantiles_from(d["tpot_s"]),
        e2e=quantiles_from(d["e2e_s"]),
        queue_time=quantiles_from(d["queue_time_s"]),
        invalid=tuple(_invalid_from(f) for f in d.get("invalid") or ()),
        **_newer_from(d),
        # Documents from before these were recorded lack the keys: no panel, as then.
        spec=spec_from(d.get("spec_decode")),
        kv_transfer=kv_transfer_from(d.get("kv_transfer")),
        lora=lora_from(d.get("lora")),
    ))


def _newer_from(d: Doc) -> dict[str, Any]:
    """The figures added within status/2 for the newest engines (absent from older documents)."""
    out: dict[str, Any] = {}
    for key, field_name in (("prefill_time_s", "prefill_time"), ("decode_time_s", "decode_time"),
                            ("inference_time_s", "inference_time")):
        if d.get(key) is not None:
            out[field_name] = quantiles_from(d[key])
    by_reason = d.get("waiting_by_reason")
    if by_reason is not None:
        out["waiting_capacity"] = _f(by_reason.get("capacity"))
        out["waiting_deferred"] = _f(by_reason.get("deferred"))
    if d.get("sleep_level") is not None:
        out["sleep_level"] = int(d["sleep_level"])
    out["kv_host_usage"] = _f(d.get("kv_host_usage"))
    if d.get("admission_rejections_per_s") is not None:
        out["admission_rejections_per_s"] = rates_from(d["admission_rejections_per_s"])
    pd = d.get("pd_queues")
    if pd is not None:
        out["pd_queues"] = PdQueues(bootstrap=_f(pd["bootstrap"]), inflight=_f(pd["inflight"]),
                                    prealloc=_f(pd["prealloc"]), transfer=_f(pd["transfer"]),
                                    bootstrap_failures_per_s=rates_from(pd["bootstrap_failures_per_s"]))
    tiers = d.get("prompt_cache_tiers")
    if tiers is not None:
        per_tier = tuple((str(k), float(v)) for k, v in tiers["tokens_per_s"].items())
        out["cache_tiers"] = CacheTiers(tokens_per_s=per_tier, external_hit_rate=_f(tiers["external_hit_rate"]))
    return out


def _invalid_from(d: Doc) -> InvalidFigure:
    allowed = str(d["allowed"])
    reason = str(d.get("reason") or "")  # older documents lack it: a range left
    if reason == f"outside {allowed}":
        reason = ""
    return InvalidFigure(field=str(d["field"]), value=float(d["reported"]), allowed=allowed, reason=reason)


def engine_from(d: Doc, taken_at: float) -> EngineSnapshot:
    summary = d["summary"]
    return EngineSnapshot(
        name=d["name"],
        profile=d["profile"],
        url=d["url"],
        taken_at=taken_at,
        phase=Phase(d["phase"]),
        reachable=bool(d["reachable"]),
        health_detail=d["detail"] or "",
        identity=EngineIdentity(version=d["version"], models=tuple(d["served_models"]),
                                max_model_len=_i(d["max_model_len"])),
        metrics_freshness=freshness_from(d["metrics"]),
        health_freshness=freshness_from(d["health"]),
        models=tuple(model_from(m) for m in d["per_model"]),
        total=model_from(summary) if summary is not None else None,
        missing=tuple(d["missing_metrics"]),
        managed=bool(d["managed"]),
        simulated=bool(d["simulated"]),
        gpus=tuple(int(g) for g in d["gpus"]),
        pids=tuple(int(p) for p in d["pids"]),
        cpu_percent=_f(d["cpu_percent"]),
        rss_bytes=_i(d["rss_bytes"]),
        host=d.get("host") or "",
        source=d.get("source") or "",
        role=d.get("role") or "",
        energy=energy_from(d.get("energy")),
        lifecycle=lifecycle_from(d.get("lifecycle")),
    )


def gpu_from(d: Doc, taken_at: float) -> GpuSnapshot:
    return GpuSnapshot(
        index=int(d["index"]),
        name=d["name"],
        uuid=d["uuid"],
        taken_at=taken_at,
        util_percent=_f(d["util_percent"]),
        mem_util_percent=_f(d["mem_util_percent"]),
        mem_used_bytes=_i(d["mem_used_bytes"]),
        mem_total_bytes=_i(d["mem_total_bytes"]),
        temperature_c=_f(d["temperature_c"]),
        power_w=_f(d["power_w"]),
        power_limit_w=_f(d["power_limit_w"]),
        sm_clock_mhz=_i(d["sm_clock_mhz"]),
        mem_clock_mhz=_i(d["mem_clock_mhz"]),
        ecc_errors=_i(d["ecc_errors"]),
        xid_errors=tuple(int(x) for x in d["xid_errors"]),
        throttle_reasons=None if d.get("throttle_reasons") is None else tuple(d["throttle_reasons"]),
        processes=tuple(GpuProcess(pid=int(p["pid"]), used_bytes=_i(p["used_bytes"]), name=p["name"],
                                   container=p["container"], engine=p["engine"]) for p in d["processes"]),
        simulated=bool(d["simulated"]),
        host=d.get("host") or "",
        energy_mj=_f(d.get("energy_mj")),
        energy_source=d.get("energy_source") or "",
        mig=d.get("mig"),
        energy=energy_from(d.get("energy")),
    )


def gpus_from(d: Doc, taken_at: float) -> GpuFleet:
    return GpuFleet(
        gpus=tuple(gpu_from(g, taken_at) for g in d["devices"]),
        freshness=freshness_from(d["freshness"]),
        driver_version=d["driver_version"],
        source=d["source"],
        unavailable_reason=d["reason"] or "",
    )


def host_from(d: Doc | None, taken_at: float) -> HostSnapshot | None:
    if d is None:
        return None
    load = d["load_avg"]
    return HostSnapshot(
        taken_at=taken_at,
        cpu_percent=_f(d["cpu_percent"]),
        cpu_count=_i(d["cpu_count"]),
        mem_used_bytes=_i(d["mem_used_bytes"]),
        mem_total_bytes=_i(d["mem_total_bytes"]),
        # A non-finite load came out as null; NaN goes back out as null again.
        load_avg=(_nan(load[0]), _nan(load[1]), _nan(load[2])) if load else None,
        hostname=d["hostname"],
        freshness=freshness_from(d["freshness"]),
    )


def host_view_from(d: Doc, taken_at: float) -> HostView:
    age = _f(d["last_document_age_s"])
    kind = d.get("kind") or "ssh"
    if d.get("freshness") is not None:
        fresh = freshness_from(d["freshness"])
    else:  # documents from before the host's freshness was recorded
        stale_since = None if d["state"] == SourceState.OK.value else taken_at
        fresh = Freshness(SourceState(d["state"]), stale_since=stale_since, reason=d["reason"] or "")
    dest = {"prometheus": d.get("prometheus"), "kubernetes": d.get("kubernetes")}.get(kind, d["ssh"])
    return HostView(name=d["name"], destination=dest or "", kind=kind, freshness=fresh,
                    last_doc_at=None if age is None else taken_at - age, host=host_from(d.get("host"), taken_at),
                    engines=int(d.get("engines") or 0))


def snapshot_from_doc(doc: Doc) -> FleetSnapshot:
    """The snapshot a status document was made from, as far as the document holds it."""
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if schema != SCHEMA:
        raise DocumentError(f"not an {SCHEMA} document (schema {schema!r})")
    try:
        t = float(doc["taken_at"])
        snap = FleetSnapshot(
            taken_at=t,
            engines=tuple(engine_from(e, t) for e in doc["engines"]),
            gpus=gpus_from(doc["gpus"], t),
            host=host_from(doc["host"], t),
            hosts=tuple(host_view_from(h, t) for h in doc.get("hosts") or ()),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DocumentError(f"malformed {SCHEMA} document: {type(exc).__name__}: {exc}") from None
    return replace(snap, alerts=alerts_from(doc))


def alerts_from(doc: Doc) -> tuple[Alert, ...]:
    """The ``alerts`` array of a document (a remote host's alerts); empty when it has none."""
    try:
        return tuple(
            Alert(rule=a["rule"], engine=a["engine"], severity=a["severity"], state=AlertState(a["state"]),
                  summary=a["summary"], since=_f(a["since"]), value=_f(a["value"]), condition=a["condition"],
                  values=tuple((k, _f(v)) for k, v in (a.get("values") or {}).items()),
                  runbook=a.get("runbook") or "", note=a.get("note") or "", clears_at=_f(a.get("clears_at")))
            for a in doc.get("alerts") or ()
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DocumentError(f"malformed alerts in {SCHEMA} document: {type(exc).__name__}: {exc}") from None
