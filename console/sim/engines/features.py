"""Simulator modes for speculative decoding, the decode side of disaggregated prefill/decode (KV
transfer) and LoRA, with the real engines' metric names, types and labels:

* vLLM: ``vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position}`` (vllm/v1/spec_decode/metrics.py);
  NIXL connector ``vllm:nixl_xfer_time_seconds`` and ``vllm:nixl_bytes_transferred`` histograms and
  ``vllm:nixl_num_failed_transfers_total`` (nixl_connector.py); ``vllm:lora_requests_info{max_lora,
  running_lora_adapters, waiting_lora_adapters}`` whose value is a timestamp (no model label).
* SGLang 0.5.23 (sglang/srt/observability/metrics_collector.py): gauges ``sglang:spec_accept_rate`` /
  ``spec_accept_length`` set on every log (0 with speculative decoding off); P/D transfers as
  histograms ``kv_transfer_latency_ms``, ``kv_transfer_total_mb`` (MiB) and ``kv_transfer_speed_gb_s``
  (GiB/s), one observation per transfer; the decode side's ``num_decode_prealloc_queue_reqs`` /
  ``num_decode_transfer_queue_reqs`` gauges; counters ``num_transfer_failed_reqs_total`` and
  ``num_bootstrap_failed_reqs_total``; gauges ``lora_pool_slots_used`` / ``_total``. With
  ``legacy`` (SGLang before the histograms, e.g. 0.5.4): the transfer figures are gauges of the last
  transfer under the same names, and the spec gauges exist only with speculative decoding on.

Nothing random. Spec decode with K draft tokens and per-position acceptance P: position i is accepted
with probability P**i, so a verification step emits 1 + Σ P**i tokens on average; the counters are
derived from the generated tokens so that they always agree. KV transfer: each request that reaches
its first token pulled its prompt's KV (``KV_BYTES_PER_TOKEN``, an 8B model in bf16) at ``LINK_GB_S``.
LoRA: ``max_lora`` adapters fit; running requests use adapters round-robin, requests beyond the
slots wait for theirs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from console.sim.promtext import Family, Histogram, Labels

KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads, head dim 128, bf16
LINK_GB_S = 22.0  # an NVLink-less same-host transfer, as reported in vLLM #34054's range
NIXL_TIME_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]
NIXL_BYTES_BUCKETS = [2.0**k for k in range(16, 34, 2)]
# SGLang 0.5.23's buckets (SchedulerMetricsCollector).
SGLANG_LATENCY_MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000]
SGLANG_TOTAL_MB_BUCKETS = [1, 5, 10, 50, 100, 500, 1000, 5000, 10000]
SGLANG_SPEED_BUCKETS = [0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400]


@dataclass(frozen=True, slots=True)
class SpecMode:
    k: int  # draft tokens per step (num_speculative_tokens)
    p: float = 0.7  # acceptance probability per position (position i: p**i)

    @classmethod
    def parse(cls, text: str) -> SpecMode:
        """"K" or "K:P" (e.g. "3" or "4:0.6")."""
        head, _, tail = text.partition(":")
        try:
            k = int(head)
            p = float(tail) if tail else 0.7
        except ValueError:
            raise ValueError(f"--spec-decode {text!r}: expected K or K:P (draft tokens, acceptance 0-1)") from None
        if not 1 <= k <= 16 or not 0.0 < p < 1.0:
            raise ValueError(f"--spec-decode {text!r}: K must be 1..16 and P between 0 and 1")
        return cls(k, p)

    def per_step(self) -> float:
        return 1.0 + sum(self.p**i for i in range(1, self.k + 1))


@dataclass(frozen=True, slots=True)
class SpecCounts:
    drafts: int
    draft_tokens: int
    accepted: int
    per_pos: tuple[int, ...]


def spec_counts(mode: SpecMode, generated: int) -> SpecCounts:
    """Counters that produced ``generated`` tokens: one bonus token per step plus the accepted drafts."""
    drafts = int(generated / mode.per_step())
    per_pos = tuple(int(drafts * mode.p**i) for i in range(1, mode.k + 1))
    return SpecCounts(drafts, drafts * mode.k, sum(per_pos), per_pos)


class KvTransferLog:
    """The decode instance's NIXL pulls, one per request at its first token."""

    def __init__(self, fail_every: int = 0) -> None:
        self.time = Histogram(NIXL_TIME_BUCKETS)
        self.bytes = Histogram(NIXL_BYTES_BUCKETS)
        self.failed = 0
        self.pulls = 0
        self.fail_every = fail_every  # every Nth pull fails (0: none)
        self.last_gb_s = 0.0
        self.last_latency_ms = 0.0
        # SGLang's per-transfer histograms (its units: ms, MiB, GiB/s).
        self.latency_ms = Histogram(SGLANG_LATENCY_MS_BUCKETS)
        self.total_mb = Histogram(SGLANG_TOTAL_MB_BUCKETS)
        self.speed_gib_s = Histogram(SGLANG_SPEED_BUCKETS)

    def pull(self, prompt_tokens: int) -> None:
        self.pulls += 1
        if self.fail_every and self.pulls % self.fail_every == 0:
            self.failed += 1
            return
        size = float(prompt_tokens * KV_BYTES_PER_TOKEN)
        took = size / (LINK_GB_S * 1e9) + 0.0004  # plus a fixed post/notify cost
        self.time.observe(took)
        self.bytes.observe(size)
        self.last_gb_s = size / took / 1e9
        self.last_latency_ms = took * 1000.0
        self.latency_ms.observe(took * 1000.0)
        self.total_mb.observe(size / (1024 * 1024))
        self.speed_gib_s.observe(size / (1024**3) / took)


def lora_adapters(max_lora: int, running: int, waiting: int) -> tuple[list[str], list[str]]:
    """(running adapters, waiting adapters): 2 more adapters than slots, used round-robin."""
    names = [f"sim-lora-{i}" for i in range(max_lora + 2)]
    run = names[: min(running, max_lora)]
    wait = names[len(run): min(len(names), len(run) + waiting)] if len(run) == max_lora else []
    return run, wait


def vllm_families(labels: Labels, created: float, *, spec: SpecMode | None, generated: int,
                  kv: KvTransferLog | None, max_lora: int, running: int, waiting: int) -> list[Family]:  # fmt: skip
    fams: list[Family] = []
    if spec is not None:
        c = spec_counts(spec, generated)
        fams += [
            Family("vllm:spec_decode_num_drafts", "counter", "Number of spec decoding drafts.",
                   values=[(labels, float(c.drafts))], created=created),
            Family("vllm:spec_decode_num_draft_tokens", "counter", "Number of draft tokens.",
                   values=[(labels, float(c.draft_tokens))], created=created),
            Family("vllm:spec_decode_num_accepted_tokens", "counter", "Number of accepted tokens.",
                   values=[(labels, float(c.accepted))], created=created),
            Family("vllm:spec_decode_num_accepted_tokens_per_pos", "counter",
                   "Accepted tokens per draft position.",
                   values=[((*labels, ("position", str(i))), float(n)) for i, n in enumerate(c.per_pos)],
                   created=created),
        ]  # fmt: skip
    if kv is not None:
        fams += [
            Family("vllm:nixl_xfer_time_seconds", "histogram", "Histogram of transfer duration for NIXL KV Cache "
                   "transfers.", hists=[(labels, kv.time)], created=created),
            Family("vllm:nixl_bytes_transferred", "histogram", "Histogram of bytes transferred per NIXL KV Cache "
                   "transfers.", hists=[(labels, kv.bytes)], created=created),
            Family("vllm:nixl_num_failed_transfers", "counter", "Number of failed NIXL KV Cache transfers.",
                   values=[(labels, float(kv.failed))], created=created),
        ]  # fmt: skip
    if max_lora:
        run, wait = lora_adapters(max_lora, running, waiting)
        info: Labels = (("max_lora", str(max_lora)), ("running_lora_adapters", ",".join(run)),
                        ("waiting_lora_adapters", ",".join(wait)))  # fmt: skip
        fams.append(Family("vllm:lora_requests_info", "gauge", "Running stats on lora requests.",
                           values=[(info, time.time())]))  # fmt: skip
    return fams


def sglang_families(labels: Labels, created: float, *, spec: SpecMode | None, kv: KvTransferLog | None,
                    max_lora: int, running: int, legacy: bool = False) -> list[Family]:  # fmt: skip
    """The decode side's P/D queue gauges read 0: the simulator pulls a prompt's KV at once (and, as
    SGLang, has no per-priority series of a queue no request has been in)."""
    fams: list[Family] = []
    if spec is not None or not legacy:
        c = spec_counts(spec, 10_000) if spec is not None else None
        rate = c.accepted / c.draft_tokens if c is not None and c.draft_tokens else 0.0
        fams += [
            Family("sglang:spec_accept_rate", "gauge", "Speculative acceptance rate (`accepted drafts / proposed "
                   "drafts` in batch).", values=[(labels, rate)]),
            Family("sglang:spec_accept_length", "gauge", "Mean acceptance length of speculative decoding (accepted "
                   "drafts + bonus token per forward).", values=[(labels, spec.per_step() if spec else 0.0)]),
        ]  # fmt: skip
    if kv is not None and legacy:
        fams += [
            Family("sglang:kv_transfer_speed_gb_s", "gauge", "The transfer speed of the KV cache in GB/s.",
                   values=[(labels, kv.last_gb_s)]),
            Family("sglang:kv_transfer_latency_ms", "gauge", "The transfer latency of the KV cache in ms.",
                   values=[(labels, kv.last_latency_ms)]),
            Family("sglang:num_transfer_failed_reqs", "counter", "The number of transfer failed requests.",
                   values=[(labels, float(kv.failed))], created=created),
        ]  # fmt: skip
    elif kv is not None:
        fams += [
            Family("sglang:kv_transfer_speed_gb_s", "histogram", "Histogram of KV cache transfer speed in GB/s.",
                   hists=[(labels, kv.speed_gib_s)], created=created),
            Family("sglang:kv_transfer_latency_ms", "histogram", "Histogram of KV cache transfer latency in ms.",
                   hists=[(labels, kv.latency_ms)], created=created),
            Family("sglang:kv_transfer_total_mb", "histogram", "Histogram of KV cache transfer size in MB.",
                   hists=[(labels, kv.total_mb)], created=created),
            Family("sglang:num_transfer_failed_reqs", "counter", "The number of transfer failed requests.",
                   values=[(labels, float(kv.failed))], created=created),
            Family("sglang:num_bootstrap_failed_reqs", "counter", "The number of bootstrap failed requests.",
                   values=[(labels, 0.0)], created=created),
            Family("sglang:num_decode_prealloc_queue_reqs", "gauge", "The number of requests in the decode "
                   "prealloc queue.", values=[(labels, 0.0)]),
            Family("sglang:num_decode_transfer_queue_reqs", "gauge", "The number of requests in the decode "
                   "transfer queue.", values=[(labels, 0.0)]),
        ]  # fmt: skip
    if max_lora:
        used = min(running, max_lora)
        fams += [
            Family("sglang:lora_pool_slots_used", "gauge", "Number of LoRA adapter slots in use.",
                   values=[(labels, float(used))]),
            Family("sglang:lora_pool_slots_total", "gauge", "Total number of LoRA adapter slots.",
                   values=[(labels, float(max_lora))]),
            Family("sglang:lora_pool_utilization", "gauge", "Utilization of the LoRA adapter pool.",
                   values=[(labels, used / max_lora)]),
        ]  # fmt: skip
    return fams
