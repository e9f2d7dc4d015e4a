"""Engine profiles: declarative facts about each engine, loaded from ``engines/*.toml``.

A profile says how to launch an engine (container image and argument template, or a local
command), how to tell loading from ready, where its metrics live and in which format, what the
API key guards, and, for every canonical metric, which raw names carry it across engine versions.

Users add or override profiles with ``<config dir>/engines/*.toml``; a user file with the same
``name`` as a shipped one replaces it. Any problem becomes a one-line ``ConfigError`` naming the
file, the key and the problem.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from console.errors import ConfigError
from console.resources import data_dir
from console.schema import Invalid, spec, validate

# Canonical metrics every engine is normalised to. A profile maps each one it has to raw names;
# a canonical metric absent from a profile is "n/a" for that engine, never 0.
GAUGES = (
    "running",
    "waiting",
    "kv_usage",
    "prefix_hit_rate_gauge",
    # Present only where the engine runs with the feature (mappings marked ``optional``):
    "spec_accept_rate",  # speculative decoding: the engine's own acceptance gauges (SGLang, trtllm)
    "spec_accept_length",
    "kv_transfer_gb_s",  # disaggregated prefill/decode: KV-transfer speed and latency gauges (SGLang)
    "kv_transfer_latency",
    "lora_running",  # LoRA: adapters running / waiting, adapter slots used / total
    "lora_waiting",
    "lora_slots_used",
    "lora_slots_total",
    "waiting_capacity",  # waiting requests by reason (vLLM num_requests_waiting_by_reason)
    "waiting_deferred",
    "sleep_awake",  # sleep mode: 1 awake / 1 at sleep level 1 / 1 at level 2 (vLLM engine_sleep_state)
    "sleep_offloaded",
    "sleep_discarded",
    "kv_host_usage",  # host (second-tier) KV pool, fraction 0-1 (trtllm kv_cache_host_utilization)
    "pd_bootstrap_queue",  # disaggregated P/D queues (SGLang): prefill side waiting for the decode peer,
    "pd_inflight_queue",  # prefill side transferring, decode side preallocating, decode side receiving
    "pd_prealloc_queue",
    "pd_transfer_queue",
)
COUNTERS = (
    "prompt_tokens",
    "generation_tokens",
    "prefix_hits",
    "prefix_queries",
    "cached_prompt_tokens",
    "preemptions",
    "requests_finished",
    "requests_failed",
    # Optional features, as above:
    "spec_drafts",  # verification steps (vLLM num_drafts)
    "spec_draft_tokens",
    "spec_accepted_tokens",
    "spec_accepted_per_pos",  # accepted tokens per draft position (label ``position``)
    "kv_transfer_bytes",  # KV bytes pulled from the prefill instance (NIXL)
    "kv_transfer_time",  # seconds spent in those transfers
    "kv_transfers",
    "kv_transfer_failures",
    "pd_bootstrap_failures",  # P/D requests whose bootstrap with the peer failed (SGLang)
    "prompt_cached_by_tier",  # cached prompt tokens by the tier that held them (label: ``by_label``)
    "external_prefix_hits",  # prefix-cache hits / queries served through a KV connector (vLLM)
    "external_prefix_queries",
    "admission_rejections",  # requests refused by a queue limit (vLLM)
)
HISTOGRAMS = ("ttft", "itl", "tpot", "e2e", "queue_time", "prefill_time", "decode_time", "inference_time")
CANONICAL = GAUGES + COUNTERS + HISTOGRAMS

# Which raw kinds may feed which canonical kind: a counter can come from a histogram's _sum
# (TGI's token counts) or _count.
_ALLOWED_KINDS: dict[str, set[str]] = {
    **{g: {"gauge"} for g in GAUGES},
    **{c: {"counter", "histogram_sum", "histogram_count"} for c in COUNTERS},
    **{h: {"histogram"} for h in HISTOGRAMS},
}

MetricKind = Literal["gauge", "counter", "histogram", "histogram_sum", "histogram_count"]
Aggregate = Literal["sum", "max", "mean"]


@dataclass(frozen=True, kw_only=True)
class MetricMapping:
    """How one canonical metric is read from an engine's raw series."""

    # Raw family names, tried in order; the first one present in a payload wins. Old and new
    # names of the same metric both go here (newest first).
    names: tuple[str, ...] = spec(min_length=1)
    kind: MetricKind
    # How label series of one model combine (DP/TP ranks): running/waiting "sum", KV usage "max".
    aggregate: Aggregate = "sum"
    # Keep only series whose label has one of these values. A key "a|b" matches label a or b
    # (vLLM's finished_reason vs trtllm's older finish_reason).
    match: dict[str, tuple[str, ...]] = spec(factory=dict)
    # Multiply raw values by this (e.g. a percentage 0-100 to a fraction 0-1).
    scale: float = 1.0
    # Unit of the raw metric, for the explain popup.
    unit: str = ""
    # Names before this many entries of ``names`` are the current ones; later ones are legacy
    # names (accepted, flagged as such in `inspect-metrics`).
    note: str = ""
    # Counters only. Further raw counters added into this one, each with its own names, match and
    # scale: TGI's finished requests are tgi_request_success + tgi_request_failure.
    plus: tuple[MetricMapping, ...] = ()
    # Counters only. The engine creates this counter's label series on first use (a labelled
    # counter: TGI request_failure{err}, trtllm request_error_total{http_code}). Absent from a payload
    # it reads 0, not n/a, where the engine has the family: every build (``present_with`` empty), or
    # one of the raw families in ``present_with`` is in the payload. (Whatever the flag, a series
    # that appears after a scrape where the metric was present counts from 0: docs/status-json.md.)
    first_use: bool = False
    present_with: tuple[str, ...] = ()
    # Counters only. The engine adds to it only when a request finishes (tokens of a request counted
    # at its end): short windows read 0 for a whole decode, then spike, so the console shows its rate
    # over the longest window instead, flagged.
    at_finish: bool = False
    # The engine has this series only when it runs with the feature (speculative decoding, P/D
    # disaggregation, LoRA): absent from a payload it is not listed as missing.
    optional: bool = False
    # Gauges only. An info gauge whose value is a timestamp (vLLM lora_requests_info): the value is
    # read from this label of the newest sample (largest value) per model: a number, or the count of
    # the items of a comma-joined list ("a,b" -> 2, "" -> 0).
    from_label: str = ""
    # Counters only. The label whose values break this counter down where the console shows it by
    # label (draft position, cache tier); empty: the canonical default (``position``).
    by_label: str = ""
    # Counters only. Significant digits the engine prints the value with (llama.cpp: 6, so
    # 1234567 reads 1.23457e+06); 0: exact. Above 10**precision a short-window rate is coarse.
    precision: int = spec(0, ge=0, le=17)

    def __post_init__(self) -> None:
        counter = self.kind in ("counter", "histogram_sum", "histogram_count")
        if not counter and (self.plus or self.first_use or self.at_finish or self.by_label or self.precision):
            raise ValueError("plus, first_use, at_finish, by_label and precision apply to counters only")
        if self.present_with and not self.first_use:
            raise ValueError("present_with needs first_use = true")
        if self.from_label and self.kind != "gauge":
            raise ValueError("from_label applies to gauges only")
        for part in self.plus:
            if part.plus or part.kind not in ("counter", "histogram_sum", "histogram_count"):
                raise ValueError("a plus part is one counter (no plus of its own)")

    def raw_names(self) -> tuple[str, ...]:
        """Every raw name this mapping may read: its names, its parts' names and the evidence."""
        return (*self.names, *(n for p in self.plus for n in p.raw_names()), *self.present_with)


def _counters_only(v: tuple[str, ...], _: object) -> tuple[str, ...]:
    for name in v:
        if name not in COUNTERS:
            raise ValueError(f"{name!r} is not a canonical counter (one of {', '.join(COUNTERS)})")
    return v


@dataclass(frozen=True, kw_only=True)
class HitRate:
    """Prefix-cache hit rate = Δ(sum of numerator counters) / Δ(sum of denominator counters)."""

    numerator: tuple[str, ...] = spec(min_length=1, check=_counters_only)
    denominator: tuple[str, ...] = spec(min_length=1, check=_counters_only)
    formula: str = ""


def _known_canonical(v: dict[str, MetricMapping], _: object) -> dict[str, MetricMapping]:
    for name, mapping in v.items():
        if name not in _ALLOWED_KINDS:
            raise ValueError(f"unknown canonical metric {name!r} (known: {', '.join(CANONICAL)})")
        if mapping.kind not in _ALLOWED_KINDS[name]:
            allowed = ", ".join(sorted(_ALLOWED_KINDS[name]))
            raise ValueError(f"{name}: kind {mapping.kind!r} not allowed (use {allowed})")
    return v


@dataclass(frozen=True, kw_only=True)
class MetricsSpec:
    path: str = "/metrics"
    format: Literal["prometheus", "trtllm-json"] = "prometheus"
    # Needs an opt-in flag on the engine; shown when the endpoint is missing.
    enable_hint: str = ""
    # The label that names the served model; series of different models stay apart.
    model_label: str = ""
    # Labels that enumerate independent replicas of one model (data-parallel engines): their
    # series are combined with the mapping's ``aggregate`` (running/waiting/tokens: sum).
    replica_labels: tuple[str, ...] = ()
    # Labels that enumerate shards of one replica (TP/PP ranks): they report the same logical
    # value, so they are never summed; the largest is kept.
    shard_labels: tuple[str, ...] = ()
    # Whether this path needs the API key when the engine has one.
    requires_api_key: bool = False
    # Reading this path drains data (trtllm's JSON /metrics): never poll it by default.
    destructive: bool = False
    map: dict[str, MetricMapping] = spec(factory=dict, check=_known_canonical)
    prefix_hit_rate: HitRate | None = None

    def __post_init__(self) -> None:
        if self.prefix_hit_rate is not None:
            for name in (*self.prefix_hit_rate.numerator, *self.prefix_hit_rate.denominator):
                if name not in self.map:
                    raise ValueError(f"prefix_hit_rate uses {name!r}, which metrics.map does not define")


@dataclass(frozen=True, kw_only=True)
class HealthSpec:
    path: str = "/health"
    # What "still loading" looks like on the wire: "refused" (socket not listening) and/or "503".
    loading: tuple[Literal["refused", "503"], ...] = ("refused",)
    # 200 here (with at least one model) is the universal "ready" signal.
    ready_path: str = "/v1/models"
    version_path: str = ""
    # Dotted key of the version inside the JSON the version path returns.
    version_key: str = "version"


@dataclass(frozen=True, kw_only=True)
class ApiSpec:
    base_path: str = "/v1"
    # Path prefixes the API key guards ("*" = every path except ``auth_exempt``).
    auth_prefixes: tuple[str, ...] = ("/v1",)
    auth_exempt: tuple[str, ...] = ()
    # Engine-specific request fields to force an output length.
    supports_ignore_eos: bool = True
    supports_min_tokens: bool = True
    supports_continuous_usage: bool = False


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    image: str
    tag: str = "latest"
    port: int = spec(ge=1, le=65535)
    entrypoint: tuple[str, ...] = ()
    # Argument template. Placeholders: {model} {served_name} {port} {host} {tp} {max_model_len}
    # {extra}; an element that is exactly "{extra}" expands to the user's extra args.
    args: tuple[str, ...] = ()
    # How an API key is handed to the engine: an environment variable (kept out of `ps`) or args.
    api_key_env: str = ""
    api_key_args: tuple[str, ...] = ()
    ipc_mode: str = ""
    shm_size: str = ""
    ulimits: dict[str, int] = spec(factory=dict)
    model_cache: str = ""
    env_passthrough: tuple[str, ...] = ("HF_TOKEN",)
    env: dict[str, str] = spec(factory=dict)


@dataclass(frozen=True, kw_only=True)
class ProcessSpec:
    # Command template for a local process (same placeholders as container args).
    command: tuple[str, ...] = ()
    api_key_env: str = ""
    api_key_args: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EngineProfile:
    schema_version: int = spec(1, alias="schema")
    name: str = spec(pattern=r"^[a-z][a-z0-9_-]*$")
    display_name: str
    description: str = ""
    container: ContainerSpec
    process: ProcessSpec = ProcessSpec()
    health: HealthSpec = HealthSpec()
    api: ApiSpec = ApiSpec()
    metrics: MetricsSpec = MetricsSpec()
    # Where the profile came from (set by the loader, not by the file).
    source: str = ""

    def has(self, canonical: str) -> bool:
        return canonical in self.metrics.map

    def path_needs_key(self, path: str) -> bool:
        """Whether the engine checks the API key on ``path``."""
        if path == self.metrics.path:
            return self.metrics.requires_api_key
        if any(path == e or path.startswith(e.rstrip("*")) for e in self.api.auth_exempt):
            return False
        return any(p == "*" or path.startswith(p) for p in self.api.auth_prefixes)


def parse_profile(data: Mapping[str, Any], source: str) -> EngineProfile:
    """Validate one profile's TOML data; raise ConfigError(file, key, problem) on the first problem."""
    try:
        return validate(EngineProfile, {**data, "source": source})
    except Invalid as exc:
        raise ConfigError(source, exc.where, exc.msg) from None


def load_profile_file(path: Path) -> EngineProfile:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(str(path), "", "not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), "", f"invalid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses per nesting level
        raise ConfigError(str(path), "", "invalid TOML: nested too deeply") from None
    profile = parse_profile(data, str(path))
    if profile.name != path.stem:
        raise ConfigError(str(path), "name", f"is {profile.name!r} but the file is named {path.stem!r}.toml")
    return profile


def user_profile_dir() -> Path:
    from console.paths import config_dir

    return config_dir() / "engines"


def load_profiles(extra_dirs: Iterable[Path] = ()) -> dict[str, EngineProfile]:
    """Shipped profiles, then user overrides (same name replaces), then ``extra_dirs``."""
    dirs = [data_dir("engines"), user_profile_dir(), *extra_dirs]
    profiles: dict[str, EngineProfile] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for path in sorted(d.glob("*.toml")):
            p = load_profile_file(path)
            profiles[p.name] = p
    return profiles


@lru_cache(maxsize=1)
def _default_profiles() -> dict[str, EngineProfile]:
    return load_profiles()


def get_profile(name: str, profiles: Mapping[str, EngineProfile] | None = None) -> EngineProfile:
    """Look a profile up by name; unknown names are a one-line UserError listing known ones."""
    table = _default_profiles() if profiles is None else profiles
    try:
        return table[name]
    except KeyError:
        from console.errors import UserError

        known = ", ".join(sorted(table)) or "none"
        raise UserError(f"unknown engine profile {name!r} (known: {known})") from None


def clear_cache() -> None:
    _default_profiles.cache_clear()
