"""Rules files: validated with one-line errors (file, key, problem), user overrides by id; the
state machine's hysteresis (no flapping under noise) and n/a for engines that lack the inputs."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

from console.alerts.evaluate import AlertEvaluator, counts, worst
from console.alerts.rules import load_rules, parse_rules
from console.errors import ConfigError
from console.model import AlertState, EngineSnapshot, FleetSnapshot, Freshness, ModelMetrics, Phase
from console.profiles import load_profiles

GOOD = {"summary": "s", "severity": "warning", "when": [{"signal": "waiting", "op": ">", "value": 5}]}


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ({**GOOD, "severity": "loud"}, "rules.r.severity", "critical"),
        ({**GOOD, "when": [{"signal": "wating", "op": ">", "value": 5}]}, "rules.r.when.0.signal", "unknown signal"),
        ({**GOOD, "when": [{"signal": "waiting", "op": ">", "value": 5, "clear": 9}]}, "rules.r.when.0",
         "resolved side"),
        ({**GOOD, "for": -1}, "rules.r.for", "greater than or equal"),
        ({**GOOD, "colour": "red"}, "rules.r.colour", "unknown key"),
        ({k: v for k, v in GOOD.items() if k != "summary"}, "rules.r.summary", "required key is missing"),
        ({**GOOD, "when": [{"signal": "ttft_slo_burn_1h", "op": ">", "value": 14.4}]}, "rules.r", "slo"),
        ({**GOOD, "when": [{"signal": "waiting", "op": ">", "value": 5, "enter_only": True}]}, "rules.r",
         "never resolve"),
    ],
)
def test_a_bad_rule_is_one_line_with_file_key_and_problem(body: dict[str, object], key: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rules({"schema": 1, "rules": {"r": body}}, "my.toml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith(f"my.toml: {key}") and problem in msg, msg


def test_user_files_change_a_shipped_rule_by_id_add_rules_and_switch_them_off(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(
        "[rules.queue_buildup]\nfor = 600\n[rules.preempting]\nenabled = false\n"
        '[rules.my_queue]\nsummary = "q"\nseverity = "info"\nwhen = [{ signal = "waiting", op = ">", value = 5 }]\n')
    rules = {r.id: r for r in load_rules([tmp_path], user=False)}
    assert rules["queue_buildup"].for_s == 600 and rules["queue_buildup"].when[0].value == 50
    assert "preempting" not in rules and rules["my_queue"].severity == "info"
    (tmp_path / "mine.toml").write_text("[rules.queue_buildup]\nfor = 'soon'\n")
    with pytest.raises(ConfigError) as info:
        load_rules([tmp_path], user=False)
    assert str(info.value).startswith(f"{tmp_path / 'mine.toml'}: rules.queue_buildup.for")


def _engine(t: float, profile: str = "vllm", **m: float) -> EngineSnapshot:
    return EngineSnapshot(name="e", profile=profile, url="http://127.0.0.1:1", taken_at=t, phase=Phase.READY,
                          reachable=True, metrics_freshness=Freshness(updated_at=t),
                          total=ModelMetrics(model="m", **m))  # type: ignore[arg-type]


def test_noise_around_the_threshold_fires_once_and_does_not_flap() -> None:
    """KV usage wandering ±5% around 0.95 with a growing queue: one firing, no resolve while it stays
    above the clear threshold (0.90), one resolve after it stays below for clear_for."""
    rules = [r for r in load_rules(user=False) if r.id == "kv_saturated_queue_growing"]
    ev = AlertEvaluator(rules, load_profiles())
    rng = random.Random(1)
    states: list[tuple[float, AlertState]] = []
    entered = None
    for i in range(400):
        t = 1000.0 + i
        kv = 0.95 * (1 + rng.uniform(-0.05, 0.05)) if i < 300 else 0.80 * (1 + rng.uniform(-0.05, 0.05))
        if entered is None and i >= 30 and kv >= 0.95:  # 30 s of history show the queue growing
            entered = t
        a = ev.evaluate(FleetSnapshot(taken_at=t, engines=(_engine(t, kv_usage=min(kv, 1.0), waiting=float(i)),)))[0]
        if not states or states[-1][1] is not a.state:
            states.append((t, a.state))
    seq = [s for _, s in states]
    assert seq.count(AlertState.FIRING) == 1 and seq.count(AlertState.RESOLVED) == 1, states
    fired = next(t for t, s in states if s is AlertState.FIRING)
    resolved = next(t for t, s in states if s is AlertState.RESOLVED)
    assert entered is not None and entered + rules[0].for_s <= fired <= entered + rules[0].for_s + 2
    assert 1300 + rules[0].clear_for <= resolved <= 1300 + rules[0].clear_for + 2


def test_an_engine_without_the_inputs_gets_na_never_ok() -> None:
    ev = AlertEvaluator(load_rules(user=False), load_profiles())
    alerts = {a.rule: a for a in ev.evaluate(FleetSnapshot(taken_at=1.0, engines=(
        _engine(1.0, profile="llamacpp", running=1, waiting=0),)))}
    # llama.cpp has no KV-usage, preemption or TTFT metrics, and this engine holds no GPU.
    for rid in ("kv_saturated_queue_growing", "preempting", "ttft_slo_burn_fast", "error_rate_high", "gpu_hot"):
        assert alerts[rid].state is AlertState.NA, rid
    assert alerts["queue_buildup"].state is AlertState.OK
    unknown = ev.evaluate(FleetSnapshot(taken_at=2.0, engines=(_engine(2.0, profile="nosuch"),)))
    assert all(a.state is AlertState.NA for a in unknown if a.rule != "unreachable")


def test_badge_counts_and_row_tint_take_firing_alerts_only() -> None:
    ev = AlertEvaluator([r for r in load_rules(user=False) if r.id in ("queue_buildup", "decode_stall")],
                        load_profiles())
    for i in range(400):
        t = float(i)
        alerts = ev.evaluate(FleetSnapshot(taken_at=t, engines=(_engine(t, waiting=80.0, running=0.0),)))
    assert counts(alerts) == {"critical": 0, "warning": 1, "info": 0}
    assert worst(alerts, "e") == "warning" and worst(alerts, "other") is None


def _ttft_fleet(t: float, good: float, total: float,
                bounds: tuple[float, ...] = (0.5, 1.0, 2.5, math.inf)) -> FleetSnapshot:
    """A vLLM engine whose TTFT histogram holds ``good`` observations at or below 1 s of ``total``."""
    counts = tuple(good if b < 2.5 else total for b in bounds)
    m = ModelMetrics(model="m", ttft_cumulative=(bounds, counts))
    e = replace(_engine(t), total=m)
    return FleetSnapshot(taken_at=t, engines=(e,))


def test_burn_rate_is_the_sre_workbook_one_and_snaps_to_a_bucket_bound() -> None:
    """Objective 99.9%: 1.44% bad first tokens burn the budget 14.4 times as fast, which spends 2% of a
    30-day budget in 1 h. A threshold of 2 s is no bucket bound (0.5, 1, 2.5): 1 s is used, and said."""
    rule = parse_rules({"rules": {"burn": {
        "summary": "s", "severity": "critical", "slo": {"ttft_s": 2.0, "objective": 0.999},
        "when": [{"signal": "ttft_slo_burn_1h", "op": ">", "value": 14.4},
                 {"signal": "ttft_slo_burn_5m", "op": ">", "value": 14.4}]}}}, "x.toml")["burn"]
    ev = AlertEvaluator([rule], load_profiles())
    alert = None
    for i in range(0, 3601, 10):  # 1 h at 10 requests/s, 1.44% of them slower than 1 s
        total = 10.0 * i
        alert = ev.evaluate(_ttft_fleet(1000.0 + i, total * (1 - 0.0144), total))[0]
    assert alert is not None
    burn_1h, burn_5m = (v for _, v in alert.values)
    assert burn_1h == pytest.approx(14.4) and burn_5m == pytest.approx(14.4)
    # 2% of the 30-day budget in the hour
    assert burn_1h is not None and burn_1h * 3600 / (30 * 24 * 3600) == pytest.approx(0.02)
    assert alert.note == "TTFT threshold 2 s is not a bucket boundary; using 1 s"


@pytest.mark.parametrize(("ended", "exit_code", "fires"), [
    ("crashed", 137, True), ("failed", 1, True), ("gave-up", 1, True), ("stopped", 0, False), ("outside", 0, False)])
def test_a_crashed_managed_engine_is_down_and_a_stopped_one_is_not(ended: str, exit_code: int, fires: bool) -> None:
    """A managed engine that crashed is as down as one that stopped answering: 'unreachable' fires after
    its hold; one stopped on purpose (here or with docker stop) raises nothing."""
    from console.model import LifecycleView

    ev = AlertEvaluator([r for r in load_rules(user=False) if r.id == "unreachable"], load_profiles())
    states = []
    for i in range(60):
        t = 1000.0 + i
        e = replace(_engine(t), phase=Phase.EXITED, reachable=False, managed=True,
                    lifecycle=LifecycleView(Phase.EXITED, ended=ended, exit_code=exit_code, since=1000.0))
        states.append(ev.evaluate(FleetSnapshot(taken_at=t, engines=(e,)))[0].state)
    assert (AlertState.FIRING in states) is fires, states
    if fires:
        assert states.index(AlertState.FIRING) >= 30  # after the rule's 30 s hold, not at once
