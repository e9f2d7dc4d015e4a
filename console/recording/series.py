"""A status document as flat numeric series: (family, labels, value), for OpenMetrics and CSV.

One family per number the console shows; ``null`` (n/a) gives no sample at all, never a 0. Engine
series carry ``engine``, ``profile`` and ``model`` (each served model; an engine serving several
also gets its combined ``summary`` as ``model="*"``), GPU series ``gpu``, ``name`` and ``uuid``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float]

# family -> help; rate families read a RATES object's "now" (what the screens show as current).
_MODEL: tuple[tuple[str, str, str], ...] = (
    ("running", "running", "requests running"),
    ("waiting", "waiting", "requests waiting"),
    ("kv_usage", "kv_cache_usage_ratio", "KV-cache usage, max over replicas (0-1)"),
    ("kv_usage_mean", "kv_cache_usage_mean_ratio", "KV-cache usage, mean over replicas (0-1)"),
    ("prefix_hit_rate", "prefix_cache_hit_ratio", "prefix-cache hit rate (0-1)"),
    ("preemptions_total", "preemptions", "preemptions since the engine started"),
)
_RATES = (
    ("prompt_tokens_per_s", "prompt_tokens_per_second", "prompt tokens per second"),
    ("generation_tokens_per_s", "generation_tokens_per_second", "generated tokens per second"),
    ("requests_per_s", "requests_per_second", "finished requests per second"),
    ("errors_per_s", "errors_per_second", "failed requests per second"),
    ("preemptions_per_s", "preemptions_per_second", "preemptions per second"),
)
_QUANTILES = (("ttft_s", "ttft_seconds", "time to first token"), ("itl_s", "itl_seconds", "inter-token latency"),
              ("tpot_s", "tpot_seconds", "time per output token"), ("e2e_s", "e2e_seconds", "request latency"),
              ("queue_time_s", "queue_time_seconds", "time queued"))  # fmt: skip
_GPU = (("util_percent", "gpu_utilization_percent", "SM utilisation"),
        ("mem_util_percent", "gpu_memory_utilization_percent", "memory controller utilisation"),
        ("mem_used_bytes", "gpu_memory_used_bytes", "memory used"),
        ("mem_total_bytes", "gpu_memory_total_bytes", "memory total"),
        ("temperature_c", "gpu_temperature_celsius", "temperature"), ("power_w", "gpu_power_watts", "power draw"),
        ("power_limit_w", "gpu_power_limit_watts", "power limit"), ("sm_clock_mhz", "gpu_sm_clock_mhz", "SM clock"),
        ("mem_clock_mhz", "gpu_memory_clock_mhz", "memory clock"), ("ecc_errors", "gpu_ecc_errors", "ECC errors"))
_HOST = (("cpu_percent", "host_cpu_percent", "host CPU use"), ("mem_used_bytes", "host_memory_used_bytes",
         "host memory used"), ("mem_total_bytes", "host_memory_total_bytes", "host memory total"))  # fmt: skip

PREFIX = "enginedeck_"


def _help() -> dict[str, str]:
    out = {"engine_up": "1 when the engine answered its health endpoint",
           "engine_stale": "1 when its metrics are not current",
           "engine_cpu_percent": "engine processes' CPU use", "engine_rss_bytes": "engine processes' resident memory",
           "host_load1": "load average, 1 min", "host_load5": "load average, 5 min",
           "host_load15": "load average, 15 min"}
    for _k, name, text in _MODEL + _RATES:
        out[name] = text
    for _k, name, text in _QUANTILES:
        for q in ("p50", "p90", "p99"):
            out[f"{name}_{q}"] = f"{text}, windowed {q}"
    for _k, name, text in _GPU + _HOST:
        out[name] = text
    return {PREFIX + k: v for k, v in out.items()}


HELP = _help()


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    return float(v) if isinstance(v, int | float) else None


def _model_samples(m: Mapping[str, Any], labels: Labels) -> Iterator[Sample]:
    for key, name, _h in _MODEL:
        v = _num(m.get(key))
        if v is not None:
            yield PREFIX + name, labels, v
    for key, name, _h in _RATES:
        v = _num((m.get(key) or {}).get("now"))
        if v is not None:
            yield PREFIX + name, labels, v
    for key, name, _h in _QUANTILES:
        q = m.get(key) or {}
        for p in ("p50", "p90", "p99"):
            v = _num(q.get(p))
            if v is not None:
                yield f"{PREFIX}{name}_{p}", labels, v


def doc_series(doc: Mapping[str, Any]) -> Iterator[Sample]:
    """Every numeric sample of one status document."""
    for e in doc.get("engines") or ():
        base: Labels = (("engine", str(e["name"])), ("profile", str(e["profile"])))
        yield PREFIX + "engine_up", base, 1.0 if e.get("reachable") else 0.0
        yield PREFIX + "engine_stale", base, 1.0 if e.get("stale") else 0.0
        for key, name in (("cpu_percent", "engine_cpu_percent"), ("rss_bytes", "engine_rss_bytes")):
            v = _num(e.get(key))
            if v is not None:
                yield PREFIX + name, base, v
        per_model = e.get("per_model") or []
        for m in per_model:
            yield from _model_samples(m, (*base, ("model", str(m["model"]))))
        if len(per_model) != 1 and e.get("summary") is not None:
            yield from _model_samples(e["summary"], (*base, ("model", "*")))
    for g in (doc.get("gpus") or {}).get("devices") or ():
        labels: Labels = (("gpu", str(g["index"])), ("name", str(g["name"])), ("uuid", str(g["uuid"])))
        for key, name, _h in _GPU:
            v = _num(g.get(key))
            if v is not None:
                yield PREFIX + name, labels, v
    host = doc.get("host")
    if host:
        labels = (("host", str(host.get("hostname") or "")),)
        for key, name, _h in _HOST:
            v = _num(host.get(key))
            if v is not None:
                yield PREFIX + name, labels, v
        for n, v in zip(("host_load1", "host_load5", "host_load15"), host.get("load_avg") or (), strict=False):
            f = _num(v)
            if f is not None:
                yield PREFIX + n, labels, f
