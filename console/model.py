"""Immutable, typed snapshots: the only thing the UI and the headless commands read.

Collectors build these; nothing here does I/O. ``None`` always means "n/a" (the engine lacks the
metric, or there is not enough data yet) and is shown as such, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Phase(StrEnum):
    """Lifecycle / reachability phase of an engine instance."""

    UNKNOWN = "unknown"
    PULLING = "pulling"
    CREATING = "creating"
    STARTING = "starting"
    LOADING = "loading"  # connection refused or 503 while the model loads
    READY = "ready"  # /v1/models lists at least one model
    DEGRADED = "degraded"  # answering, but metrics failing or errors rising
    UNHEALTHY = "unhealthy"  # health endpoint failing after having been ready
    UNREACHABLE = "unreachable"  # monitor-only endpoint not answering
    STOPPING = "stopping"
    EXITED = "exited"
    FAILED = "failed"


# Phases in which an engine's last numbers are history, not its present.
NOT_LIVE = frozenset({Phase.PULLING, Phase.CREATING, Phase.STARTING, Phase.LOADING, Phase.STOPPING,
                      Phase.EXITED, Phase.FAILED, Phase.UNREACHABLE, Phase.UNHEALTHY})


class SourceState(StrEnum):
    OK = "ok"
    STALE = "stale"  # last collection failed or timed out; last values kept
    UNAVAILABLE = "unavailable"  # the source cannot work here (no NVML driver, no metrics endpoint)


@dataclass(frozen=True, slots=True)
class Freshness:
    """How current a panel's data is, and why not when it is not."""

    state: SourceState = SourceState.OK
    updated_at: float | None = None  # wall-clock time of the last successful collection
    stale_since: float | None = None  # wall-clock time of the first failure in the current run
    reason: str = ""

    @property
    def stale(self) -> bool:
        return self.state is not SourceState.OK

    @property
    def pending(self) -> bool:
        """Not collected yet: no good sample and no failure either (the source has not had its
        first turn). Read from the fields, so it survives a status document's round trip."""
        return self.state is SourceState.STALE and self.updated_at is None and self.stale_since is None


# What a source shows before its first collection.
NOT_COLLECTED = Freshness(SourceState.STALE, reason="not collected yet")


# The staleness rule every source follows: its numbers stop counting as fresh once the last good
# sample is older than two of the source's own periods plus that source's slack (the time it may
# take to answer). Each source passes its period and slack; none has a rule of its own.
def late_after(period: float, slack: float) -> float:
    """How old a source's last good sample may be, in seconds, before the source is stale."""
    return 2 * period + slack


def aged(f: Freshness, now: float, allowed: float, reason: str) -> Freshness:
    """``f`` marked stale since its last good sample when that is older than ``allowed`` seconds; ``f``
    itself when it is fresh enough, stale already, or was never collected."""
    if f.stale or f.updated_at is None or now - f.updated_at <= allowed:
        return f
    return Freshness(SourceState.STALE, updated_at=f.updated_at, stale_since=f.updated_at, reason=reason)


def went_stale(prev: Freshness, now: float, reason: str, state: SourceState = SourceState.STALE) -> Freshness:
    """``prev`` after a failed collection at ``now``: stale since the first failure of this run."""
    since = prev.stale_since if prev.stale and prev.stale_since is not None else now
    return Freshness(state, updated_at=prev.updated_at, stale_since=since, reason=reason)


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Windowed histogram quantiles (seconds). ``low_sample`` when the window had few observations."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    # Observations in the window; None (n/a) when the engine has no such histogram, its total is
    # unknown (neither _count nor a +Inf bucket) or the window has no data yet.
    count: float | None = None
    mean: float | None = None
    low_sample: bool = True
    # Quantiles ("p50", "p90", "p99") that fell in the +Inf bucket: the value shown is the highest
    # finite bucket bound, a lower bound of the truth (show it as ">x").
    capped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Rates:
    """Per-second rates of one counter over the standard windows; None until the window has data."""

    r5s: float | None = None
    r15s: float | None = None
    r60s: float | None = None
    # The engine adds to this counter only when a request finishes (profile ``at_finish``): short
    # windows read 0 during a decode and spike at its end, so ``now`` is the 60 s rate.
    at_finish: bool = False
    # The engine prints this counter with few significant digits (profile ``precision``: llama.cpp's
    # 6) and its value is past them: it moves in steps of ``step`` (10 tokens at 1.23457e+06), so a
    # 5 s rate is off by up to step / 5 s. ``now`` is then the 60 s rate, marked approximate.
    step: float = 0.0

    @property
    def approximate(self) -> bool:
        return self.step > 0

    @property
    def now(self) -> float | None:
        """The rate to show as current: over 5 s, or 60 s for a counter bumped when requests end or
        printed too coarsely for 5 s."""
        return self.r60s if self.at_finish or self.step > 0 else self.r5s

    @property
    def now_window(self) -> str:
        return "60s" if self.at_finish or self.step > 0 else "5s"


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """Speculative decoding over 60 s (``window`` "60s") from the counters, or the engine's own gauges
    (``window`` "gauge": SGLang's last batch)."""

    acceptance_rate: float | None = None  # accepted / draft tokens (0-1)
    acceptance_length: float | None = None  # tokens per verification step: 1 + accepted / drafts
    draft_share: float | None = None  # share of the generated tokens that were accepted drafts
    window: str = "60s"
    per_position: tuple[float, ...] = ()  # acceptance of draft position 1..k: Δaccepted[i] / Δdrafts


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """KV-cache transfer of disaggregated prefill/decode (vLLM's NIXL connector counters over 60 s,
    or SGLang's gauges)."""

    bytes_per_s: float | None = None  # bytes moved per second of wall time
    link_gb_s: float | None = None  # GB/s while transferring (bytes / transfer time), or the gauge
    latency_s: float | None = None  # mean time of one transfer
    failures_per_s: Rates = Rates()


@dataclass(frozen=True, slots=True)
class PdQueues:
    """Disaggregated prefill/decode queues (SGLang): requests on the prefill side waiting for their
    decode peer (bootstrap) or sending their KV (inflight); on the decode side preallocating KV
    (prealloc) or receiving it (transfer); and bootstrap failures."""

    bootstrap: float | None = None
    inflight: float | None = None
    prealloc: float | None = None
    transfer: float | None = None
    bootstrap_failures_per_s: Rates = Rates()


@dataclass(frozen=True, slots=True)
class CacheTiers:
    """Where cached prompt tokens came from over 60 s (vLLM prompt_tokens_cached_by_source, trtllm
    prompt_cache_hit_tokens_total by cache_tier): tier -> tokens per second; plus the share of prefix
    queries a KV connector answered (vLLM external_prefix_cache_hits / queries)."""

    tokens_per_s: tuple[tuple[str, float], ...] = ()
    external_hit_rate: float | None = None


@dataclass(frozen=True, slots=True)
class LoraState:
    """LoRA adapters (vLLM lora_requests_info, SGLang lora_pool_*)."""

    running: float | None = None  # adapters with running requests
    waiting: float | None = None  # adapters with waiting requests
    slots_used: float | None = None
    slots_total: float | None = None  # max_lora


@dataclass(frozen=True, slots=True)
class InvalidFigure:
    """A figure the engine reported outside its physical range (a fraction above 1, a negative
    count, a latency of centuries), or raw samples that cannot all be true (a NaN counter, buckets
    that decrease with ``le``, a series given twice): shown as invalid with this reason, never as a
    number."""

    field: str  # the ModelMetrics path: "kv_usage", "ttft.p99", "generation_tps.r5s", "counters.prompt_tokens"
    value: float
    allowed: str  # the range it left: "0-1", "0-1e+07"; "" where the samples themselves are invalid
    reason: str = ""  # what is wrong with the samples ("" for a value outside ``allowed``)

    def why(self) -> str:
        """The reason in words: what the samples got wrong, or the range the value left."""
        return self.reason or f"outside {self.allowed}"

    def describe(self) -> str:
        if self.reason:
            return f"{self.field}: {self.reason}"
        return f"{self.field} {self.value:.6g} outside {self.allowed}"


@dataclass(frozen=True, slots=True)
class ModelMetrics:
    """Normalised metrics of one served model on one engine (DP/TP series already combined)."""

    model: str
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None  # max over replicas, fraction 0-1
    kv_usage_mean: float | None = None  # mean over replicas
    replicas: int = 1
    prefix_hit_rate: float | None = None  # over the 60 s window (fraction 0-1)
    prefix_hit_rate_window: str = "60s"
    prompt_tps: Rates = Rates()
    generation_tps: Rates = Rates()
    request_rate: Rates = Rates()
    error_rate: Rates = Rates()
    preemptions_total: float | None = None
    preemption_rate: Rates = Rates()
    ttft: Quantiles = Quantiles()
    itl: Quantiles = Quantiles()
    tpot: Quantiles = Quantiles()
    e2e: Quantiles = Quantiles()
    queue_time: Quantiles = Quantiles()
    # Per-request phases (vLLM, trtllm): prefill = first token - first scheduled, decode = last token
    # - first token, inference = their sum (queueing excluded).
    prefill_time: Quantiles = Quantiles()
    decode_time: Quantiles = Quantiles()
    inference_time: Quantiles = Quantiles()
    # Waiting requests by reason (vLLM): for scheduling capacity, or deferred by a transient
    # constraint (LoRA budget, KV transfer). None where the engine does not say.
    waiting_capacity: float | None = None
    waiting_deferred: float | None = None
    # Sleep mode (vLLM engine_sleep_state): 0 awake, 1 weights offloaded, 2 weights discarded.
    sleep_level: int | None = None
    kv_host_usage: float | None = None  # host (second-tier) KV pool, fraction 0-1
    admission_rejections_per_s: Rates = Rates()
    # TTFT histogram, cumulative since the console began watching (reset-corrected): its upper bounds
    # and the count at or below each (the last bound is +Inf: the total). Empty when n/a. Alerts
    # take SLO burn rates over hours from successive values.
    ttft_cumulative: tuple[tuple[float, ...], tuple[float, ...]] = ((), ())
    # Current counter values (after reset correction), canonical name -> value.
    counters: dict[str, float] = field(default_factory=dict)
    # Present only where the engine exposes the series (None: no such panel).
    spec: SpecDecode | None = None
    kv_transfer: KvTransfer | None = None
    lora: LoraState | None = None
    pd_queues: PdQueues | None = None
    cache_tiers: CacheTiers | None = None
    # Figures dropped (set to None) because they were outside their physical range
    # (console.plausible); the engine's metrics are marked with them.
    invalid: tuple[InvalidFigure, ...] = ()


@dataclass(frozen=True, slots=True)
class RawSeries:
    """One raw sample as scraped, for the metrics browser and inspect-metrics."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    kind: str = "untyped"


@dataclass(frozen=True, slots=True)
class EngineIdentity:
    version: str | None = None
    models: tuple[str, ...] = ()
    max_model_len: int | None = None


@dataclass(frozen=True, slots=True)
class LifecycleView:
    """What engine control knows of a managed engine. Its phase wins over HTTP probing while the
    engine starts, loads, stops or has ended, where a refused connection cannot tell those apart."""

    phase: Phase
    detail: str = ""
    # How the last run ended: stopped (by this console), outside, crashed, failed, gave-up,
    # unknown; "" while it runs (console.lifecycle.state.ENDINGS).
    ended: str = ""
    exit_code: int | None = None
    oom_killed: bool = False
    since: float | None = None  # wall-clock time the phase began
    countdown: int | None = None  # stopping: whole seconds before SIGKILL


@dataclass(frozen=True, slots=True)
class EnergyView:
    """Energy of one engine (or one GPU) over the energy window; computed by
    ``console.telemetry.gpu.energy`` from the GPUs' energy counters and the engine's token counters.

    ``source``: "counter" (NVML's total-energy counter), "integrated" (power sampled at 10 Hz and
    integrated, where the counter is not supported: less exact), "simulated" (the demo's GPUs) or
    "mixed". ``attribution``: "exact" (the engine has its GPUs alone) or "estimate" (a shared GPU
    or MIG: the GPU's energy split by memory share; ``reason`` says why).
    """

    joules: float | None = None  # over ``window_s``
    window_s: float | None = None
    power_w: float | None = None  # joules / window_s
    tokens_per_joule: float | None = None  # generated tokens / J
    total_tokens_per_joule: float | None = None  # (prompt + generated) tokens / J
    joules_per_1k_output: float | None = None
    idle_w: float | None = None  # mean power while idle (no running request, no tokens) in the last minutes
    busy_w: float | None = None  # mean power while serving, same span
    total_joules: float | None = None  # since the console started watching (reset-safe)
    source: str = ""
    attribution: str = "exact"
    reason: str = ""  # why an estimate, or why n/a
    gpus: tuple[int, ...] = ()
    simulated: bool = False

    @property
    def estimate(self) -> bool:
        return self.attribution != "exact"


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """Everything known about one engine instance at one moment."""

    name: str  # instance name (config key, or PROFILE@URL for ad-hoc engines)
    profile: str  # engine profile name (vllm, sglang, ...)
    url: str
    taken_at: float  # wall-clock time of this snapshot
    phase: Phase = Phase.UNKNOWN
    reachable: bool = False
    health_detail: str = ""  # e.g. "503 Loading model", "connection refused"
    identity: EngineIdentity = EngineIdentity()
    metrics_freshness: Freshness = Freshness()
    health_freshness: Freshness = Freshness()
    models: tuple[ModelMetrics, ...] = ()  # one per served model seen in metrics
    total: ModelMetrics | None = None  # all models combined (what a one-line row shows)
    raw: tuple[RawSeries, ...] = ()
    unmapped: tuple[str, ...] = ()  # raw family names no canonical metric uses
    missing: tuple[str, ...] = ()  # canonical metrics the profile maps but the payload lacked
    managed: bool = False  # started by enginedeck (lifecycle) vs monitor-only
    simulated: bool = False  # only set from configuration/labels, never sniffed from the engine
    gpus: tuple[int, ...] = ()  # GPU indices attributed to this engine
    pids: tuple[int, ...] = ()
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    last_log_line: str = ""
    lifecycle: LifecycleView | None = None  # managed engines: what engine control says
    energy: EnergyView | None = None  # None: no GPU energy for this engine (no GPU, no counter yet)
    # The configured host it runs on ([hosts.NAME], reached over SSH); "" for this machine. An engine
    # of a remote host is named "HOST/NAME" in a fleet snapshot, so names stay unique across hosts.
    host: str = ""
    # The [sources.NAME] it is read from (a Prometheus server): its engines are read-only here.
    source: str = ""
    role: str = ""  # prefill / decode (disaggregated serving), from the source's role label; "" unknown

    @property
    def invalid(self) -> tuple[InvalidFigure, ...]:
        """Figures of this engine dropped as outside their physical range (its metrics are suspect)."""
        return self.total.invalid if self.total is not None else ()

    @property
    def live(self) -> bool:
        """Whether its numbers are current: answering, metrics fresh, and not starting, loading,
        stopping or ended. When not, screens show "--" and history records a gap."""
        return self.reachable and not self.metrics_freshness.stale and self.phase not in NOT_LIVE


@dataclass(frozen=True, slots=True)
class GpuProcess:
    pid: int
    used_bytes: int | None
    name: str = ""
    container: str | None = None  # container id/name from the cgroup
    engine: str | None = None  # engine instance name, when attributed


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    index: int
    name: str
    uuid: str
    taken_at: float
    util_percent: float | None = None  # SM utilisation
    mem_util_percent: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    ecc_errors: int | None = None
    xid_errors: tuple[int, ...] = ()
    # Active clock-throttle reasons (NVML names: sw_thermal, hw_slowdown, sw_power_cap, ...); None: unknown.
    throttle_reasons: tuple[str, ...] | None = None
    processes: tuple[GpuProcess, ...] = ()
    simulated: bool = False
    # Energy: NVML's total-energy counter (mJ since the driver loaded; Volta+), or, where the device
    # lacks it, power integrated at 10 Hz since the console started ("integrated").
    energy_mj: float | None = None
    energy_source: str = ""  # "counter" | "integrated" | "simulated" | "" (n/a)
    mig: bool | None = None  # MIG mode on: the counter covers the whole device, not one instance
    energy: EnergyView | None = None  # windowed figures, filled in by the hub
    host: str = ""  # the remote host it belongs to ("" for this machine); index is then the fleet's

    @property
    def mem_percent(self) -> float | None:
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes

    @property
    def engines(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for p in self.processes:
            if p.engine:
                seen[p.engine] = None
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class GpuFleet:
    """All GPUs, or why there are none."""

    gpus: tuple[GpuSnapshot, ...] = ()
    freshness: Freshness = Freshness()
    driver_version: str | None = None
    source: str = "nvml"  # "nvml" or "simulated"
    unavailable_reason: str = ""  # "NVML unavailable: <reason>" when the source cannot work


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    taken_at: float
    cpu_percent: float | None = None
    cpu_count: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    load_avg: tuple[float, float, float] | None = None
    hostname: str = ""
    freshness: Freshness = Freshness()


@dataclass(frozen=True, slots=True)
class HostView:
    """One configured remote host ([hosts.NAME] or ``attach ssh://``) and its status stream.

    ``freshness`` is OK while status documents arrive in time; STALE (with the reason: ssh exited,
    no document for N s, enginedeck not installed there) when the stream stopped. ``host`` and
    ``gpus`` are what the host's last document said."""

    name: str
    destination: str  # the ssh destination, [user@]host[:port]; a Prometheus source: its URL
    freshness: Freshness = Freshness(SourceState.STALE, reason="not connected yet")
    last_doc_at: float | None = None  # wall-clock time the last document arrived
    host: HostSnapshot | None = None
    gpus: GpuFleet = GpuFleet()
    engines: int = 0  # engines in its last document
    kind: str = "ssh"  # "ssh" ([hosts.NAME]), "prometheus" or "kubernetes" ([sources.NAME], read-only)

    def doc_age(self, now: float) -> float | None:
        return None if self.last_doc_at is None else max(0.0, now - self.last_doc_at)


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """One coherent view of every engine, every GPU and the host."""

    taken_at: float
    engines: tuple[EngineSnapshot, ...] = ()
    gpus: GpuFleet = GpuFleet()
    host: HostSnapshot | None = None
    # Every alert rule on every engine (states ok and n/a included), when alerts are evaluated.
    alerts: tuple[Alert, ...] = ()
    # Remote hosts (empty when the console watches only this machine).
    hosts: tuple[HostView, ...] = ()

    def engine(self, name: str) -> EngineSnapshot | None:
        for e in self.engines:
            if e.name == name:
                return e
        return None


class AlertState(StrEnum):
    """One rule on one engine. ``n/a``: the engine lacks the rule's inputs (never shown as ok)."""

    OK = "ok"
    NA = "n/a"
    NO_DATA = "no data"  # inputs mapped, but no verdict now (not live, too little traffic or history)
    PENDING = "pending"  # condition holds, not yet for the rule's hold time
    FIRING = "firing"
    RESOLVED = "resolved"  # fired, then cleared for the rule's clear time (shown for a while)


@dataclass(frozen=True, slots=True)
class Alert:
    """The state of one alert rule on one engine at one moment (console/alerts computes these)."""

    rule: str
    engine: str
    severity: str  # critical | warning | info
    state: AlertState
    summary: str
    since: float | None = None  # wall-clock time the current state began
    value: float | None = None  # the first condition's signal value now
    condition: str = ""  # e.g. "kv_usage >= 0.95 (clears at 0.9)"
    values: tuple[tuple[str, float | None], ...] = ()  # every condition's signal and its value now
    runbook: str = ""
    note: str = ""  # e.g. an SLO threshold snapped to a bucket boundary; "stopped by you"
    # Firing, but a condition no longer holds at its clear threshold: it resolves at this time
    # (wall clock) unless the condition comes back first. None otherwise.
    clears_at: float | None = None

    @property
    def active(self) -> bool:
        return self.state in (AlertState.PENDING, AlertState.FIRING)
