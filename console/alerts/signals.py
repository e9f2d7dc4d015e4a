"""The signals a rule may test: what each reads (its inputs), how it is computed, and its memory.

Each signal reads one engine's all-models total (``EngineSnapshot.total``) or the GPUs attributed
to it. ``inputs`` lists alternatives: the signal works on an engine whose profile maps every name
of one alternative (canonical metrics; ``gpu.*`` names are GPU fields, known only at run time).
An engine whose profile maps no alternative gets "n/a" for every rule on that signal, never "OK".

A value of ``None`` means no verdict now (not live, not enough history, too little traffic): the
evaluator neither enters nor leaves a state on it. Metric signals are ``None`` whenever the engine's
numbers are not live (stale, unreachable, loading), so a scrape loss cannot look like a stall.

Time comes only from the snapshots (``taken_at``); ``EngineMemory`` keeps what windows longer than
the telemetry's own (30 s growth, a 15-minute hit-rate baseline, SLO windows up to 6 h) need,
bounded by sampling them at most every ``SAMPLE_EVERY`` seconds.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from console.model import NOT_LIVE, EngineSnapshot, FleetSnapshot, GpuSnapshot, ModelMetrics, Phase

if TYPE_CHECKING:
    from console.profiles import EngineProfile

T = TypeVar("T")

# Prefix-hit baseline: the mean hit rate over BASELINE_S seconds that ended BASELINE_OFFSET_S ago
# (offset, so the drop itself does not pollute it), from samples that passed the traffic guard.
BASELINE_S = 900.0
BASELINE_OFFSET_S = 300.0
BASELINE_MIN_COVER_S = 450.0  # at least this much of the baseline window must have samples
MIN_PREFIX_TOKENS_PER_S = 50.0  # traffic guard: prefix lookups (or prompt tokens) per second
MIN_BASELINE_HIT = 0.10  # a baseline below this has nothing to drop from
RESTART_PAUSE_S = 300.0  # no prefix-hit verdict this long after the engine (re)became live
SAMPLE_EVERY = 10.0  # seconds between kept samples for the long windows
MAX_MEMORY_S = 6 * 3600 + 120.0
MIN_REQUESTS_FOR_RATIO = 5.0  # error ratio: requests finished in the 60 s window, at least
THROTTLE_REASONS = frozenset({"sw_thermal", "hw_thermal", "hw_slowdown", "hw_power_brake", "sw_power_cap"})
# Burn-rate windows; each needs at least max(60 s, a twelfth of it) of history before it has a value.
SLO_WINDOWS = {"5m": 300.0, "30m": 1800.0, "1h": 3600.0, "6h": 21600.0}
# Phases where the engine is meant not to answer (being started, loaded, stopped, or stopped).
# How a managed engine's run ended (console.lifecycle.state.ENDINGS) when nobody meant it to end.
UNINTENDED_ENDINGS = frozenset({"crashed", "failed", "gave-up"})
INTENDED_DOWN = frozenset({Phase.PULLING, Phase.CREATING, Phase.STARTING, Phase.LOADING, Phase.STOPPING,
                           Phase.EXITED, Phase.UNKNOWN})




def min_history_s(signal: str) -> float:
    """How long an engine's series must have been there before ``signal`` has a value (0: at once).

    The one definition of when a history-bound rule may fire: the console's evaluator holds back
    its verdict this long, and the exported Prometheus rules carry it as a guard
    (``console/alerts/export.py``), so neither fires before the other.
    """
    if signal.startswith("ttft_slo_burn_"):
        # A window may be shorter than asked while history builds up, not below a twelfth of it.
        return max(60.0, SLO_WINDOWS[signal.removeprefix("ttft_slo_burn_")] / 12.0)
    if signal == "prefix_hit_vs_baseline":
        # The baseline ends BASELINE_OFFSET_S ago and must cover BASELINE_MIN_COVER_S since the start.
        return max(RESTART_PAUSE_S, BASELINE_OFFSET_S + BASELINE_MIN_COVER_S)
    if signal == "waiting_growth_30s":
        return 30.0
    return 0.0


@dataclass(frozen=True, slots=True)
class Slo:
    ttft_s: float
    objective: float


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    inputs: tuple[tuple[str, ...], ...]  # alternatives; () = always available
    unit: str
    formula: str
    compute: Callable[[EngineMemory, Slo | None], float | None]
    needs_slo: bool = False
    # Compared with the rule's at_finish_value where the engine counts tokens at request ends.
    at_finish_sensitive: bool = False
    gpu: bool = False

    def available(self, profile: EngineProfile | None) -> bool:
        """Whether the engine's profile maps one alternative of inputs (GPU fields: always)."""
        if not self.inputs or self.gpu:
            return True
        if profile is None:
            return False
        mapped = set(profile.metrics.map)
        return any(all(n in mapped for n in alt) for alt in self.inputs)

    def inputs_for(self, profile: EngineProfile | None) -> tuple[str, ...]:
        """The alternative this engine uses (the first one its profile maps)."""
        if profile is not None:
            mapped = set(profile.metrics.map)
            for alt in self.inputs:
                if all(n in mapped for n in alt):
                    return alt
        return self.inputs[0] if self.inputs else ()


class EngineMemory:
    """What one engine's signals remember between snapshots."""

    def __init__(self) -> None:
        self.now = 0.0
        self.e: EngineSnapshot | None = None
        self.m: ModelMetrics | None = None
        self.gpus: tuple[GpuSnapshot, ...] = ()
        self.live = False
        self._waiting: deque[tuple[float, float]] = deque()
        self._gen_last: float | None = None
        self._gen_moved_at = 0.0
        self._queries: deque[tuple[float, float]] = deque()
        self._hits: deque[tuple[float, float]] = deque()  # (t, 60 s hit rate) with traffic
        self._live_since: float | None = None
        self._pids: tuple[int, ...] = ()
        self._ttft: deque[tuple[float, tuple[tuple[float, ...], tuple[float, ...]]]] = deque()
        self._xids: dict[int, tuple[int, ...]] = {}
        self.new_xids = 0
        self.ttft_snap_note = ""

    def observe(self, e: EngineSnapshot, fleet: FleetSnapshot, now: float) -> None:
        """Take one engine's snapshot at ``now`` (the fleet's time: a stalled collector's engine
        keeps its old ``taken_at``, and time must still pass for it)."""
        self.now, self.e = now, e
        self.live = e.live
        self.m = e.total if e.live else None
        self.gpus = tuple(g for g in fleet.gpus.gpus if g.index in e.gpus) if e.gpus else ()
        self._observe_xids()
        if not self.live:
            self._live_since = None
            self._gen_last = None
            return
        if self._live_since is None or (e.pids and self._pids and e.pids != self._pids):
            self._live_since = now  # (re)became live, or its processes changed: a restart
        self._pids = e.pids
        m = self.m
        assert m is not None
        if m.waiting is not None:
            _push(self._waiting, now, m.waiting, keep=120.0)
        gen = m.counters.get("generation_tokens")
        if gen is None or self._gen_last is None or gen != self._gen_last or not m.running:
            self._gen_moved_at = now
        self._gen_last = gen
        q = m.counters.get("prefix_queries")
        if q is not None:
            _push(self._queries, now, q, keep=120.0)
        rate = self._traffic()
        if m.prefix_hit_rate is not None and rate is not None and rate >= MIN_PREFIX_TOKENS_PER_S:
            _sample(self._hits, now, m.prefix_hit_rate, BASELINE_S + BASELINE_OFFSET_S + 60.0)
        if m.ttft_cumulative[0]:
            _sample(self._ttft, now, m.ttft_cumulative, MAX_MEMORY_S)

    def _observe_xids(self) -> None:
        new = 0
        for g in self.gpus:
            prev = self._xids.get(g.index)
            cur = g.xid_errors
            if prev is not None and cur != prev:
                new += max(1, len(cur) - len(prev))
            self._xids[g.index] = cur
        self.new_xids = new

    def _traffic(self) -> float | None:
        """Prefix lookups per second over 60 s (prompt tokens where the engine has only a gauge)."""
        m = self.m
        if m is None:
            return None
        if m.counters.get("prefix_queries") is not None and len(self._queries) >= 2:
            base = _at_or_before(self._queries, self.now - 60.0) or self._queries[0]
            t0, v0 = base
            t1, v1 = self._queries[-1]
            return (v1 - v0) / (t1 - t0) if t1 > t0 else None
        return m.prompt_tps.r60s

    # -- the computations -------------------------------------------------------------------------

    def waiting_growth(self, window: float) -> float | None:
        if self.m is None or self.m.waiting is None or not self._waiting:
            return None
        base = _at_or_before(self._waiting, self.now - window)
        return None if base is None else self.m.waiting - base[1]

    def decode_stalled_s(self) -> float | None:
        m = self.m
        if m is None or m.running is None or m.counters.get("generation_tokens") is None:
            return None
        return self.now - self._gen_moved_at if m.running > 0 else 0.0

    def prefix_hit_vs_baseline(self) -> float | None:
        m = self.m
        if m is None or m.prefix_hit_rate is None or self._live_since is None:
            return None
        if self.now - self._live_since < min_history_s("prefix_hit_vs_baseline"):
            return None
        rate = self._traffic()
        if rate is None or rate < MIN_PREFIX_TOKENS_PER_S:
            return None
        end = self.now - BASELINE_OFFSET_S
        start = end - BASELINE_S
        window = [v for t, v in self._hits if start <= t <= end and t >= self._live_since]
        times = [t for t, _ in self._hits if start <= t <= end and t >= self._live_since]
        if not window or times[-1] - times[0] < BASELINE_MIN_COVER_S:
            return None
        baseline = math.fsum(window) / len(window)
        if baseline < MIN_BASELINE_HIT:
            return None
        return m.prefix_hit_rate / baseline

    def ttft_burn(self, window_name: str, slo: Slo | None) -> float | None:
        if self.m is None or slo is None or not self._ttft:
            return None
        window = SLO_WINDOWS[window_name]
        t1, (bounds, cur) = self.now, self.m.ttft_cumulative
        base = _at_or_before(self._ttft, self.now - window) or self._ttft[0]
        t0, (b0, old) = base
        # The window may be shorter than asked while history builds up (as Prometheus' rate over
        # what exists), but not below a twelfth of it: a 6 h burn on one minute of data is noise.
        if t1 - t0 < min_history_s(f"ttft_slo_burn_{window_name}") or b0 != bounds:
            return None
        idx, snapped = snap_bound(bounds, slo.ttft_s)
        self.ttft_snap_note = "" if snapped == slo.ttft_s else (
            f"TTFT threshold {slo.ttft_s:g} s is not a bucket boundary; using {snapped:g} s")
        total = cur[-1] - old[-1]
        if total <= 0:
            return 0.0
        good = (cur[idx] - old[idx]) if idx >= 0 else 0.0
        bad = min(1.0, max(0.0, 1.0 - good / total))
        return bad / (1.0 - slo.objective)

    def error_ratio(self) -> float | None:
        m = self.m
        if m is None or m.request_rate.r60s is None or m.error_rate.r60s is None:
            return None
        if m.request_rate.r60s * 60.0 < MIN_REQUESTS_FOR_RATIO:
            return None
        return min(1.0, m.error_rate.r60s / m.request_rate.r60s)

    def scrape_failing(self) -> float | None:
        e = self.e
        if e is None:
            return None
        if e.phase in (Phase.UNREACHABLE, Phase.UNHEALTHY, Phase.FAILED):
            return 1.0
        if e.phase is Phase.EXITED and e.lifecycle is not None and e.lifecycle.ended in UNINTENDED_ENDINGS:
            return 1.0  # a managed engine that crashed or gave up is down, not stopped on purpose
        if e.phase in INTENDED_DOWN:
            return None
        if not e.reachable or e.metrics_freshness.stale:
            return 1.0
        return 0.0 if e.phase not in NOT_LIVE else None

    def gpu_max(self, field: str) -> float | None:
        vals = [v for g in self.gpus if (v := getattr(g, field)) is not None]
        return max(vals) if vals else None

    def gpu_throttled(self) -> float | None:
        known = [g.throttle_reasons for g in self.gpus if g.throttle_reasons is not None]
        if not known:
            return None
        return 1.0 if any(THROTTLE_REASONS.intersection(r) for r in known) else 0.0

    def gpu_new_xid(self) -> float | None:
        return float(self.new_xids) if self.gpus else None


def snap_bound(bounds: tuple[float, ...], t: float) -> tuple[int, float]:
    """The largest finite bucket bound at or below ``t`` (index, bound); (-1, 0.0) when none."""
    idx = -1
    for i, b in enumerate(bounds):
        if math.isfinite(b) and b <= t * (1 + 1e-9):
            idx = i
    return idx, (bounds[idx] if idx >= 0 else 0.0)


def _push(d: deque[tuple[float, float]], t: float, v: float, keep: float) -> None:
    d.append((t, v))
    while len(d) > 2 and d[1][0] <= t - keep:
        d.popleft()


def _sample(d: deque[tuple[float, T]], t: float, v: T, keep: float) -> None:
    """Keep one sample per SAMPLE_EVERY seconds (the current value is read from the snapshot)."""
    if d and t - d[-1][0] < SAMPLE_EVERY:
        return
    d.append((t, v))
    while len(d) > 2 and d[1][0] <= t - keep:
        d.popleft()


def _at_or_before(d: deque[tuple[float, T]], t: float) -> tuple[float, T] | None:
    """The newest entry taken at or before ``t``."""
    found: tuple[float, T] | None = None
    for entry in d:
        if entry[0] <= t:
            found = entry
        else:
            break
    return found


def _metric(fn: Callable[[ModelMetrics], float | None]) -> Callable[[EngineMemory, Slo | None], float | None]:
    return lambda mem, _slo: None if mem.m is None else fn(mem.m)


def _burn(window: str) -> Signal:
    return Signal(
        f"ttft_slo_burn_{window}", (("ttft",),), "x budget",
        f"(1 - Δttft_bucket{{le=T}} / Δttft_count over {window}) / (1 - objective); T snapped down to a "
        "bucket boundary", lambda mem, slo: mem.ttft_burn(window, slo), needs_slo=True)


SIGNALS: dict[str, Signal] = {s.name: s for s in (
    Signal("kv_usage", (("kv_usage",),), "fraction", "KV-cache usage, the fullest replica",
           _metric(lambda m: m.kv_usage)),
    Signal("waiting", (("waiting",),), "requests", "requests waiting (all models, all replicas)",
           _metric(lambda m: m.waiting)),
    Signal("running", (("running",),), "requests", "requests running", _metric(lambda m: m.running)),
    Signal("waiting_growth_30s", (("waiting",),), "requests", "waiting now - waiting 30 s ago",
           lambda mem, _s: mem.waiting_growth(30.0)),
    Signal("preemption_rate", (("preemptions",),), "1/s", "rate of the preemptions counter over 60 s",
           _metric(lambda m: m.preemption_rate.r60s)),
    Signal("decode_stalled_s", (("running", "generation_tokens"),), "s",
           "seconds with running > 0 and the generation-token counter unchanged",
           lambda mem, _s: mem.decode_stalled_s(), at_finish_sensitive=True),
    Signal("prefix_hit_vs_baseline", (("prefix_hits", "prefix_queries"), ("prefix_hit_rate_gauge", "prompt_tokens")),
           "ratio", f"60 s prefix hit rate / its mean over {BASELINE_S / 60:g} min ending "
           f"{BASELINE_OFFSET_S / 60:g} min ago; none below {MIN_PREFIX_TOKENS_PER_S:g} lookup tokens/s or for "
           f"{RESTART_PAUSE_S / 60:g} min after a restart", lambda mem, _s: mem.prefix_hit_vs_baseline()),
    *(_burn(w) for w in SLO_WINDOWS),
    Signal("error_ratio", (("requests_failed", "requests_finished"),), "fraction",
           f"failed / finished requests over 60 s (at least {MIN_REQUESTS_FOR_RATIO:g} requests)",
           lambda mem, _s: mem.error_ratio()),
    Signal("scrape_failing", (), "bool", "1 when the engine does not answer, its metrics cannot be read, "
           "or a managed engine crashed (not while it is started, loaded or stopped, nor after a stop)",
           lambda mem, _s: mem.scrape_failing()),
    Signal("gpu_new_xid", (("gpu.xid_errors",),), "events", "XID events new since the last snapshot, the "
           "engine's GPUs", lambda mem, _s: mem.gpu_new_xid(), gpu=True),
    Signal("gpu_temperature_c", (("gpu.temperature_c",),), "°C", "the hottest of the engine's GPUs",
           lambda mem, _s: mem.gpu_max("temperature_c"), gpu=True),
    Signal("gpu_util_percent", (("gpu.util_percent",),), "%", "the busiest of the engine's GPUs (SM util)",
           lambda mem, _s: mem.gpu_max("util_percent"), gpu=True),
    Signal("gpu_throttle_active", (("gpu.throttle_reasons",),), "bool",
           "1 when a thermal or power throttle reason is active on one of the engine's GPUs",
           lambda mem, _s: mem.gpu_throttled(), gpu=True),
)}
