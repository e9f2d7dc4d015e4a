"""The exported Prometheus rules fire when the console's evaluator fires, not earlier: both run on the
same recorded series (the raw samples the simulator exposed at each scrape), and ``promtool test
rules`` says at which evaluations the exported alert fires.

The rules whose signals need history (a burn rate over 1 h or 6 h, a prefix-hit baseline) are where
the two could part: the console gives no verdict until the history covers what
``console.alerts.signals.min_history_s`` asks, and the exported expressions carry the same guard.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from console.alerts.export import alert_name, export_prometheus
from console.alerts.rules import Rule, load_rules
from console.alerts.signals import min_history_s
from console.model import AlertState
from tests import procgroup
from tests.alerts.harness import T0, Knobs, VirtualEngine
from tests.alerts.test_promtool import _series

pytestmark = pytest.mark.promtool
RULES = {r.id: r for r in load_rules(user=False)}
_FAILED_AT = re.compile(r"alertname: (\w+), time: ((?:\d+h)?(?:\d+m)?(?:\d+s)?),")


def _seconds(go_duration: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"(\d+)([hms])", go_duration):
        total += int(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def console_firing(v: VirtualEngine, rule: Rule) -> list[float]:
    """The scrape times (seconds from the start) at which the console showed the rule firing."""
    out: list[float] = []
    state = AlertState.OK
    transitions = [tr for tr in v.transitions if tr.rule == rule.id]
    for tr in v.truth:
        while transitions and transitions[0].t <= tr.t:
            state = transitions.pop(0).state
        if state is AlertState.FIRING:
            out.append(round(tr.t - T0))
    return out


def prometheus_firing(promtool: Path, tmp: Path, v: VirtualEngine, rule: Rule) -> list[float]:
    """The evaluation times (seconds from the start, one per scrape) at which the exported rule fires:
    every evaluation expects no alert, and promtool lists the ones where one fired."""
    (tmp / "rules.yml").write_text(export_prometheus([rule], {v.engine: v.profile}))
    q = json.dumps
    lines = ["rule_files: [rules.yml]", f"evaluation_interval: {v.scrape_every:g}s", "tests:",
             f"  - interval: {v.scrape_every:g}s", "    input_series:"]
    for series, values in _series(v):
        lines += [f"      - series: {q(series)}", f"        values: {q(values)}"]
    lines.append("    alert_rule_test:")
    for tr in v.truth:
        lines += [f"      - eval_time: {round(tr.t - T0)}s", f"        alertname: {alert_name(rule)}",
                  "        exp_alerts: []"]
    (tmp / "test.yml").write_text("\n".join(lines) + "\n")
    res = procgroup.run([str(promtool), "test", "rules", "test.yml"], cwd=tmp, capture_output=True, text=True,
                        timeout=300)
    fired = sorted({_seconds(t) for name, t in _FAILED_AT.findall(res.stdout + res.stderr)
                    if name == alert_name(rule)})
    # A failure that is not an alert fired where none was expected (a bad rules file) is a failure here.
    assert res.returncode == 0 or fired, res.stdout[-3000:] + res.stderr[-3000:]
    return fired


def _assert_same_firing(console: list[float], prometheus: list[float], step: float) -> None:
    """Both fire, first at the same evaluation (one scrape of slack: Prometheus extrapolates a rate
    to its window's edges, the console reads the samples it has)."""
    assert console, "the scenario never fired the rule in the console"
    assert prometheus, "the exported rule never fired"
    assert abs(prometheus[0] - console[0]) <= step, (
        f"console first fired at {console[0]:g} s, the exported rule at {prometheus[0]:g} s")


@pytest.fixture(scope="module")
def queue_from_the_start() -> VirtualEngine:
    """Arrivals above capacity from the first second: most first tokens miss 2.5 s for 40 minutes."""
    v = VirtualEngine("vllm", max_running=2, scrape_every=10.0, knobs=Knobs(rate=0.8, max_tokens=64))
    v.record = ("vllm:time_to_first_token_seconds",)
    v.run(2400)
    return v


@pytest.mark.parametrize(("rule_id", "window"), [("ttft_slo_burn_fast", "1h"), ("ttft_slo_burn_slow", "6h")])
def test_the_exported_slo_burn_waits_for_the_history_the_console_waits_for(
        promtool: Path, tmp_path: Path, queue_from_the_start: VirtualEngine, rule_id: str, window: str) -> None:
    v, rule = queue_from_the_start, RULES[rule_id]
    console = console_firing(v, rule)
    prometheus = prometheus_firing(promtool, tmp_path, v, rule)
    _assert_same_firing(console, prometheus, v.scrape_every)
    # The long window's guard is what held both back: 5 min of history for 1 h, 30 min for 6 h.
    assert console[0] == pytest.approx(min_history_s(f"ttft_slo_burn_{window}"), abs=v.scrape_every)


def test_the_exported_prefix_hit_drop_waits_for_a_baseline_as_the_console_does(
        promtool: Path, tmp_path: Path) -> None:
    """The cache is flushed 7 minutes after the engine came up, before the console has the 7.5 minutes
    of baseline it wants: neither fires until the baseline covers that much."""
    rule = RULES["prefix_hit_drop"]
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.4, max_tokens=12))
    v.record = ("vllm:prefix_cache_", "vllm:prompt_tokens")
    v.run(420)
    v.knobs.flush_cache = True
    v.run(780)
    console = console_firing(v, rule)
    prometheus = prometheus_firing(promtool, tmp_path, v, rule)
    _assert_same_firing(console, prometheus, v.scrape_every)
    assert console[0] >= min_history_s("prefix_hit_vs_baseline") + rule.for_s
