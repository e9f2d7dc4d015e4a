"""What each displayed metric means, and where THIS engine's value comes from (its profile).

Pure data and one function that builds the explanation as Rich text; the popup only shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from console.profiles import EngineProfile
from console.ui import format as fmt


@dataclass(frozen=True, slots=True)
class MetricInfo:
    title: str
    meaning: str
    unit: str
    healthy: str
    canonical: tuple[str, ...] = ()  # profile metrics.map keys it is computed from
    how: str = ""  # how the console derives the shown value from the canonical metric(s)
    gpu: bool = False


_RATE = "Δcounter / Δt over the last 5 s (reset-corrected); n/a until two samples exist"
_QUANT = (
    "quantile interpolated from the histogram's bucket deltas over the recent window "
    "(not since start); '~' marks a window with few observations"
)

METRICS: dict[str, MetricInfo] = {
    "phase": MetricInfo(
        "Phase / health",
        "Where the engine is in its life: loading (refused/503 while weights load), ready (/v1/models lists a "
        "model), degraded (answers, but metrics fail), unreachable (no answer), and so on.",
        "state",
        "ready; 'stale N s: reason' means the last probe failed N seconds ago for that reason",
    ),
    "running": MetricInfo(
        "Running requests",
        "Requests in the running batch (being prefilled or decoded) right now.",
        "requests",
        "at or below the engine's max batch size (e.g. vLLM --max-num-seqs); follows load",
        ("running",),
        "sum over data-parallel replicas",
    ),
    "waiting": MetricInfo(
        "Waiting requests",
        "Requests queued because the batch or the KV cache is full.",
        "requests",
        "0 most of the time; persistently > 0 with KV near 100% means the engine is saturated",
        ("waiting",),
        "sum over data-parallel replicas",
    ),
    "kv_usage": MetricInfo(
        "KV-cache usage",
        "Share of the KV-cache blocks/tokens in use. Engines preallocate HBM, so this, not GPU memory, "
        "shows how full the engine is.",
        "percent of the KV pool",
        "< 90%; near 100% with waiting > 0 leads to queueing and preemptions",
        ("kv_usage",),
        "max over replicas (the fullest replica limits admission)",
    ),
    "prefix_hit_rate": MetricInfo(
        "Prefix-cache hit rate",
        "Share of prompt tokens served from the prefix cache instead of being recomputed.",
        "percent of prompt tokens",
        "workload-dependent: high (> 50%) for chat with shared system prompts, near 0 for unique prompts",
        ("prefix_hits", "prefix_queries", "cached_prompt_tokens", "prompt_tokens", "prefix_hit_rate_gauge"),
        "over the 60 s window",
    ),
    "generation_tps": MetricInfo(
        "Generation throughput",
        "Output (decode) tokens produced per second, all requests together.",
        "tokens/s",
        "proportional to running requests; a drop while running > 0 is a decode stall",
        ("generation_tokens",),
        _RATE,
    ),
    "prompt_tps": MetricInfo(
        "Prompt throughput",
        "Prompt (prefill) tokens processed per second.",
        "tokens/s",
        "follows incoming load; bursts with long prompts slow decode for everyone",
        ("prompt_tokens",),
        _RATE,
    ),
    "ttft_p50": MetricInfo(
        "Time to first token, p50",
        "Median delay from request arrival to its first output token (queue + prefill).",
        "seconds",
        "tens to hundreds of ms for short prompts; grows with queueing",
        ("ttft",),
        _QUANT,
    ),
    "ttft_p99": MetricInfo(
        "Time to first token, p99",
        "Tail delay to the first token: what the slowest 1% of users wait.",
        "seconds",
        "within a few × p50; a large gap means bursts of long prompts or a queue",
        ("ttft",),
        _QUANT,
    ),
    "itl_p50": MetricInfo(
        "Inter-token latency, p50",
        "Median time between consecutive output tokens of a request while it decodes.",
        "seconds",
        "~10-60 ms on a GPU; rises with batch size and with concurrent prefills",
        ("itl",),
        _QUANT,
    ),
    "itl_p99": MetricInfo(
        "Inter-token latency, p99",
        "Tail time between output tokens (stutter the user sees while streaming).",
        "seconds",
        "a few × p50; spikes mean prefills are stalling decode",
        ("itl",),
        _QUANT,
    ),
    "tpot_p50": MetricInfo(
        "Time per output token (TPOT), p50",
        "Median of each request's own average gap between output tokens, (e2e - TTFT) / (tokens - 1), "
        "observed once per request when it ends. Not an inter-token latency: a request's average hides "
        "its stalls.",
        "seconds",
        "~10-60 ms on a GPU; rises with batch size",
        ("tpot",),
        _QUANT,
    ),
    "errors": MetricInfo(
        "Failed requests",
        "Requests that finished with an error or were aborted, per second.",
        "requests/s",
        "0; any sustained rate needs a look at the engine logs",
        ("requests_failed",),
        _RATE,
    ),
    "gpu_util": MetricInfo(
        "GPU utilisation",
        "Share of time at least one kernel ran on the GPU (NVML utilization.gpu). Not SM occupancy.",
        "percent of time",
        "high under load; 0% with running requests means the engine is stuck",
        gpu=True,
        how="nvmlDeviceGetUtilizationRates().gpu",
    ),
    "gpu_mem": MetricInfo(
        "GPU memory (HBM)",
        "Memory allocated on the GPU. Engines preallocate (vLLM --gpu-memory-utilization, SGLang "
        "--mem-fraction-static), so ~90% is normal and says nothing about load; see KV usage.",
        "GiB and percent of total",
        "flat after start-up; growth after start-up means a leak or another process",
        gpu=True,
        how="nvmlDeviceGetMemoryInfo().used / .total",
    ),
    "gpu_temp": MetricInfo(
        "GPU temperature",
        "Core temperature.",
        "°C",
        "below ~83 °C; throttling starts near the slowdown threshold (~87-90 °C on data-centre parts)",
        gpu=True,
        how="nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)",
    ),
    "gpu_power": MetricInfo(
        "GPU power",
        "Board power draw, against its enforced limit.",
        "W",
        "below the limit; sitting at the limit under load means power-capped clocks",
        gpu=True,
        how="nvmlDeviceGetPowerUsage() / 1000, nvmlDeviceGetEnforcedPowerLimit()",
    ),
    "gpu_energy": MetricInfo(
        "GPU energy",
        "Energy the GPU used over the last 60 s (less just after start), from its cumulative energy counter.",
        "kJ over the window",
        "follows load; at idle about the idle power times 60 s",
        gpu=True,
        how="Δ nvmlDeviceGetTotalEnergyConsumption() (mJ since the driver loaded; Volta and newer) over the "
        "window; a counter that goes down (driver reload) adds that interval's sampled power × time, never a "
        "spike. Without the counter, power sampled at 10 Hz in a thread of its own and integrated, marked ≈ "
        "(less exact: sampled power covers only part of the runtime)",
    ),
    "tokens_per_joule": MetricInfo(
        "Tokens per joule",
        "Generated tokens per joule of the engine's GPUs over the last 60 s (status --json also has "
        "(prompt + generated) tokens per joule, joules per 1k output tokens, and idle against busy power).",
        "tokens / J",
        "higher is better; it rises with batch size until the GPU saturates, and is 0 at idle",
        ("generation_tokens", "prompt_tokens"),
        "Δ generated tokens / Σ over the engine's GPUs of (its share × Δ GPU energy), both over the same "
        "snapshots. The share is 1, 'exact', on a GPU whose every process is this engine's. On a shared GPU "
        "(other engines or processes of no engine), on MIG (the counter covers the whole device) or with no "
        "GPU process visible, the GPU's energy is split by its processes' GPU memory (equally where unknown) "
        "and the figure is an estimate, marked ~",
    ),
    "spec_decode": MetricInfo(
        "Speculative decoding",
        "How many drafted tokens the target model accepts. Shown only where the engine runs with a draft "
        "model or EAGLE/n-gram speculation. Note: ITL counts outputs, so it drops when drafts are accepted.",
        "acceptance 0-100 %, tokens per verification step",
        "acceptance well above 50 % and stable; a collapse against its own baseline means the drafts no "
        "longer match the traffic (speculation then costs more than it saves)",
        ("spec_accepted_tokens", "spec_draft_tokens", "spec_drafts", "spec_accept_rate", "spec_accept_length"),
        "Δaccepted / Δdraft tokens and 1 + Δaccepted / Δdrafts over 60 s (vLLM's dashboard formulas); "
        "share of output = Δaccepted / Δgenerated; or the engine's own gauges (SGLang: its last batch; it sets "
        "them to 0 with speculative decoding off, which shows no panel)",
    ),
    "kv_transfer": MetricInfo(
        "KV transfer (disaggregated prefill/decode)",
        "KV-cache blocks moved from the prefill to the decode instance. Shown only where the engine exports "
        "its connector's series (vLLM NIXL or Mooncake on the decode side, SGLang PD mode).",
        "MB/s moved, GB/s link speed while transferring, ms per transfer, failures/s",
        "link speed near the interconnect's (NVLink / RDMA, tens of GB/s); a same-host pair at PCIe-like "
        "speed means the transfer is not using NVLink; failures 0",
        ("kv_transfer_bytes", "kv_transfer_time", "kv_transfers", "kv_transfer_failures", "kv_transfer_gb_s",
         "kv_transfer_latency"),
        "Δbytes / Δt and Δbytes / Δtransfer seconds over 60 s, mean transfer = Δseconds / Δtransfers (SGLang "
        "0.5.23: the _sum and _count of its per-transfer size and latency histograms; vLLM: NIXL or Mooncake); "
        "or the engine's gauges (older SGLang: its last transfer). Not per request, and summed over TP ranks "
        "only as the engine reports them",
    ),
    "phases": MetricInfo(
        "Request phases",
        "How long requests spend in each phase once scheduled: prefill (first scheduled to first token), "
        "decode (first to last token) and inference (both). Queueing is not in them (see queue time).",
        "seconds (p50, over the recent window)",
        "prefill well below decode for chat traffic; a prefill that grows with load while prompts do not is "
        "prefill starved by decode batches (chunked prefill settings)",
        ("prefill_time", "decode_time", "inference_time"),
        _QUANT,
    ),
    "scheduling": MetricInfo(
        "Waiting by reason, sleep, admission",
        "Why requests wait (capacity: no room in the batch; deferred: held by a transient constraint such as "
        "the LoRA budget or a KV transfer), whether the engine sleeps (level 1: weights offloaded to CPU; "
        "level 2: weights discarded) and requests refused by a queue limit.",
        "requests, sleep level 0-2, refusals/s",
        "deferred near 0; awake while serving; no refusals (a refusal means --max-num-queued-* was hit)",
        ("waiting_capacity", "waiting_deferred", "sleep_awake", "sleep_offloaded", "sleep_discarded",
         "admission_rejections"),
        "the engine's gauges as exported; refusals: " + _RATE,
    ),
    "pd_queues": MetricInfo(
        "Disaggregated P/D queues",
        "Requests held between the prefill and decode instances: on the prefill side waiting for the decode "
        "peer (bootstrap) or sending their KV (inflight); on the decode side preallocating KV (prealloc) or "
        "receiving it (transfer). Shown only in P/D mode. With priority scheduling the totals (priority=\"\") "
        "are read, not the per-priority series.",
        "requests, bootstrap failures/s",
        "queues short and draining; growing bootstrap or transfer queues mean the peer or the link cannot "
        "keep up; bootstrap failures 0",
        ("pd_bootstrap_queue", "pd_inflight_queue", "pd_prealloc_queue", "pd_transfer_queue",
         "pd_bootstrap_failures"),
        "the engine's gauges; failures: " + _RATE,
    ),
    "cache_tiers": MetricInfo(
        "Prompt cache by tier",
        "Where cached prompt tokens came from: GPU memory, host memory, disk or another instance (vLLM source, "
        "TensorRT-LLM cache_tier); the share of prefix lookups a KV connector answered; and how full the host "
        "(second-tier) KV pool is.",
        "tokens/s per tier, hit fraction, pool fraction",
        "most hits from the device tier; host and disk hits save prefill at the cost of a copy; a full host "
        "pool evicts to disk or drops",
        ("prompt_cached_by_tier", "external_prefix_hits", "external_prefix_queries", "kv_host_usage"),
        "Δcached tokens per tier / Δt over 60 s; external hit rate = Δhits / Δqueries over 60 s; host pool: "
        "the engine's gauge",
    ),
    "lora": MetricInfo(
        "LoRA adapters",
        "Adapters with running and waiting requests, and the adapter slots in use. Shown only with LoRA on.",
        "adapters",
        "waiting adapters only briefly; waiting while every slot is used means requests queue for a slot "
        "(raise --max-loras)",
        ("lora_running", "lora_waiting", "lora_slots_used", "lora_slots_total"),
        "vLLM: lora_requests_info's labels (comma-joined adapter names; its value is a timestamp, the newest "
        "sample is read); SGLang: lora_pool_slots_used / _total",
    ),
    "role": MetricInfo(
        "Role",
        "The engine's part in disaggregated serving: prefill (prompts, then hands the KV cache on) or decode "
        "(generates the tokens), from the role label of its Prometheus source (role_labels).",
        "prefill | decode",
        "as deployed; n/a: the source has no role label for it",
    ),
    "gpu_engine": MetricInfo(
        "Owning engine",
        "Which engine instance the GPU's processes belong to (process → container → engine).",
        "name",
        "one engine per GPU (or one tensor-parallel group); '?' means unattributed processes",
        gpu=True,
        how="NVML compute processes joined with the engines' PIDs and containers",
    ),
}


def _values(allowed: tuple[str, ...]) -> str:
    """A match's label values; the empty one (a total, or the label absent) shown as ""."""
    return ",".join(v or '""' for v in allowed)


def explain(metric: str, profile: EngineProfile | None, *, engine_name: str = "", simulated: bool = False) -> Text:
    """The popup text: meaning, unit, healthy range, and THIS engine's raw names and formula."""
    info = METRICS.get(metric)
    out = Text()
    if info is None:
        out.append(f"No explanation for {metric!r} yet.\n", style="dim")
        return out
    out.append(info.title + "\n", style="bold")
    out.append(info.meaning + "\n\n")
    out.append("Unit: ", style="bold")
    out.append(info.unit + "\n")
    out.append("Healthy: ", style="bold")
    out.append(info.healthy + "\n")
    if info.gpu:
        out.append("Source: ", style="bold")
        out.append(("simulated GPU model (demo) standing in for " if simulated else "") + info.how + "\n")
        return out
    if info.how:
        out.append("Computed: ", style="bold")
        how = info.how
        if profile is not None and how == _RATE and any(
            (m := profile.metrics.map.get(c)) is not None and m.at_finish for c in info.canonical
        ):
            how = "Δcounter / Δt over the last 60 s for this engine (it counts only when a request finishes)"
        out.append(how + "\n")
    if profile is None:
        out.append("\nNo engine selected (or its profile is unknown): raw names not shown.\n", style="dim")
        return out
    where = f"{profile.display_name}, profile {profile.name}" + (f" from {profile.source}" if profile.source else "")
    out.append(f"\nFor {engine_name or profile.name} ({where}):\n", style="bold")
    if metric == "phase":
        h = profile.health
        out.append(f"  health probe GET {h.path}; ready when GET {h.ready_path} lists a model\n")
        out.append(f"  loading looks like: {', '.join(h.loading)}\n")
        return out
    if metric == "prefix_hit_rate":
        hr = profile.metrics.prefix_hit_rate
        if hr is not None:
            out.append("  formula: ", style="bold")
            out.append((hr.formula or f"Δ{'+'.join(hr.numerator)} / Δ{'+'.join(hr.denominator)}") + "\n")
            if "prefix_hit_rate_gauge" in profile.metrics.map:
                out.append("  until a second scrape gives the counters a window: the engine's own gauge\n")
        elif "prefix_hit_rate_gauge" in profile.metrics.map:
            out.append("  formula: the engine's own gauge (no counters to difference)\n")
        else:
            out.append("  this engine exports nothing to compute it from: shown as n/a\n", style=fmt.WARN)
    shown = False
    for canon in info.canonical:
        m = profile.metrics.map.get(canon)
        if m is None:
            continue
        shown = True
        out.append(f"  {canon}: ", style="bold")
        out.append(" | ".join(m.names))
        out.append(f"  [{m.kind}, {m.aggregate} over label series]")
        if m.match:
            out.append("  only " + ", ".join(f"{k}∈{{{_values(v)}}}" for k, v in m.match.items()))
        if m.scale != 1.0:
            out.append(f"  ×{m.scale:g}")
        for part in m.plus:
            out.append("  + " + " | ".join(part.names))
            if part.match:
                out.append(" only " + ", ".join(f"{k}∈{{{_values(v)}}}" for k, v in part.match.items()))
        out.append("\n")
        if m.unit:
            out.append(f"    raw unit: {m.unit}\n", style="dim")
        if m.note:
            out.append(f"    note: {m.note}\n", style="dim")
        if m.first_use:
            out.append("    created at its first use: 0 until then (not n/a)\n", style="dim")
        if m.at_finish:
            out.append(
                f"    counted only when a request finishes: a 5 s rate reads 0 during a decode and spikes at its "
                f"end, so the rate shown is over 60 s, marked {fmt.AT_FINISH_MARK}\n",
                style=fmt.WARN,
            )
        if m.precision:
            step = 10 ** (7 - m.precision)
            out.append(
                f"    printed with {m.precision} significant digits: past {10**m.precision - 1:,} the counter moves in "
                f"steps (of {step:g} from 1e7), so a 5 s rate is coarse; from then on the rate shown is over 60 s "
                "and marked approximate\n",
                style=fmt.WARN,
            )
        if m.by_label:
            out.append(f"    broken down by its label {m.by_label}\n", style="dim")
    if not shown and metric != "prefix_hit_rate":
        out.append("  this engine's profile maps no raw metric for it: shown as n/a, never 0\n", style=fmt.WARN)
        tpot = profile.metrics.map.get("tpot")
        if "itl" in info.canonical and tpot is not None:
            # TGI/trtllm publish a per-request mean time per token: a TPOT, not an ITL.
            out.append(
                f"  it has a per-request mean time per output token ({' | '.join(tpot.names)}): that is a TPOT "
                "(each request's average gap), not the gaps between tokens, so it is shown as TPOT (status "
                "tpot_s), not here\n",
                style="dim",
            )
    if len(info.canonical) and any(len(profile.metrics.map[c].names) > 1 for c in info.canonical
                                   if c in profile.metrics.map):
        out.append("  (several names: the first one present in the payload wins; older ones are legacy)\n",
                   style="dim")
    if profile.metrics.enable_hint:
        out.append(f"  metrics need: {profile.metrics.enable_hint}\n", style="dim")
    return out
