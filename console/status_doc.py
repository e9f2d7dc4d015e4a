"""The versioned JSON document of `enginedeck status --json` (schema in docs/status-json.md).

Built only from snapshots; ``null`` always means n/a (the engine lacks the metric or there is not
enough data yet), never 0.
"""

from __future__ import annotations

from typing import Any

from console import strictjson
from console.model import (
    Alert,
    EnergyView,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuSnapshot,
    HostSnapshot,
    HostView,
    LifecycleView,
    ModelMetrics,
    Quantiles,
    Rates,
)

SCHEMA = "enginedeck.status/2"  # docs/status-json.md, "Changes" lists what each bump changed


def _round(v: float | None, nd: int = 6) -> float | None:
    return None if v is None else round(v, nd)


def quantiles_doc(q: Quantiles) -> dict[str, Any]:
    return {
        "p50": _round(q.p50),
        "p90": _round(q.p90),
        "p99": _round(q.p99),
        "mean": _round(q.mean),
        "count": _round(q.count, 3),
        "low_sample": q.low_sample,
        # Quantiles that fell in the +Inf bucket: the value is the top finite bound, the truth is above.
        "capped": list(q.capped),
    }


def rates_doc(r: Rates) -> dict[str, Any]:
    return {
        "5s": _round(r.r5s, 4),
        "15s": _round(r.r15s, 4),
        "60s": _round(r.r60s, 4),
        # The current rate to show: the 5 s one, or the 60 s one where the engine counts only when a
        # request finishes (then 5 s / 15 s read 0 during decodes and spike when they end).
        "now": _round(r.now, 4),
        "now_window": r.now_window,
        "at_finish": r.at_finish,
        # Printed too coarsely for 5 s (llama.cpp's 6 significant digits): "now" is the 60 s rate.
        "approximate": r.approximate,
        "step": r.step or None,  # the counter's printed resolution, where it makes a rate approximate
    }


def freshness_doc(f: Freshness) -> dict[str, Any]:
    return {
        "state": f.state.value,
        "updated_at": f.updated_at,
        "stale_since": f.stale_since,
        "reason": f.reason or None,
    }


def model_doc(m: ModelMetrics) -> dict[str, Any]:
    return {
        "model": m.model,
        "running": m.running,
        "waiting": m.waiting,
        "kv_usage": _round(m.kv_usage),
        "kv_usage_mean": _round(m.kv_usage_mean),
        "replicas": m.replicas,
        "prefix_hit_rate": _round(m.prefix_hit_rate),
        "prefix_hit_rate_window": m.prefix_hit_rate_window,
        "prompt_tokens_per_s": rates_doc(m.prompt_tps),
        "generation_tokens_per_s": rates_doc(m.generation_tps),
        "requests_per_s": rates_doc(m.request_rate),
        "errors_per_s": rates_doc(m.error_rate),
        "preemptions_total": m.preemptions_total,
        "preemptions_per_s": rates_doc(m.preemption_rate),
        "ttft_s": quantiles_doc(m.ttft),
        "itl_s": quantiles_doc(m.itl),
        "tpot_s": quantiles_doc(m.tpot),
        "e2e_s": quantiles_doc(m.e2e),
        "queue_time_s": quantiles_doc(m.queue_time),
        # null where the engine exports no such series (docs/status-json.md, "Optional features").
        "spec_decode": None if m.spec is None else {
            "acceptance_rate": _round(m.spec.acceptance_rate), "acceptance_length": _round(m.spec.acceptance_length),
            "draft_share": _round(m.spec.draft_share), "window": m.spec.window,
            "per_position": [_round(v) for v in m.spec.per_position]},
        "kv_transfer": None if m.kv_transfer is None else {
            "bytes_per_s": _round(m.kv_transfer.bytes_per_s, 1), "link_gb_s": _round(m.kv_transfer.link_gb_s, 4),
            "latency_s": _round(m.kv_transfer.latency_s), "failures_per_s": rates_doc(m.kv_transfer.failures_per_s)},
        "lora": None if m.lora is None else {
            "running": m.lora.running, "waiting": m.lora.waiting, "slots_used": m.lora.slots_used,
            "slots_total": m.lora.slots_total},
        "prefill_time_s": quantiles_doc(m.prefill_time),
        "decode_time_s": quantiles_doc(m.decode_time),
        "inference_time_s": quantiles_doc(m.inference_time),
        "waiting_by_reason": None if m.waiting_capacity is None and m.waiting_deferred is None else {
            "capacity": m.waiting_capacity, "deferred": m.waiting_deferred},
        "sleep_level": m.sleep_level,
        "kv_host_usage": _round(m.kv_host_usage),
        "admission_rejections_per_s": rates_doc(m.admission_rejections_per_s),
        "pd_queues": None if m.pd_queues is None else {
            "bootstrap": m.pd_queues.bootstrap, "inflight": m.pd_queues.inflight,
            "prealloc": m.pd_queues.prealloc, "transfer": m.pd_queues.transfer,
            "bootstrap_failures_per_s": rates_doc(m.pd_queues.bootstrap_failures_per_s)},
        "prompt_cache_tiers": None if m.cache_tiers is None else {
            "tokens_per_s": {tier: _round(v, 3) for tier, v in m.cache_tiers.tokens_per_s},
            "external_hit_rate": _round(m.cache_tiers.external_hit_rate)},
        # Figures the engine reported outside their physical range, shown above as null. The reported
        # value is a string: it is evidence, not a figure to compute with.
        # ``reason`` says why in words: the range left, or what the raw samples got wrong.
        "invalid": [{"field": f.field, "reported": f"{f.value:.6g}", "allowed": f.allowed, "reason": f.why()}
                    for f in m.invalid],
    }


def energy_doc(v: EnergyView | None) -> dict[str, Any] | None:
    """Energy over the window (docs/status-json.md, ENERGY); None where there is none."""
    if v is None:
        return None
    return {
        "joules": _round(v.joules, 3),
        "window_s": _round(v.window_s, 3),
        "power_w": _round(v.power_w, 3),
        "tokens_per_joule": _round(v.tokens_per_joule),
        "total_tokens_per_joule": _round(v.total_tokens_per_joule),
        "joules_per_1k_output_tokens": _round(v.joules_per_1k_output, 3),
        "idle_w": _round(v.idle_w, 3),
        "busy_w": _round(v.busy_w, 3),
        "total_joules": _round(v.total_joules, 3),
        "source": v.source or None,
        "attribution": v.attribution,
        "estimate": v.estimate,
        "reason": v.reason or None,
        "gpus": list(v.gpus),
        "simulated": v.simulated,
    }


def lifecycle_doc(v: LifecycleView | None) -> dict[str, Any] | None:
    """What engine control said of a managed engine (docs/status-json.md, LIFECYCLE): a replay and a
    remote host show a stop you made as one, not as a refused connection."""
    if v is None:
        return None
    return {
        "phase": v.phase.value,
        "detail": v.detail or None,
        "ended": v.ended or None,
        "exit_code": v.exit_code,
        "oom_killed": v.oom_killed,
        "since": v.since,
        "countdown": v.countdown,
    }


def engine_doc(e: EngineSnapshot) -> dict[str, Any]:
    total = e.total
    return {
        "name": e.name,
        "profile": e.profile,
        "url": e.url,
        "reachable": e.reachable,
        "phase": e.phase.value,
        "detail": e.health_detail or None,
        "stale": e.metrics_freshness.stale,
        "metrics": freshness_doc(e.metrics_freshness),
        "health": freshness_doc(e.health_freshness),
        "version": e.identity.version,
        "served_models": list(e.identity.models),
        "model": e.identity.models[0] if e.identity.models else (e.models[0].model if e.models else None),
        "max_model_len": e.identity.max_model_len,
        "simulated": e.simulated,
        "managed": e.managed,
        "gpus": list(e.gpus),
        "pids": list(e.pids),
        "cpu_percent": _round(e.cpu_percent, 1),
        "rss_bytes": e.rss_bytes,
        "summary": model_doc(total) if total is not None else None,
        "per_model": [model_doc(m) for m in e.models],
        "missing_metrics": list(e.missing),
        "energy": energy_doc(e.energy),
        "host": e.host or None,  # the [hosts.NAME] it runs on; null: this machine
        "source": e.source or None,  # the [sources.NAME] (Prometheus) it is read from; null: none
        "role": e.role or None,  # prefill / decode (from the source's role label); null: unknown
        "lifecycle": lifecycle_doc(e.lifecycle),  # managed engines: engine control's phase and how it ended
    }


def gpu_owners(g: GpuSnapshot, engines: tuple[EngineSnapshot, ...]) -> list[str]:
    """Engines holding this GPU: attributed processes first, then engines assigned to it."""
    owners = dict.fromkeys(g.engines)
    for e in engines:
        if g.index in e.gpus:
            owners.setdefault(e.name)
    return list(owners)


def gpu_doc(g: GpuSnapshot, engines: tuple[EngineSnapshot, ...] = ()) -> dict[str, Any]:
    return {
        "index": g.index,
        "name": g.name,
        "uuid": g.uuid,
        "simulated": g.simulated,
        "util_percent": g.util_percent,
        "mem_util_percent": g.mem_util_percent,
        "mem_used_bytes": g.mem_used_bytes,
        "mem_total_bytes": g.mem_total_bytes,
        "mem_percent": _round(g.mem_percent, 2),
        "temperature_c": g.temperature_c,
        "power_w": g.power_w,
        "power_limit_w": g.power_limit_w,
        "sm_clock_mhz": g.sm_clock_mhz,
        "mem_clock_mhz": g.mem_clock_mhz,
        "ecc_errors": g.ecc_errors,
        "xid_errors": list(g.xid_errors),
        "throttle_reasons": None if g.throttle_reasons is None else list(g.throttle_reasons),
        "engines": gpu_owners(g, engines),
        "energy_mj": g.energy_mj,
        "energy_source": g.energy_source or None,
        "mig": g.mig,
        "energy": energy_doc(g.energy),
        "host": g.host or None,
        "processes": [
            {"pid": p.pid, "used_bytes": p.used_bytes, "name": p.name, "container": p.container, "engine": p.engine}
            for p in g.processes
        ],
    }


def gpus_doc(f: GpuFleet, engines: tuple[EngineSnapshot, ...] = ()) -> dict[str, Any]:
    return {
        "source": f.source,
        "available": not f.unavailable_reason,
        "reason": f.unavailable_reason or None,
        "driver_version": f.driver_version,
        "freshness": freshness_doc(f.freshness),
        "devices": [gpu_doc(g, engines) for g in f.gpus],
    }


def host_doc(h: HostSnapshot | None) -> dict[str, Any] | None:
    if h is None:
        return None
    return {
        "hostname": h.hostname,
        "cpu_percent": h.cpu_percent,
        "cpu_count": h.cpu_count,
        "mem_used_bytes": h.mem_used_bytes,
        "mem_total_bytes": h.mem_total_bytes,
        "load_avg": list(h.load_avg) if h.load_avg else None,
        "freshness": freshness_doc(h.freshness),
    }


def status_doc(snap: FleetSnapshot) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "taken_at": snap.taken_at,
        "engines": [engine_doc(e) for e in snap.engines],
        "gpus": gpus_doc(snap.gpus, snap.engines),
        "host": host_doc(snap.host),
        "alerts": [alert_doc(a) for a in snap.alerts],
        "hosts": [host_view_doc(h, snap.taken_at) for h in snap.hosts],
    }


def host_view_doc(h: HostView, now: float) -> dict[str, Any]:
    """One remote host and its status stream, or a Prometheus or Kubernetes source (docs/status-json.md, "hosts")."""
    age = h.doc_age(now)
    prom, kube = h.kind == "prometheus", h.kind == "kubernetes"
    return {
        "name": h.name,
        "kind": h.kind,
        "ssh": None if prom or kube else h.destination,
        "prometheus": h.destination if prom else None,
        "kubernetes": h.destination if kube else None,
        "state": h.freshness.state.value,
        "reason": h.freshness.reason or None,
        "freshness": freshness_doc(h.freshness),  # state and reason again, with when it went stale
        "last_document_age_s": None if age is None else round(age, 3),
        "engines": h.engines,
        "host": host_doc(h.host),
    }


def alert_doc(a: Alert) -> dict[str, Any]:
    """One alert rule on one engine (docs/status-json.md, "alerts")."""
    return {
        "rule": a.rule,
        "engine": a.engine,
        "severity": a.severity,
        "state": a.state.value,
        "since": a.since,
        "summary": a.summary,
        "value": _round(a.value),
        "condition": a.condition,
        "values": {name: _round(v) for name, v in a.values},
        "note": a.note,
        "runbook": a.runbook,
        "clears_at": a.clears_at,
    }


def status_json(snap: FleetSnapshot, *, indent: int | None = None) -> str:
    """The document as strict JSON: a non-finite number anywhere is null (n/a), never NaN/Infinity.
    Every string is scrubbed of credentials (an engine URL's ``user:password@`` or ``?token=``, one
    quoted in a reason); json escapes controls itself, so the text is otherwise as it was sent."""
    from console.textout import scrubbed_data

    return strictjson.dumps(scrubbed_data(status_doc(snap)), indent=indent)
