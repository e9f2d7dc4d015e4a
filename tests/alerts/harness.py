"""A simulated engine on a virtual clock, seen through the console's own telemetry and alerts.

The simulator's scheduler and metrics flavour (console/sim) run with a clock the test owns; each
scrape renders the flavour's exposition with prometheus_client, as the simulator serves it, and the
console's normaliser and windows read it (console/telemetry), so an alert scenario of 20 virtual
minutes takes well under a second of CPU. What a scenario changes is a harness knob (freeze decode,
flush the prefix cache on every step, fail scrapes, answer errors): the console cannot see those,
only their effects on the engine's metrics.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import generate_latest

from console.alerts.evaluate import AlertEvaluator
from console.alerts.rules import Rule, load_rules
from console.model import (
    Alert,
    AlertState,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuSnapshot,
    Phase,
    SourceState,
)
from console.profiles import load_profiles
from console.sim.engines import make_flavour
from console.sim.engines.base import SimOptions
from console.sim.scheduler import Request
from console.telemetry.gpu.simgpu import SimulatedGpus
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState

T0 = 1_800_000_000.0  # virtual wall clock start


@dataclass
class Knobs:
    rate: float = 0.5  # requests per second (Poisson)
    prompt: int = 256  # prompt tokens, of which `shared` are one common prefix
    shared: int = 192
    max_tokens: int = 64
    freeze: bool = False  # decode frozen: the scheduler does not step
    flush_cache: bool = False  # the prefix cache is emptied before every step
    scrape_fails: bool = False  # the metrics endpoint does not answer
    error_fraction: float = 0.0  # fraction of arrivals the engine aborts


@dataclass
class Transition:
    t: float
    rule: str
    state: AlertState


@dataclass(frozen=True)
class Truth:
    """What the simulator itself knows at a scrape (its scheduler and event tallies), not what the
    console reads: scenario tests judge the alerts against it."""

    t: float
    kv: float
    waiting: int
    running: int
    preemptions: int
    errors: int  # requests the engine aborted
    finished: int  # finished for any reason, aborts included
    generated: int
    scraped: bool
    prefix_hits: int
    prefix_queries: int


@dataclass
class VirtualEngine:
    engine: str = "vllm"
    seed: int = 0
    kv_blocks: int | None = None
    max_running: int | None = None
    scrape_every: float = 1.0
    # Below 1 the simulated GPU is slower (longer steps, fewer of them): less CPU per virtual second.
    speed: float = 0.25
    knobs: Knobs = field(default_factory=Knobs)
    rules: tuple[Rule, ...] | None = None
    gpus: int = 0  # simulated GPUs the engine holds (0: none, its GPU rules are n/a)

    def __post_init__(self) -> None:
        self.fl = make_flavour(SimOptions(self.engine, "sim-model", seed=self.seed, kv_blocks=self.kv_blocks,
                                          max_running=self.max_running, speed=self.speed))
        self.profile = load_profiles()[self.engine]
        self.state = EngineMetricsState(self.profile)
        self.evaluator = AlertEvaluator(self.rules if self.rules is not None else load_rules(user=False),
                                        {self.engine: self.profile})
        self.rng = random.Random(self.seed)
        self.t = T0
        self._next_arrival = T0
        self._busy_until = T0
        self._req_no = 0
        self.snap: EngineSnapshot = EngineSnapshot(name=self.engine, profile=self.engine, url="http://127.0.0.1:1",
                                                   taken_at=T0)
        self.alerts: tuple[Alert, ...] = ()
        self.transitions: list[Transition] = []
        self._states: dict[str, AlertState] = {}
        self.truth: list[Truth] = []
        self.nominal = T0  # scrape times: exact multiples of scrape_every (a step may end a little later)
        # Raw samples of these families at each scrape ((name, labels) -> value), for promtool tests.
        self.record: tuple[str, ...] = ()
        self.raw: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
        self.simgpus = SimulatedGpus(self.gpus, {self.engine: tuple(range(self.gpus))}) if self.gpus else None
        self.pids: tuple[int, ...] = (4242,)
        self.gpu_history: list[GpuSnapshot | None] = []  # GPU 0 at each scrape

    # -- the engine ----------------------------------------------------------------------------

    def _arrive(self, now: float) -> None:
        k = self.knobs
        while self._next_arrival <= now:
            at = self._next_arrival
            self._next_arrival += self.rng.expovariate(k.rate) if k.rate > 0 else 1e9
            self._req_no += 1
            shared = list(range(1, k.shared + 1))
            own = [self.rng.randrange(1000, 30000) for _ in range(k.prompt - k.shared)]
            req = Request(id=f"r{self._req_no}", prompt_ids=shared + own, max_tokens=k.max_tokens,
                          eos_len=10_000, ignore_eos=True, arrival=at)
            self.fl.scheduler.add(req, at)
            if k.error_fraction and self.rng.random() < k.error_fraction:
                # The engine gives up on it (vLLM counts it as finished_reason="abort").
                self.fl.scheduler.abort(req, at)

    def advance(self, until: float) -> None:
        """Run the engine up to virtual time ``until`` (a step in flight may end a little later)."""
        sched = self.fl.scheduler
        while self.t < until:
            self._arrive(self.t)
            if self.knobs.freeze or sched.idle:
                self.t = min(until, self._next_arrival)
                continue
            if self.knobs.flush_cache:
                sched.pool.reset_cache()
            out = sched.step(self.t)
            self.t = out.end if out is not None else min(until, self._next_arrival)

    # -- the console's view ----------------------------------------------------------------------

    def scrape(self) -> EngineSnapshot:
        now = self.nominal
        prev = self.snap
        if self.knobs.scrape_fails:
            if self.record:
                self.raw.append({})
            self.snap = EngineSnapshot(
                name=prev.name, profile=prev.profile, url=prev.url, taken_at=now, phase=Phase.UNREACHABLE,
                reachable=False, health_detail="connection timed out", total=prev.total, models=prev.models,
                metrics_freshness=Freshness(SourceState.STALE, prev.metrics_freshness.updated_at,
                                            prev.metrics_freshness.stale_since or now, "timed out"))
            return self.snap
        if self.fl.metrics_mount == "custom":  # TGI, llama.cpp: the engine's own text
            body = self.fl.render_metrics("").body
            text = body if isinstance(body, bytes) else b""
        else:
            text = generate_latest(self.fl.metrics_registry())
        reading = normalize(self.profile, text, full=bool(self.record))
        if self.record:
            self.raw.append({(r.name, r.labels): r.value for r in reading.raw if r.name.startswith(self.record)})
        self.state.ingest(now, reading)
        models, total = self.state.metrics()
        self.snap = EngineSnapshot(name=prev.name, profile=prev.profile, url=prev.url, taken_at=now,
                                   phase=Phase.READY, reachable=True, metrics_freshness=Freshness(updated_at=now),
                                   health_freshness=Freshness(updated_at=now), models=models, total=total,
                                   pids=self.pids, gpus=tuple(range(self.gpus)))
        return self.snap

    def tick(self) -> tuple[Alert, ...]:
        """Advance one scrape period, scrape, evaluate; record state changes."""
        self.nominal += self.scrape_every
        self.advance(self.nominal)
        e = self.scrape()
        sched, c = self.fl.scheduler, self.fl.c
        self.truth.append(Truth(self.nominal, sched.kv_usage, len(sched.waiting), len(sched.running), c.preemptions,
                                c.aborted, c.finished + c.aborted, c.gen_live, not self.knobs.scrape_fails,
                                c.prefix_hits, c.prefix_queries))
        now = self.nominal
        fleet = FleetSnapshot(taken_at=now, engines=(e,))
        if self.simgpus is not None:
            fleet = FleetSnapshot(taken_at=now, engines=(e,), gpus=self.simgpus.step(now, (e,)))
        self.fleet = fleet
        self.gpu_history.append(fleet.gpus.gpus[0] if fleet.gpus.gpus else None)
        self.alerts = self.evaluator.evaluate(fleet)
        for a in self.alerts:
            if self._states.get(a.rule) is not a.state:
                self._states[a.rule] = a.state
                self.transitions.append(Transition(now, a.rule, a.state))
        return self.alerts

    def run(self, seconds: float, until: Callable[[VirtualEngine], bool] | None = None) -> float:
        """Tick for ``seconds`` (or until ``until`` holds); returns the virtual time reached."""
        end = self.nominal + seconds
        while self.nominal < end - 1e-9:
            self.tick()
            if until is not None and until(self):
                break
        return self.nominal

    def alert(self, rule: str) -> Alert:
        return next(a for a in self.alerts if a.rule == rule)

    def times(self, rule: str, state: AlertState) -> list[float]:
        return [tr.t for tr in self.transitions if tr.rule == rule and tr.state is state]

    def firing(self) -> list[str]:
        return [a.rule for a in self.alerts if a.state is AlertState.FIRING]

    def truth_rate(self, attr: str, window: float = 60.0) -> list[tuple[float, float]]:
        """(t, per-second increase of a Truth tally over ``window``) at every scrape."""
        out = []
        for i, tr in enumerate(self.truth):
            base = next((b for b in reversed(self.truth[:i]) if b.t <= tr.t - window), self.truth[0])
            dt = tr.t - base.t
            out.append((tr.t, (getattr(tr, attr) - getattr(base, attr)) / dt if dt > 0 else 0.0))
        return out
