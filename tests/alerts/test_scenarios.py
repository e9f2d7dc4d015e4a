"""Each rule fires in a simulator scenario within its hold time plus 2 scrapes and resolves after
its hysteresis, once (no flapping); a healthy simulator at idle and at moderate load fires nothing
for 10 minutes. The engines are the simulator's scheduler and metrics flavours on a virtual clock,
read through the console's telemetry (tests/alerts/harness.py); the times to beat come from the
simulator's own state (``Truth``), not from what the console read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from console.alerts.rules import Rule, load_rules
from console.model import AlertState
from tests.alerts.harness import Knobs, Truth, VirtualEngine

RULES = {r.id: r for r in load_rules(user=False)}


def first(v: VirtualEngine, after: float, cond: Callable[[Truth], bool]) -> float:
    """The first scrape at or after ``after`` where the simulator's own state satisfies ``cond``."""
    return next(tr.t for tr in v.truth if tr.t >= after and cond(tr))


def first_rate(v: VirtualEngine, after: float, attr: str, cond: Callable[[float], bool]) -> float:
    return next(t for t, r in v.truth_rate(attr) if t >= after and cond(r))


def check_fired(v: VirtualEngine, rule: Rule, t_true: float) -> float:
    """Fired exactly once, within ``for`` + 2 scrapes of its condition being true in the simulator."""
    fired = v.times(rule.id, AlertState.FIRING)
    assert len(fired) == 1, f"{rule.id} fired {len(fired)} times: {v.transitions}"
    # A step in flight may end a scrape a few milliseconds late; one scrape of slack below.
    assert t_true + rule.for_s - v.scrape_every <= fired[0] <= t_true + rule.for_s + 2 * v.scrape_every + 0.5, (
        rule.id, fired[0] - t_true)
    return fired[0]


def check_resolved(v: VirtualEngine, rule: Rule, t_clear: float) -> float:
    resolved = v.times(rule.id, AlertState.RESOLVED)
    assert len(resolved) == 1, f"{rule.id} resolved {len(resolved)} times: {v.transitions}"
    late = t_clear + rule.clear_for + 2 * v.scrape_every + 0.5
    assert t_clear + rule.clear_for - v.scrape_every <= resolved[0] <= late, (rule.id, resolved[0] - t_clear)
    return resolved[0]


def healthy(v: VirtualEngine, seconds: float = 120.0) -> float:
    v.run(seconds)
    assert v.firing() == [], v.firing()
    return v.nominal


def steady(v: VirtualEngine, after: float, cond: Callable[[Truth], bool], hold: float,
           enter: Callable[[Truth], bool] | None = None) -> float:
    """The first scrape from which ``cond`` holds in the simulator for ``hold`` seconds on end
    (and ``enter`` held at its start)."""
    run_from: float | None = None
    for tr in v.truth:
        if tr.t < after:
            continue
        if not cond(tr):
            run_from = None
            continue
        if run_from is None and (enter is None or enter(tr)):
            run_from = tr.t
        if run_from is not None and tr.t - run_from >= hold - 1e-6:
            return run_from
    raise AssertionError("never steady")


def steady_rate(v: VirtualEngine, after: float, attr: str, cond: Callable[[float], bool], hold: float) -> float:
    run_from: float | None = None
    for t, r in v.truth_rate(attr):
        if t < after:
            continue
        if not cond(r):
            run_from = None
            continue
        run_from = t if run_from is None else run_from
        if t - run_from >= hold - 1e-6:
            return run_from
    raise AssertionError("never steady")


@pytest.fixture(scope="module")
def kv_fill() -> tuple[VirtualEngine, float, float]:
    """A small KV pool, then 6 minutes of long requests arriving faster than it holds, then a trickle."""
    v = VirtualEngine("vllm", kv_blocks=256, scrape_every=5.0, knobs=Knobs(rate=0.25, max_tokens=64))
    t0 = healthy(v, 60)
    v.knobs.rate, v.knobs.max_tokens = 1.5, 256
    v.run(360)
    v.knobs.rate, v.knobs.max_tokens = 0.1, 32
    t1 = v.nominal
    v.run(660)
    return v, t0, t1


def test_kv_fill_fires_kv_saturated_then_resolves(kv_fill: tuple[VirtualEngine, float, float]) -> None:
    v, t0, t1 = kv_fill
    rule = RULES["kv_saturated_queue_growing"]

    def grows(tr: Truth) -> bool:
        before = [b.waiting for b in v.truth if b.t <= tr.t - 30]
        return bool(before) and tr.kv >= 0.95 and tr.waiting > before[-1]

    check_fired(v, rule, steady(v, t0, lambda tr: tr.kv >= 0.90 and tr.waiting > 0, rule.for_s, enter=grows))
    check_resolved(v, rule, steady(v, t1, lambda tr: tr.kv < 0.90 or tr.waiting == 0, rule.clear_for))


@pytest.mark.parametrize("rid", ["preempting", "preemption_storm"])
def test_preemption_burst_fires_and_resolves(kv_fill: tuple[VirtualEngine, float, float], rid: str) -> None:
    v, t0, t1 = kv_fill
    rule = RULES[rid]
    fire_at, clear_at = rule.when[0].value, rule.when[0].threshold(True, False)
    check_fired(v, rule, steady_rate(v, t0, "preemptions", lambda r: r > fire_at, rule.for_s))
    check_resolved(v, rule, steady_rate(v, t1, "preemptions", lambda r: r <= clear_at, rule.clear_for))


def test_the_kv_fill_does_not_fire_the_rules_of_other_troubles(kv_fill: tuple[VirtualEngine, float, float]) -> None:
    v, _, _ = kv_fill
    fired = {tr.rule for tr in v.transitions if tr.state is AlertState.FIRING}
    assert not fired & {"decode_stall", "unreachable", "error_rate_high", "error_rate_elevated", "prefix_hit_drop"}


def test_queue_ramp_fires_queue_buildup_not_kv() -> None:
    """Running capped at 2: arrivals above capacity queue up with the KV cache nearly empty."""
    v = VirtualEngine("vllm", max_running=2, scrape_every=5.0, knobs=Knobs(rate=0.2, max_tokens=64))
    t0 = healthy(v, 60)
    v.knobs.rate = 1.2
    v.run(420)
    v.knobs.rate = 0.1
    t1 = v.nominal
    v.run(480)
    rule = RULES["queue_buildup"]
    check_fired(v, rule, steady(v, t0, lambda tr: tr.waiting > 40, rule.for_s, enter=lambda tr: tr.waiting > 50))
    check_resolved(v, rule, steady(v, t1, lambda tr: tr.waiting <= 40, rule.clear_for))
    assert not v.times("kv_saturated_queue_growing", AlertState.FIRING)


def ttft_burn_truth(v: VirtualEngine, window: float, slo_s: float, objective: float) -> list[tuple[float, float]]:
    """(t, burn rate over ``window``) from the simulator's own per-request first-token times."""
    done = [(r["first_token"], r["ttft"]) for r in v.fl.recent if r["first_token"] is not None]
    out = []
    for tr in v.truth:
        inside = [ttft for ft, ttft in done if tr.t - window < ft <= tr.t]
        bad = sum(1 for x in inside if x > slo_s) / len(inside) if inside else 0.0
        out.append((tr.t, bad / (1 - objective)))
    return out


def test_kv_fill_burns_the_ttft_slo_fast_and_it_resolves(kv_fill: tuple[VirtualEngine, float, float]) -> None:
    v, _, t1 = kv_fill
    rule = RULES["ttft_slo_burn_fast"]
    assert rule.slo is not None
    fired = v.times(rule.id, AlertState.FIRING)
    resolved = v.times(rule.id, AlertState.RESOLVED)
    assert len(fired) == 1 and len(resolved) == 1, v.transitions
    short = dict(ttft_burn_truth(v, 300, rule.slo.ttft_s, rule.slo.objective))
    long = dict(ttft_burn_truth(v, 3600, rule.slo.ttft_s, rule.slo.objective))
    # The burn is visible in the simulator's own TTFTs when it fires (its 1 h window needs 5 min of
    # history first: signals.py), and below the threshold on the short window for clear_for before
    # it resolves (a request counts at its first token there, at its finish in the histogram: one
    # scrape of slack).
    assert long[fired[0]] > 14.4 and short[fired[0]] > 14.4
    assert fired[0] >= v.truth[0].t + 300 - v.scrape_every
    calm = steady(v, t1, lambda tr: short[tr.t] <= 14.4, rule.clear_for)
    assert calm + rule.clear_for - v.scrape_every <= resolved[0] <= calm + rule.clear_for + 2 * v.scrape_every + 0.5


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_decode_freeze_fires_decode_stall_and_resolves(engine: str) -> None:
    """vLLM counts tokens every step: stalled after 10 s. SGLang counts them when a request ends: the
    rule's at_finish_value (120 s) applies, so a freeze shorter than that is no alert there."""
    rule = RULES["decode_stall"]
    v = VirtualEngine(engine, scrape_every=2.0, knobs=Knobs(rate=0.3, max_tokens=64))
    healthy(v, 60)
    v.run(60, until=lambda v: v.truth[-1].running > 0)
    v.knobs.freeze = True
    t_freeze = v.nominal
    v.run(60)
    fired = v.times(rule.id, AlertState.FIRING)
    if engine == "sglang":
        assert fired == [], "a 60 s freeze fired on an engine that counts tokens at request ends"
        v.run(90)
        threshold = rule.when[0].at_finish_value
    else:
        threshold = rule.when[0].value
    assert threshold is not None
    v.knobs.freeze = False
    t_thaw = v.nominal
    v.run(40)
    # Frozen from t_freeze: the counter last moved at the scrape before, so it is "stalled" for the
    # threshold from there at the latest.
    check_fired(v, rule, t_freeze + threshold - v.scrape_every)
    check_resolved(v, rule, first(v, t_thaw, lambda tr: tr.generated > 0) + v.scrape_every)


def test_scrape_loss_fires_unreachable_and_resolves() -> None:
    rule = RULES["unreachable"]
    v = VirtualEngine("vllm", scrape_every=2.0, knobs=Knobs(rate=0.3, max_tokens=64))
    healthy(v, 60)
    v.knobs.scrape_fails = True
    v.run(60)
    v.knobs.scrape_fails = False
    v.run(40)
    lost = first(v, 0, lambda tr: not tr.scraped)
    check_fired(v, rule, lost)
    check_resolved(v, rule, first(v, lost, lambda tr: tr.scraped))
    # Stale numbers are no verdict: a scrape loss fires nothing else.
    assert {tr.rule for tr in v.transitions if tr.state is AlertState.FIRING} == {"unreachable"}


def test_error_burst_fires_error_rate_and_resolves() -> None:
    rule = RULES["error_rate_high"]
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.5, max_tokens=64))
    t0 = healthy(v, 90)
    v.knobs.error_fraction = 0.3
    v.run(200)
    v.knobs.error_fraction = 0.0
    t1 = v.nominal
    v.run(200)

    def ratio(tr: Truth) -> float:
        base = next((b for b in reversed(v.truth) if b.t <= tr.t - 60), v.truth[0])
        n = tr.finished - base.finished
        return (tr.errors - base.errors) / n if n else 0.0

    check_fired(v, rule, steady(v, t0, lambda tr: ratio(tr) > 0.03, rule.for_s, enter=lambda tr: ratio(tr) > 0.05))
    check_resolved(v, rule, steady(v, t1, lambda tr: ratio(tr) <= 0.03, rule.clear_for))


def hit_rate_truth(v: VirtualEngine) -> dict[float, float | None]:
    """The simulator's own 60 s prefix hit rate over its baseline (mean over 15 min ending 5 min ago)."""
    rates: list[tuple[float, float]] = []
    for i, tr in enumerate(v.truth):
        base = next((b for b in reversed(v.truth[:i]) if b.t <= tr.t - 60), v.truth[0])
        q = tr.prefix_queries - base.prefix_queries
        if q > 0:
            rates.append((tr.t, (tr.prefix_hits - base.prefix_hits) / q))
    out: dict[float, float | None] = {}
    for t, r in rates:
        window = [x for u, x in rates if t - 1200 <= u <= t - 300]
        out[t] = r / (sum(window) / len(window)) if window else None
    return out


@pytest.fixture(scope="module")
def cache_flush() -> tuple[VirtualEngine, float, float]:
    """Shared-prefix load for 13 minutes (baseline), the prefix cache flushed before every engine
    step for 5 minutes (only blocks of running requests survive), then left alone."""
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.4, max_tokens=12))
    healthy(v, 780)
    v.knobs.flush_cache = True
    t0 = v.nominal
    v.run(300)
    v.knobs.flush_cache = False
    t1 = v.nominal
    v.run(300)
    return v, t0, t1


def test_cache_flush_fires_prefix_hit_drop_and_resolves(cache_flush: tuple[VirtualEngine, float, float]) -> None:
    v, t0, t1 = cache_flush
    rule = RULES["prefix_hit_drop"]
    ratio = hit_rate_truth(v)
    check_fired(v, rule, steady(v, t0, lambda tr: (ratio.get(tr.t) or 1.0) < 0.7, rule.for_s,
                                enter=lambda tr: (ratio.get(tr.t) or 1.0) < 0.5))
    check_resolved(v, rule, steady(v, t1, lambda tr: (ratio.get(tr.t) or 0.0) >= 0.7, rule.clear_for))


def test_prefix_hit_drop_waits_after_a_restart_and_needs_traffic() -> None:
    """The same flush right after a restart (new processes), or under a trickle of traffic, is no verdict."""
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.4, max_tokens=12))
    healthy(v, 780)
    v.pids = (4343,)  # restarted
    v.knobs.flush_cache = True
    v.run(240)
    assert v.alert("prefix_hit_drop").state is AlertState.NO_DATA
    assert not v.times("prefix_hit_drop", AlertState.PENDING)
    quiet = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.1, max_tokens=12))  # 26 lookup tokens/s
    healthy(quiet, 780)
    quiet.knobs.flush_cache = True
    quiet.run(240)
    assert quiet.alert("prefix_hit_drop").state is AlertState.NO_DATA
    assert not quiet.times("prefix_hit_drop", AlertState.PENDING)


def test_gpu_faults_fire_xid_heat_and_throttle_and_resolve() -> None:
    v = VirtualEngine("vllm", scrape_every=2.0, gpus=1, knobs=Knobs(rate=1.0, max_tokens=64))
    assert v.simgpus is not None
    t0 = healthy(v, 60)
    faults = v.simgpus.faults
    faults.xid(0, 79)
    v.run(10)
    check_fired(v, RULES["gpu_xid"], t0 + v.scrape_every)
    v.run(300)
    check_resolved(v, RULES["gpu_xid"], t0 + v.scrape_every * 2)
    t_heat = v.nominal
    faults.extra_heat_c[0] = 55.0
    v.run(240)
    faults.extra_heat_c[0] = 0.0
    t_cool = v.nominal
    v.run(300)
    temps = {tr.t: (g.temperature_c if g is not None else None) for tr, g in zip(v.truth, v.gpu_history, strict=True)}
    hot = RULES["gpu_hot"]
    check_fired(v, hot, steady(v, t_heat, lambda tr: (temps[tr.t] or 0) >= 80, hot.for_s,
                               enter=lambda tr: (temps[tr.t] or 0) >= 85))
    check_resolved(v, hot, steady(v, t_cool, lambda tr: (temps[tr.t] or 0) < 80, hot.clear_for))
    t_thr = v.nominal
    faults.throttle[0] = ("sw_power_cap",)
    v.run(120)
    faults.throttle[0] = ()
    t_free = v.nominal
    v.run(120)
    thr = RULES["gpu_throttled"]
    check_fired(v, thr, t_thr + v.scrape_every)
    check_resolved(v, thr, t_free + v.scrape_every)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "tgi", "llamacpp"])
@pytest.mark.parametrize("rate", [0.0, 0.6], ids=["idle", "moderate"])
def test_a_healthy_simulator_fires_nothing_in_10_minutes(engine: str, rate: float) -> None:
    """10 minutes of virtual time at idle and at moderate load (about half the simulated engine's
    throughput at these request sizes), on one GPU: no alert even pending."""
    v = VirtualEngine(engine, scrape_every=5.0, gpus=1, knobs=Knobs(rate=rate, max_tokens=64))
    v.run(600)
    assert v.nominal - v.truth[0].t >= 595
    active = [tr for tr in v.transitions if tr.state in (AlertState.PENDING, AlertState.FIRING)]
    assert active == [], active
    if rate:
        assert v.truth[-1].generated > 0 or engine != "vllm"


def error_ratio_truth(v: VirtualEngine) -> Callable[[Truth], float]:
    def ratio(tr: Truth) -> float:
        base = next((b for b in reversed(v.truth) if b.t <= tr.t - 60), v.truth[0])
        n = tr.finished - base.finished
        return (tr.errors - base.errors) / n if n else 0.0

    return ratio


def test_a_steady_trickle_of_errors_fires_error_rate_elevated_and_resolves() -> None:
    """4% of requests aborted for 13 minutes: above 1% for the rule's 10 minutes."""
    rule = RULES["error_rate_elevated"]
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=2.0, max_tokens=16))
    t0 = healthy(v, 60)
    v.knobs.error_fraction = 0.04
    v.run(780)
    v.knobs.error_fraction = 0.0
    t1 = v.nominal
    v.run(240)
    ratio = error_ratio_truth(v)
    check_fired(v, rule, steady(v, t0, lambda tr: ratio(tr) > 0.005, rule.for_s, enter=lambda tr: ratio(tr) > 0.01))
    check_resolved(v, rule, steady(v, t1, lambda tr: ratio(tr) <= 0.005, rule.clear_for))


def test_a_queue_after_half_an_hour_burns_the_ttft_slo_slowly_and_it_resolves() -> None:
    """30 calm minutes (the 6 h window needs a twelfth of itself), then 5 minutes of queueing: most
    first tokens miss 2.5 s, 6x the budget over both windows; it resolves once the 30 min window calms."""
    rule = RULES["ttft_slo_burn_slow"]
    assert rule.slo is not None
    v = VirtualEngine("vllm", max_running=2, scrape_every=10.0, knobs=Knobs(rate=0.2, max_tokens=64))
    healthy(v, 1800)
    v.knobs.rate = 1.2
    v.run(300)
    v.knobs.rate = 0.1
    t1 = v.nominal
    v.run(2400)
    fired = v.times(rule.id, AlertState.FIRING)
    resolved = v.times(rule.id, AlertState.RESOLVED)
    assert len(fired) == 1 and len(resolved) == 1, v.transitions
    long = dict(ttft_burn_truth(v, 21600, rule.slo.ttft_s, rule.slo.objective))
    short = dict(ttft_burn_truth(v, 1800, rule.slo.ttft_s, rule.slo.objective))
    assert long[fired[0]] > 6 and short[fired[0]] > 6
    # Fired at the first scrape where the simulator's own TTFTs burn 6x over both windows (one
    # scrape of slack: the histogram counts a request at its first token, the record at its end).
    first_burn = next(t for t in sorted(long) if long[t] > 6 and short[t] > 6)
    assert first_burn - v.scrape_every <= fired[0] <= first_burn + 2 * v.scrape_every
    calm = steady(v, t1, lambda tr: short[tr.t] <= 6 or long[tr.t] <= 6, rule.clear_for)
    assert calm + rule.clear_for - v.scrape_every <= resolved[0] <= calm + rule.clear_for + 2 * v.scrape_every


# Which scenario above exercises each shipped rule (a new rule without one fails the test below).
SCENARIO_OF = {
    "kv_saturated_queue_growing": "test_kv_fill_fires_kv_saturated_then_resolves",
    "preempting": "test_preemption_burst_fires_and_resolves",
    "preemption_storm": "test_preemption_burst_fires_and_resolves",
    "queue_buildup": "test_queue_ramp_fires_queue_buildup_not_kv",
    "prefix_hit_drop": "test_cache_flush_fires_prefix_hit_drop_and_resolves",
    "decode_stall": "test_decode_freeze_fires_decode_stall_and_resolves",
    "ttft_slo_burn_fast": "test_kv_fill_burns_the_ttft_slo_fast_and_it_resolves",
    "ttft_slo_burn_slow": "test_a_queue_after_half_an_hour_burns_the_ttft_slo_slowly_and_it_resolves",
    "unreachable": "test_scrape_loss_fires_unreachable_and_resolves",
    "error_rate_high": "test_error_burst_fires_error_rate_and_resolves",
    "error_rate_elevated": "test_a_steady_trickle_of_errors_fires_error_rate_elevated_and_resolves",
    "gpu_xid": "test_gpu_faults_fire_xid_heat_and_throttle_and_resolve",
    "gpu_hot": "test_gpu_faults_fire_xid_heat_and_throttle_and_resolve",
    "gpu_throttled": "test_gpu_faults_fire_xid_heat_and_throttle_and_resolve",
}


def test_every_shipped_rule_has_a_scenario() -> None:
    assert set(SCENARIO_OF) == set(RULES)
    assert all(callable(globals().get(name)) for name in SCENARIO_OF.values())
