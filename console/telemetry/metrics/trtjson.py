"""trtllm-serve ``GET /metrics`` JSON iteration stats -> the Prometheus sample representation.

The endpoint returns a list of per-iteration dicts (``iter``, ``numActiveRequests``, ``kvCacheStats``
...; tests/fixtures/samples/trtllm-docs-metrics-json.txt is the documented example). Only the newest
entry (highest ``iter``, else the last one) is used. Its fields become samples named like trtllm-serve's
own Prometheus collector names them (``numActiveRequests`` -> ``trtllm_num_requests_running`` ...), so
one profile mapping serves both formats. There is no model label.

Lenient: the docs' example has a literal ``...`` line; such lines are dropped and reported, and a
payload that still is not JSON falls back to reading ``"key": number`` pairs (later pairs win;
nested objects are flattened, their key names do not collide). Never raises.

Note the endpoint is a destructive read (the engine drops what it returned): callers must not poll
it by default (``MetricsSpec.destructive``).
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from console.telemetry.metrics.promtext import Family, ParseResult, Sample

__all__ = ["parse_trtllm_json"]

# JSON key (top level or inside kvCacheStats / inflightBatchingStats) -> (sample name, kind, scale).
_FIELDS: dict[str, tuple[str, str, float]] = {
    "numActiveRequests": ("trtllm_num_requests_running", "gauge", 1.0),
    "numQueuedRequests": ("trtllm_num_requests_waiting", "gauge", 1.0),
    "maxNumActiveRequests": ("trtllm_max_num_active_requests", "gauge", 1.0),
    "iterLatencyMS": ("trtllm_iteration_latency_seconds", "gauge", 0.001),
    "gpuMemUsage": ("trtllm_gpu_memory_usage_bytes", "gauge", 1.0),
    "cpuMemUsage": ("trtllm_cpu_memory_usage_bytes", "gauge", 1.0),
    "pinnedMemUsage": ("trtllm_pinned_memory_usage_bytes", "gauge", 1.0),
    "maxBatchSizeStatic": ("trtllm_max_batch_size_static", "gauge", 1.0),
    "maxBatchSizeRuntime": ("trtllm_max_batch_size_runtime", "gauge", 1.0),
    "maxNumTokensRuntime": ("trtllm_max_num_tokens_runtime", "gauge", 1.0),
    "iter": ("trtllm_iteration", "gauge", 1.0),
    # kvCacheStats
    "maxNumBlocks": ("trtllm_kv_cache_max_blocks", "gauge", 1.0),
    "freeNumBlocks": ("trtllm_kv_cache_free_blocks", "gauge", 1.0),
    "usedNumBlocks": ("trtllm_kv_cache_used_blocks", "gauge", 1.0),
    "tokensPerBlock": ("trtllm_kv_cache_tokens_per_block", "gauge", 1.0),
    "cacheHitRate": ("trtllm_kv_cache_hit_rate", "gauge", 1.0),
    "reusedBlocks": ("trtllm_kv_cache_reused_blocks_total", "counter", 1.0),
    "missedBlocks": ("trtllm_kv_cache_missed_blocks_total", "counter", 1.0),
    "allocTotalBlocks": ("trtllm_kv_cache_alloc_total_blocks_total", "counter", 1.0),
    # inflightBatchingStats
    "numContextRequests": ("trtllm_num_context_requests", "gauge", 1.0),
    "numGenRequests": ("trtllm_num_generation_requests", "gauge", 1.0),
    "numPausedRequests": ("trtllm_num_paused_requests", "gauge", 1.0),
    "numScheduledRequests": ("trtllm_num_scheduled_requests", "gauge", 1.0),
    "numCtxTokens": ("trtllm_total_context_tokens", "gauge", 1.0),
    "avgNumDecodedTokensPerIter": ("trtllm_avg_decoded_tokens_per_iter", "gauge", 1.0),
    # specDecodingStats
    "acceptanceLength": ("trtllm_spec_decode_acceptance_length", "gauge", 1.0),
    "draftOverhead": ("trtllm_spec_decode_draft_overhead", "gauge", 1.0),
}
_NESTED = ("kvCacheStats", "inflightBatchingStats", "specDecodingStats")
_PAIR_RE = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)')
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")


def _flatten(entry: dict[str, Any]) -> dict[str, float]:
    flat: dict[str, float] = {}
    for key, value in entry.items():
        if key in _NESTED and isinstance(value, dict):
            for k2, v2 in value.items():
                if isinstance(v2, int | float) and not isinstance(v2, bool):
                    flat[k2] = float(v2)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[key] = float(value)
    return flat


def _newest(entries: list[Any]) -> dict[str, Any] | None:
    dicts = [e for e in entries if isinstance(e, dict)]
    if not dicts:
        return None
    with_iter = [e for e in dicts if isinstance(e.get("iter"), int | float)]
    if with_iter:
        return max(with_iter, key=lambda e: float(e["iter"]))
    return dicts[-1]


def _load(text: str, errors: list[str]) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    kept: list[str] = []
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip() in ("...", "…"):
            errors.append(f"line {n}: elision '...' dropped")
        else:
            kept.append(line)
    repaired = _TRAILING_COMMA_RE.sub(r"\1", "\n".join(kept))
    try:
        return orjson.loads(repaired)
    except orjson.JSONDecodeError as exc:
        errors.append(f'not valid JSON ({exc}); reading "key": number pairs instead')
        return None


def parse_trtllm_json(payload: bytes | str) -> ParseResult:
    """Parse trtllm-serve's JSON iteration stats into samples of the newest iteration. Never raises."""
    result = ParseResult()
    errors = result.errors
    if isinstance(payload, bytes | bytearray | memoryview):
        data = bytes(payload)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(f"payload: invalid UTF-8 at byte {exc.start}; decoded with replacement characters")
            text = data.decode("utf-8", errors="replace")
    else:
        text = payload
    result.line_count = text.count("\n") + 1
    doc = _load(text, errors)
    flat: dict[str, float] | None = None
    if isinstance(doc, list):
        entry = _newest(doc)
        if entry is None:
            if doc:
                errors.append("JSON list holds no iteration-stat objects")
        else:
            flat = _flatten(entry)
    elif isinstance(doc, dict):
        flat = _flatten(doc)
    elif doc is not None:
        errors.append(f"expected a JSON list of iteration stats, got {type(doc).__name__}")
    if flat is None and doc is None:
        flat = {}
        for m in _PAIR_RE.finditer(text):
            try:
                flat[m.group(1)] = float(m.group(2))
            except ValueError:
                continue
    _emit(flat or {}, result)
    result.error_count = len(errors)
    return result


def _emit(flat: dict[str, float], result: ParseResult) -> None:
    def add(name: str, kind: str, value: float) -> None:
        if math.isnan(value):
            return
        result.families[name] = Family(name, kind, "from trtllm-serve /metrics JSON", [Sample(name, (), value)])
        result.sample_count += 1

    for key, value in flat.items():
        spec = _FIELDS.get(key)
        if spec is not None:
            add(spec[0], spec[1], value * spec[2])
    used, total = flat.get("usedNumBlocks"), flat.get("maxNumBlocks")
    if used is not None and total:
        add("trtllm_kv_cache_utilization", "gauge", used / total)
