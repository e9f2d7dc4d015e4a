"""A complete vLLM-shaped payload whose every value is chosen by the caller: every gauge, counter and
histogram (buckets, sum, count) the vLLM profile sums, rates or charts, plus spec decode, NIXL KV
transfer and LoRA. Used with finite extremes (1e308, -1e308, 1e-308, 2**63) by the invalid-data
tests, and served by prometheus_client in the console test.
"""

from __future__ import annotations

import math
from collections.abc import Callable

FINITE_EXTREMES = (1e308, -1e308, 1e-308, float(2**63), -float(2**63), 5e-324, 1.7976931348623157e308)

MODEL = 'model_name="m",engine="0"'
GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")
COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:prefix_cache_hits_total",
            "vllm:prefix_cache_queries_total", "vllm:prompt_tokens_cached_total", "vllm:num_preemptions_total",
            "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total", "vllm:nixl_num_failed_transfers_total",
            "vllm:external_prefix_cache_hits_total", "vllm:external_prefix_cache_queries_total",
            "vllm:admission_rejections_total")
HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
              "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
              "vllm:request_queue_time_seconds", "vllm:nixl_xfer_time_seconds", "vllm:nixl_bytes_transferred",
              "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
              "vllm:request_inference_time_seconds")
# Labelled series of the newest builds (vLLM 0.34): one sample per label value.
LABELLED = (("vllm:num_requests_waiting_by_reason", "gauge", "reason", ("capacity", "deferred")),
            ("vllm:engine_sleep_state", "gauge", "sleep_state", ("awake", "weights_offloaded", "discard_all")),
            ("vllm:prompt_tokens_cached_by_source_total", "counter", "source", ("device", "host", "disk")))
BUCKETS = ("0.01", "0.1", "1.0", "10.0", "+Inf")


def _num(v: float) -> str:
    return repr(float(v))


def _label_int(v: float) -> int:
    return int(abs(v)) % 10**6 if math.isfinite(v) else 0


def vllm_payload(value: Callable[[str], float]) -> str:
    """The payload with ``value(series)`` for every sample (``series`` names it, for messages)."""
    out: list[str] = []
    for name in GAUGES:
        out += [f"# TYPE {name} gauge", f"{name}{{{MODEL}}} {_num(value(name))}"]
    for name in COUNTERS:
        out.append(f"# TYPE {name} counter")
        out.append(f"{name}{{{MODEL}}} {_num(value(name))}")
    out.append("# TYPE vllm:request_success_total counter")
    for reason in ("stop", "length", "abort"):
        out.append(f'vllm:request_success_total{{{MODEL},finished_reason="{reason}"}} '
                   f"{_num(value('request_success_' + reason))}")
    for name, kind, label, values in LABELLED:
        out.append(f"# TYPE {name} {kind}")
        for v in values:
            out.append(f'{name}{{{MODEL},{label}="{v}"}} {_num(value(f"{name}_{v}"))}')
    out.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter")
    for pos in range(3):
        out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{MODEL},position="{pos}"}} '
                   f"{_num(value(f'spec_pos_{pos}'))}")
    for name in HISTOGRAMS:
        out.append(f"# TYPE {name} histogram")
        for le in BUCKETS:
            out.append(f'{name}_bucket{{{MODEL},le="{le}"}} {_num(value(f"{name}_bucket_{le}"))}')
        out.append(f"{name}_sum{{{MODEL}}} {_num(value(name + '_sum'))}")
        out.append(f"{name}_count{{{MODEL}}} {_num(value(name + '_count'))}")
    out.append("# TYPE vllm:lora_requests_info gauge")
    out.append(f'vllm:lora_requests_info{{max_lora="{_label_int(value("max_lora"))}",running_lora_adapters="a,b",'
               f'waiting_lora_adapters=""}} {_num(value("lora_info"))}')
    return "\n".join(out) + "\n"
