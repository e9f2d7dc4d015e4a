"""Engine metrics as each released version declares them, served as that engine serves them.

    python tests/versions/declared.py TARGET        (TARGET: one of ``TARGETS``, e.g. sglang-0.5.23)

prints ``PORT <n>`` once it listens on 127.0.0.1 and serves ``/metrics`` (and ``/health``,
``/v1/models``) until killed. Each target lists the metric families the engine's own source
declares (name, type, label names, buckets and multiprocess mode as there) for the figures
enginedeck reads or the engine adds next to them; the source file and version is named on each
target. Values are fixed so that a test can compare: gauges are constants, counters grow at a
constant rate per second computed from elapsed time, histograms get one observation of a fixed value
per tick.

How each engine serves them:

- vLLM: a single-process prometheus_client registry (``_created`` series), plain text.
- SGLang and trtllm-serve: a multiprocess registry (``PROMETHEUS_MULTIPROC_DIR``, gauges in the
  declared mode), ``make_asgi_app`` gzip-compressing when the client accepts it.
- TGI (Rust, metrics-exporter-prometheus) and llama.cpp (hand-written text) do not use
  prometheus_client: their text is written as they write it (llama.cpp: every value with 6
  significant digits, ``1.23457e+06``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MODEL = "declared/model-7b"
TICK = 0.1
Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Family:
    kind: str  # gauge | counter | histogram
    name: str  # as declared (prometheus_client adds _total to a counter that lacks it)
    labels: tuple[str, ...] = ()  # label names beyond the target's common ones
    # gauge: value per label set; counter: rate per second per label set; histogram: the value
    # observed once per tick per label set.
    series: dict[Labels, float] = field(default_factory=lambda: {(): 0.0})
    buckets: tuple[float, ...] = ()
    mode: str = "mostrecent"  # multiprocess mode of a gauge
    start: float = 0.0  # counters: the value at start (llama.cpp's precision past 999999)


def g(name: str, value: float | dict[Labels, float], labels: tuple[str, ...] = (), mode: str = "mostrecent") -> Family:
    return Family("gauge", name, labels, value if isinstance(value, dict) else {(): value}, mode=mode)


def c(name: str, rate: float | dict[Labels, float], labels: tuple[str, ...] = (), start: float = 0.0) -> Family:
    return Family("counter", name, labels, rate if isinstance(rate, dict) else {(): rate}, start=start)


def h(name: str, value: float | dict[Labels, float], buckets: tuple[float, ...],
      labels: tuple[str, ...] = ()) -> Family:
    return Family("histogram", name, labels, value if isinstance(value, dict) else {(): value}, buckets)


@dataclass(frozen=True)
class Target:
    engine: str  # the enginedeck profile
    version: str
    source: str  # where the declarations were read
    serving: str  # "vllm" | "multiprocess" | "tgi" | "llamacpp"
    common: dict[str, str]  # label name -> value on every series
    families: tuple[Family, ...]


# Default buckets of prometheus_client, where the source's own do not matter to the checks (every
# check of a histogram is its mean, which does not depend on the buckets).
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
# vLLM's TTFT buckets (vllm/v1/metrics/loggers.py).
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def _one(label: str, value: str) -> Labels:
    return ((label, value),)


TARGETS: dict[str, Target] = {
    # vllm/engine/metrics.py of vllm-0.6.0.tar.gz (V0 engine, the only one then).
    "vllm-0.6.0": Target("vllm", "0.6.0", "vllm-0.6.0 vllm/engine/metrics.py (Metrics)", "vllm",
                         {"model_name": MODEL}, (
        g("vllm:num_requests_running", 3), g("vllm:num_requests_waiting", 1),
        g("vllm:num_requests_swapped", 0), g("vllm:gpu_cache_usage_perc", 0.25),
        g("vllm:gpu_prefix_cache_hit_rate", 0.0),
        c("vllm:num_preemptions_total", 0.5),
        c("vllm:prompt_tokens_total", 300.0), c("vllm:generation_tokens_total", 120.0),
        c("vllm:request_success_total", {_one("finished_reason", "stop"): 2.0, _one("finished_reason", "length"): 1.0},
          ("finished_reason",)),
        h("vllm:time_to_first_token_seconds", 0.07, VLLM_TTFT),
        h("vllm:time_per_output_token_seconds", 0.02, DEFAULT_BUCKETS),
        h("vllm:e2e_request_latency_seconds", 1.5, DEFAULT_BUCKETS),
    )),
    # vllm/v1/metrics/loggers.py of vllm-0.8.0.tar.gz (V1 on by default; labels model_name only).
    "vllm-0.8.0": Target("vllm", "0.8.0", "vllm-0.8.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger)", "vllm",
                         {"model_name": MODEL}, (
        g("vllm:num_requests_running", 3), g("vllm:num_requests_waiting", 1), g("vllm:gpu_cache_usage_perc", 0.25),
        c("vllm:gpu_prefix_cache_queries", 400.0), c("vllm:gpu_prefix_cache_hits", 100.0),
        c("vllm:num_preemptions_total", 0.5),
        c("vllm:prompt_tokens_total", 300.0), c("vllm:generation_tokens_total", 120.0),
        c("vllm:request_success_total", {_one("finished_reason", "stop"): 2.0, _one("finished_reason", "abort"): 0.5},
          ("finished_reason",)),
        h("vllm:time_to_first_token_seconds", 0.07, VLLM_TTFT),
        h("vllm:time_per_output_token_seconds", 0.02, DEFAULT_BUCKETS),
        h("vllm:e2e_request_latency_seconds", 1.5, DEFAULT_BUCKETS),
        h("vllm:request_queue_time_seconds", 0.05, DEFAULT_BUCKETS),
        h("vllm:request_inference_time_seconds", 1.4, DEFAULT_BUCKETS),
        h("vllm:request_prefill_time_seconds", 0.3, DEFAULT_BUCKETS),
        h("vllm:request_decode_time_seconds", 1.1, DEFAULT_BUCKETS),
    )),
    # vllm/v1/metrics/loggers.py of vllm-0.10.0.tar.gz: labels model_name + engine; counters declared
    # without _total; kv_cache_usage_perc beside the old gpu_ name.
    "vllm-0.10.0": Target("vllm", "0.10.0", "vllm-0.10.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger)", "vllm",
                          {"model_name": MODEL, "engine": "0"}, (
        g("vllm:num_requests_running", 3), g("vllm:num_requests_waiting", 1),
        g("vllm:gpu_cache_usage_perc", 0.25), g("vllm:kv_cache_usage_perc", 0.25),
        c("vllm:gpu_prefix_cache_queries", 400.0), c("vllm:gpu_prefix_cache_hits", 100.0),
        c("vllm:prefix_cache_queries", 400.0), c("vllm:prefix_cache_hits", 100.0),
        c("vllm:num_preemptions", 0.5), c("vllm:prompt_tokens", 300.0), c("vllm:generation_tokens", 120.0),
        c("vllm:request_success", {_one("finished_reason", "stop"): 2.0, _one("finished_reason", "abort"): 0.5},
          ("finished_reason",)),
        h("vllm:time_to_first_token_seconds", 0.07, VLLM_TTFT),
        h("vllm:time_per_output_token_seconds", 0.02, DEFAULT_BUCKETS),
        h("vllm:e2e_request_latency_seconds", 1.5, DEFAULT_BUCKETS),
        h("vllm:request_queue_time_seconds", 0.05, DEFAULT_BUCKETS),
        h("vllm:request_inference_time_seconds", 1.4, DEFAULT_BUCKETS),
        h("vllm:request_prefill_time_seconds", 0.3, DEFAULT_BUCKETS),
        h("vllm:request_decode_time_seconds", 1.1, DEFAULT_BUCKETS),
    )),
    # vllm-0.34.0 wheel: vllm/v1/metrics/loggers.py (PrometheusStatLogger) and
    # distributed/kv_transfer/kv_connector/v1/mooncake/stats.py (MooncakePromMetrics, buckets as there).
    "vllm-0.34.0": Target("vllm", "0.34.0", "vllm-0.34.0 vllm/v1/metrics/loggers.py, kv_connector/v1/mooncake/stats.py",
                          "vllm", {"model_name": MODEL, "engine": "0"}, (
        g("vllm:num_requests_running", 3), g("vllm:num_requests_waiting", 3),
        g("vllm:num_requests_waiting_by_reason", {_one("reason", "capacity"): 2, _one("reason", "deferred"): 1},
          ("reason",)),
        g("vllm:engine_sleep_state", {_one("sleep_state", "awake"): 0, _one("sleep_state", "weights_offloaded"): 0,
                                      _one("sleep_state", "discard_all"): 1}, ("sleep_state",)),
        g("vllm:kv_cache_usage_perc", 0.25),
        c("vllm:prefix_cache_queries", 400.0), c("vllm:prefix_cache_hits", 100.0),
        c("vllm:external_prefix_cache_queries", 200.0), c("vllm:external_prefix_cache_hits", 50.0),
        c("vllm:num_preemptions", 0.5), c("vllm:prompt_tokens", 300.0),
        c("vllm:prompt_tokens_cached", 150.0),
        c("vllm:prompt_tokens_cached_by_source", {_one("source", "device"): 90.0, _one("source", "host"): 40.0,
                                                  _one("source", "disk"): 0.0, _one("source", "p2p"): 20.0,
                                                  _one("source", "external_unspecified"): 0.0}, ("source",)),
        c("vllm:generation_tokens", 120.0),
        c("vllm:request_success", {_one("finished_reason", "stop"): 2.0, _one("finished_reason", "abort"): 0.5},
          ("finished_reason",)),
        c("vllm:admission_rejections", {_one("reason", "max_num_queued_reqs"): 0.5,
                                        _one("reason", "max_num_queued_tokens"): 0.25}, ("reason",)),
        h("vllm:time_to_first_token_seconds", 0.07, VLLM_TTFT),
        h("vllm:inter_token_latency_seconds", 0.02, DEFAULT_BUCKETS),
        h("vllm:request_time_per_output_token_seconds", 0.025, DEFAULT_BUCKETS),
        h("vllm:e2e_request_latency_seconds", 1.5, DEFAULT_BUCKETS),
        h("vllm:request_queue_time_seconds", 0.05, DEFAULT_BUCKETS),
        h("vllm:request_inference_time_seconds", 1.4, DEFAULT_BUCKETS),
        h("vllm:request_prefill_time_seconds", 0.3, DEFAULT_BUCKETS),
        h("vllm:request_decode_time_seconds", 1.1, DEFAULT_BUCKETS),
        h("vllm:mooncake_xfer_time_seconds", 0.02,
          (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0)),
        h("vllm:mooncake_bytes_transferred", float(2**24), tuple(float(2 ** (10 + i)) for i in range(1, 25, 2))),
        c("vllm:mooncake_num_failed_transfers", 0.1),
    )),
    # sglang-0.4.4 wheel: sglang/srt/metrics/collector.py (labels model_name; multiprocess).
    "sglang-0.4.4": Target("sglang", "0.4.4", "sglang-0.4.4 sglang/srt/metrics/collector.py", "multiprocess",
                           {"model_name": MODEL}, (
        g("sglang:num_running_reqs", 5), g("sglang:num_used_tokens", 1200), g("sglang:token_usage", 0.375),
        g("sglang:gen_throughput", 120.0), g("sglang:num_queue_reqs", 2), g("sglang:cache_hit_rate", 0.4),
        g("sglang:spec_accept_length", 0.0),  # logged on every stats log, 0 without speculative decoding
        c("sglang:prompt_tokens_total", 300.0), c("sglang:generation_tokens_total", 120.0),
        c("sglang:cached_tokens_total", 120.0), c("sglang:num_requests_total", 2.0),
        h("sglang:time_to_first_token_seconds", 0.07, (0.1, 0.3, 0.5, 0.7, 0.9, 1, 2, 4, 6, 8, 10, 20, 40, 60)),
        h("sglang:time_per_output_token_seconds", 0.03, (0.002, 0.005, 0.010, 0.020, 0.030, 2.000)),
        h("sglang:inter_token_latency_seconds", 0.02, (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025,
                                                        0.030, 0.035, 0.040, 0.050, 0.075, 0.100)),
        h("sglang:e2e_request_latency_seconds", 1.5, (0.1, 0.2, 0.4, 0.8, 1, 2, 5, 10, 20, 40, 60)),
    )),
    # sglang-0.5.23 wheel: sglang/srt/observability/metrics_collector.py, a prefill instance of a P/D
    # pair with --enable-priority-scheduling and speculative decoding off. Scheduler series carry
    # model_name, engine_type, tp/pp/moe_ep ranks and priority=""; the queue gauges add one series per
    # priority; tokenizer series carry model_name, engine_type and the request's priority.
    "sglang-0.5.23": Target("sglang", "0.5.23", "sglang-0.5.23 sglang/srt/observability/metrics_collector.py",
                            "multiprocess", {"model_name": MODEL, "engine_type": "prefill"}, (
        g("sglang:num_running_reqs", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 5,
                                      (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "0"), ("tp_rank", "0")): 3,
                                      (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "1"), ("tp_rank", "0")): 2},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:num_queue_reqs", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 4,
                                    (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "0"), ("tp_rank", "0")): 1,
                                    (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "1"), ("tp_rank", "0")): 3},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:token_usage", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 0.375},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:cache_hit_rate", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 0.4},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:spec_accept_length", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                         ("tp_rank", "0")): 0.0}, ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:spec_accept_rate", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                       ("tp_rank", "0")): 0.0}, ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:num_prefill_bootstrap_queue_reqs",
          {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 2,
           (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "0"), ("tp_rank", "0")): 1,
           (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "1"), ("tp_rank", "0")): 1},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        g("sglang:num_prefill_inflight_queue_reqs",
          {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""), ("tp_rank", "0")): 1,
           (("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", "1"), ("tp_rank", "0")): 1},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        h("sglang:kv_transfer_speed_gb_s", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                             ("tp_rank", "0")): 64 / 1024 / 0.04},
          (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400), ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        h("sglang:kv_transfer_latency_ms", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                             ("tp_rank", "0")): 40.0},
          (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000), ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        h("sglang:kv_transfer_total_mb", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                           ("tp_rank", "0")): 64.0},
          (1, 5, 10, 50, 100, 500, 1000, 5000, 10000), ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        c("sglang:num_bootstrap_failed_reqs_total", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                                      ("tp_rank", "0")): 0.2},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        c("sglang:num_transfer_failed_reqs_total", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                                     ("tp_rank", "0")): 0.1},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        c("sglang:num_retracted_requests_total", {(("moe_ep_rank", "0"), ("pp_rank", "0"), ("priority", ""),
                                                   ("tp_rank", "0")): 0.5},
          ("tp_rank", "pp_rank", "moe_ep_rank", "priority")),
        c("sglang:prompt_tokens_total", {(("is_streaming", "true"), ("priority", "0")): 200.0,
                                         (("is_streaming", "true"), ("priority", "1")): 100.0},
          ("priority", "is_streaming")),
        c("sglang:generation_tokens_total", {(("is_streaming", "true"), ("priority", "0")): 80.0,
                                             (("is_streaming", "true"), ("priority", "1")): 40.0},
          ("priority", "is_streaming")),
        c("sglang:cached_tokens_total", {_one("priority", "0"): 80.0, _one("priority", "1"): 40.0}, ("priority",)),
        c("sglang:num_requests_total", {_one("priority", "0"): 1.5, _one("priority", "1"): 0.5}, ("priority",)),
        c("sglang:num_aborted_requests_total", {_one("priority", "1"): 0.25}, ("priority",)),
        h("sglang:time_to_first_token_seconds", {(("is_streaming", "true"), ("priority", "0")): 0.07},
          (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10), ("priority", "is_streaming")),
        h("sglang:inter_token_latency_seconds", {_one("priority", "0"): 0.02},
          (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060), ("priority",)),
        h("sglang:request_time_per_output_token_seconds", {(("is_streaming", "true"), ("priority", "0")): 0.025},
          (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060),
          ("priority", "is_streaming")),
        h("sglang:e2e_request_latency_seconds", {(("is_streaming", "true"), ("priority", "0")): 1.5},
          (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10), ("priority", "is_streaming")),
    )),
    # tensorrt_llm/metrics/collector.py (MetricsCollector.__init__) of the main branch at commit
    # 050f80def8df: trtllm-serve's multiprocess registry under /prometheus/metrics.
    "trtllm-main-050f80d": Target("trtllm", "main@050f80d", "TensorRT-LLM tensorrt_llm/metrics/collector.py @050f80d",
                                  "multiprocess", {"model_name": MODEL, "engine_type": "trtllm"}, (
        g("trtllm_num_requests_running", 6, mode="all"), g("trtllm_num_requests_waiting", 3, mode="all"),
        g("trtllm_kv_cache_utilization", 0.625, mode="all"), g("trtllm_kv_cache_host_utilization", 0.125, mode="all"),
        g("trtllm_kv_cache_hit_rate", 0.5, mode="all"),
        c("trtllm_prompt_tokens_total", 300.0), c("trtllm_generation_tokens_total", 120.0),
        c("trtllm_prompt_cached_tokens_total", 60.0),
        c("trtllm_prompt_cache_hit_tokens_total",
          {(("cache_level", "0"), ("cache_tier", "gpu")): 40.0, (("cache_level", "1"), ("cache_tier", "host")): 20.0},
          ("cache_level", "cache_tier")),
        c("trtllm_request_success_total", {_one("finished_reason", "stop"): 2.0}, ("finished_reason",)),
        c("trtllm_spec_decode_num_draft_tokens_total", 30.0), c("trtllm_spec_decode_num_accepted_tokens_total", 18.0),
        c("trtllm_spec_decode_drafted_tokens_total", {_one("token_position", "0"): 10.0,
                                                       _one("token_position", "1"): 10.0,
                                                       _one("token_position", "2"): 10.0}, ("token_position",)),
        c("trtllm_spec_decode_accepted_tokens_total", {_one("token_position", "0"): 8.0,
                                                        _one("token_position", "1"): 6.0,
                                                        _one("token_position", "2"): 4.0}, ("token_position",)),
        g("trtllm_spec_decode_acceptance_length", 2.8, mode="all"),
        h("trtllm_time_to_first_token_seconds", 0.07, (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5)),
        h("trtllm_time_per_output_token_seconds", 0.025, (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5)),
        h("trtllm_e2e_request_latency_seconds", 1.5, (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)),
        h("trtllm_request_queue_time_seconds", 0.05, (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)),
        h("trtllm_request_prefill_time_seconds", 0.3, (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)),
        h("trtllm_request_decode_time_seconds", 1.1, (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)),
        h("trtllm_request_inference_time_seconds", 1.4, (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0)),
    )),
    # text-generation-inference v3.3.7 router/src/server.rs, validation.rs, infer/ (metrics:: macros;
    # no labels except tgi_request_failure{err}); metrics-exporter-prometheus writes the text.
    "tgi-3.3.7": Target("tgi", "3.3.7", "text-generation-inference v3.3.7 router/src (metrics:: macros)", "tgi", {}, (
        g("tgi_batch_current_size", 4), g("tgi_queue_size", 2),
        g("tgi_batch_current_max_tokens", 3000), g("tgi_batch_max_total_tokens", 16000),
        c("tgi_request_count", 2.5), c("tgi_request_success", 2.0),
        c("tgi_request_failure", {_one("err", "validation"): 0.5}, ("err",)),
        h("tgi_request_input_length", 150.0, (10.0, 100.0, 1000.0)),  # 2 requests/tick: 300 tokens/s
        h("tgi_request_generated_tokens", 60.0, (10.0, 100.0, 1000.0)),
        h("tgi_request_mean_time_per_token_duration", 0.03, DEFAULT_BUCKETS),
        h("tgi_request_duration", 1.5, DEFAULT_BUCKETS),
        h("tgi_request_queue_duration", 0.05, DEFAULT_BUCKETS),
    )),
    # llama.cpp llama-server with --metrics and a draft model. The upstream to_metrics() source could
    # not be read here; names and the position label follow the reading of
    # tools/server/server-task.cpp and a real server's /metrics text quoted by a third-party parser's
    # tests (llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 14039 ...).
    "llamacpp-recent": Target("llamacpp", "recent (with per-position counters)",
                              "llama.cpp tools/server (to_metrics; see the note above)", "llamacpp",
                             {}, (
        c("llamacpp:prompt_tokens_total", 300.0, start=5_000_000.0),
        c("llamacpp:tokens_predicted_total", 120.0, start=2_000_000.0),
        c("llamacpp:prompt_tokens_cached_total", 100.0, start=3_000_000.0),
        c("llamacpp:spec_decode_num_drafts_total", 10.0), c("llamacpp:spec_decode_num_draft_tokens_total", 40.0),
        c("llamacpp:spec_decode_num_accepted_tokens_total", 20.0),
        c("llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
          {_one("position", "0"): 8.0, _one("position", "1"): 6.0, _one("position", "2"): 4.0,
           _one("position", "3"): 2.0}, ("position",)),
        g("llamacpp:requests_processing", 2), g("llamacpp:requests_deferred", 1),
    )),
}

# Histograms of token counts are observed this many times per tick (TGI: two requests per tick).
PER_TICK = {"tgi_request_input_length": 2, "tgi_request_generated_tokens": 2}


def _merged(common: dict[str, str], extra: Labels) -> dict[str, str]:
    return {**common, **dict(extra)}


def _labelnames(target: Target, fam: Family) -> list[str]:
    return [*target.common, *fam.labels]


class _Text:
    """Hand-written exposition (TGI, llama.cpp): current values kept here, rendered per request."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.counters: dict[tuple[str, Labels], float] = {}
        self.hists: dict[tuple[str, Labels], list[float]] = {}  # per-bucket counts + [sum, count]

    def render(self) -> bytes:
        llama = self.target.serving == "llamacpp"
        out: list[str] = []

        def num(v: float) -> str:
            return f"{v:g}" if llama else repr(float(v))

        def lab(labels: Labels, extra: str = "") -> str:
            parts = [f'{k}="{v}"' for k, v in (*self.target.common.items(), *labels)]
            if extra:
                parts.append(extra)
            return "{" + ",".join(parts) + "}" if parts else ""

        for fam in self.target.families:
            out.append(f"# HELP {fam.name} {fam.name}\n# TYPE {fam.name} {fam.kind}\n")
            for labels, value in fam.series.items():
                if fam.kind == "gauge":
                    out.append(f"{fam.name}{lab(labels)} {num(value)}\n")
                elif fam.kind == "counter":
                    out.append(f"{fam.name}{lab(labels)} {num(self.counters.get((fam.name, labels), fam.start))}\n")
                else:
                    vec = self.hists.get((fam.name, labels), [0.0] * (len(fam.buckets) + 2))
                    for i, b in enumerate(fam.buckets):
                        out.append(f"{fam.name}_bucket{lab(labels, _le(str(b)))} {num(vec[i])}\n")
                    out.append(f"{fam.name}_bucket{lab(labels, _le('+Inf'))} {num(vec[-1])}\n")
                    out.append(f"{fam.name}_sum{lab(labels)} {num(vec[-2])}\n")
                    out.append(f"{fam.name}_count{lab(labels)} {num(vec[-1])}\n")
        return "".join(out).encode()


def _le(bound: str) -> str:
    return 'le="' + bound + '"'


def _build(target: Target, gzip_on: bool) -> tuple[Any, Callable[[], None]]:
    from fastapi import FastAPI, Response
    from fastapi.responses import JSONResponse

    app = FastAPI()
    t0 = time.monotonic()
    done: dict[tuple[str, Labels], float] = {}
    text: _Text | None = None
    children: dict[tuple[str, Labels], Any] = {}

    if target.serving in ("tgi", "llamacpp"):
        text = _Text(target)

        @app.get("/metrics")
        async def metrics_text() -> Response:
            assert text is not None
            return Response(text.render(), media_type="text/plain; version=0.0.4")
    else:
        import re

        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_asgi_app, multiprocess
        from starlette.routing import Mount

        registry = CollectorRegistry()
        multi = target.serving == "multiprocess"
        if multi:
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        kw: dict[str, Any] = {} if multi else {"registry": registry}
        for fam in target.families:
            names = _labelnames(target, fam)
            metric: Any
            if fam.kind == "gauge":
                mode: Any = fam.mode  # one of prometheus_client's multiprocess modes
                metric = Gauge(fam.name, fam.name, names, multiprocess_mode=mode, **kw) if multi else \
                    Gauge(fam.name, fam.name, names, **kw)
            elif fam.kind == "counter":
                metric = Counter(fam.name, fam.name, names, **kw)
            else:
                metric = Histogram(fam.name, fam.name, names, buckets=fam.buckets, **kw)
            for labels, value in fam.series.items():
                child = metric.labels(**_merged(target.common, labels)) if names else metric
                children[(fam.name, labels)] = child
                if fam.kind == "gauge":
                    child.set(value)
                elif fam.kind == "counter" and fam.start:
                    child.inc(fam.start)
        path = "/prometheus/metrics" if target.engine == "trtllm" else "/metrics"
        route = Mount(path, make_asgi_app(registry=registry, disable_compression=not gzip_on))
        route.path_regex = re.compile(f"^{path}(?P<path>.*)$")
        app.routes.append(route)

    def tick() -> None:
        elapsed = time.monotonic() - t0
        for fam in target.families:
            for labels, value in fam.series.items():
                key = (fam.name, labels)
                if fam.kind == "counter":
                    delta = value * elapsed - done.get(key, 0.0)
                    if delta <= 0:
                        continue
                    done[key] = done.get(key, 0.0) + delta
                    if text is not None:
                        text.counters[key] = fam.start + done[key]
                    else:
                        children[key].inc(delta)
                elif fam.kind == "histogram":
                    for _ in range(PER_TICK.get(fam.name, 1)):
                        if text is not None:
                            vec = text.hists.setdefault(key, [0.0] * (len(fam.buckets) + 2))
                            for i, b in enumerate(fam.buckets):
                                if value <= b:
                                    vec[i] += 1
                            vec[-2] += value
                            vec[-1] += 1
                        else:
                            children[key].observe(value)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model", "max_model_len": 4096}]})

    return app, tick


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("target", choices=sorted(TARGETS))
    p.add_argument("--no-gzip", action="store_true")
    args = p.parse_args()
    target = TARGETS[args.target]
    if target.serving == "multiprocess":
        # Before prometheus_client is imported: it picks its value class then.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="declared-prom-")
        atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    import uvicorn

    # vLLM's instrumentator route is never compressed; SGLang's and trtllm-serve's ASGI app gzips.
    app, tick = _build(target, target.serving == "multiprocess" and not args.no_gzip)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    async def run() -> None:
        async def ticker() -> None:
            while True:
                tick()
                await asyncio.sleep(TICK)

        task = asyncio.create_task(ticker())
        try:
            await server.serve(sockets=[sock])
        finally:
            task.cancel()

    asyncio.run(run())


if __name__ == "__main__":
    main()
