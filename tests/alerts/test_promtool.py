"""The exported rules pass Prometheus' own ``promtool check rules``, and ``promtool test rules``
reproduces the console's firing times in three simulator scenarios (queue ramp, decode freeze,
scrape loss): the input series are the raw series the simulator exposed at each scrape, in the
engine's own names, and the expected firing moment is the one the console's evaluator saw."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from console.alerts.export import alert_name, export_prometheus
from console.alerts.rules import Rule, load_rules
from console.cli import main
from console.model import AlertState
from console.profiles import load_profiles
from tests import procgroup
from tests.alerts.harness import T0, Knobs, VirtualEngine

pytestmark = pytest.mark.promtool
RULES = {r.id: r for r in load_rules(user=False)}
INSTANCE = "sim:8000"


def test_the_export_passes_promtool_check_rules(promtool: Path, tmp_path: Path) -> None:
    out = tmp_path / "rules.yml"
    assert main(["alerts", "export", "--format", "prometheus", "--output", str(out)]) == 0
    res = procgroup.run([str(promtool), "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    # Every rule that applies to an engine is there once per such engine.
    text = out.read_text()
    assert text.count(f"alert: {alert_name(RULES['queue_buildup'])}\n") == len(load_profiles())
    assert "vllm:num_preemptions_total" in text and "vllm:num_preemptions[" not in text


def _labels(labels: tuple[tuple[str, str], ...], job: str) -> str:
    parts = [f'{k}={json.dumps(v)}' for k, v in (*labels, ("instance", INSTANCE), ("job", job))]
    return "{" + ",".join(parts) + "}"


def _series(v: VirtualEngine) -> list[tuple[str, str]]:
    """promtool input_series: step k (k * scrape_every s) is scrape k; a missing sample is '_'."""
    keys = sorted({k for frame in v.raw for k in frame})
    out = []
    for name, labels in keys:
        values = ["_"] + [repr(frame[(name, labels)]) if (name, labels) in frame else "_" for frame in v.raw]
        out.append((name + _labels(labels, v.engine), " ".join(values)))
    up = ["_"] + ["1" if tr.scraped else "0" for tr in v.truth]
    out.append((f'up{{instance="{INSTANCE}",job="{v.engine}"}}', " ".join(up)))
    return out


def _annotations(rule: Rule) -> dict[str, str]:
    desc = "enginedeck rule " + rule.id + ": " + " and ".join(c.text() for c in rule.when)
    return {"summary": rule.summary, "description": desc, **({"runbook": rule.runbook} if rule.runbook else {})}


def _promtool_test(promtool: Path, tmp: Path, v: VirtualEngine, rule: Rule) -> tuple[float, str]:
    """Write the rules and a test that expects the alert firing when the console fired it and not one
    evaluation earlier; returns (firing time, promtool output)."""
    fired = v.times(rule.id, AlertState.FIRING)
    assert len(fired) == 1, v.transitions
    at = round(fired[0] - T0)
    before = at - round(v.scrape_every)
    (tmp / "rules.yml").write_text(export_prometheus([rule], {v.engine: v.profile}))
    q = json.dumps
    labels = {"severity": rule.severity.value, "engine": v.engine, "instance": INSTANCE}
    if rule.id == "unreachable":
        labels["job"] = v.engine
    lines = ["rule_files: [rules.yml]", f"evaluation_interval: {v.scrape_every:g}s", "tests:",
             f"  - interval: {v.scrape_every:g}s", "    input_series:"]
    for series, values in _series(v):
        lines += [f"      - series: {q(series)}", f"        values: {q(values)}"]
    lines += ["    alert_rule_test:",
              f"      - eval_time: {before}s", f"        alertname: {alert_name(rule)}", "        exp_alerts: []",
              f"      - eval_time: {at}s", f"        alertname: {alert_name(rule)}", "        exp_alerts:",
              f"          - exp_labels: {q(labels)}", f"            exp_annotations: {q(_annotations(rule))}"]
    (tmp / "test.yml").write_text("\n".join(lines) + "\n")
    res = procgroup.run([str(promtool), "test", "rules", "test.yml"], cwd=tmp, capture_output=True, text=True,
                        timeout=120)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return fired[0], res.stdout


def _scenario(name: str) -> tuple[VirtualEngine, Rule]:
    scenarios: dict[str, Callable[[], tuple[VirtualEngine, Rule]]] = {
        "queue ramp": _queue_ramp, "decode freeze": _decode_freeze, "scrape loss": _scrape_loss}
    return scenarios[name]()


def _queue_ramp() -> tuple[VirtualEngine, Rule]:
    v = VirtualEngine("vllm", max_running=2, scrape_every=5.0, knobs=Knobs(rate=0.2, max_tokens=64))
    v.record = ("vllm:num_requests_waiting",)
    v.run(60)
    v.knobs.rate = 1.2
    v.run(540)
    return v, RULES["queue_buildup"]


def _decode_freeze() -> tuple[VirtualEngine, Rule]:
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.5, max_tokens=64))
    v.record = ("vllm:num_requests_running", "vllm:generation_tokens")
    v.run(60)
    v.run(60, until=lambda v: v.truth[-1].running > 0)
    v.knobs.freeze = True
    v.run(40)
    return v, RULES["decode_stall"]


def _scrape_loss() -> tuple[VirtualEngine, Rule]:
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.3, max_tokens=64))
    v.record = ("vllm:num_requests_running",)
    v.run(60)
    v.knobs.scrape_fails = True
    v.run(60)
    return v, RULES["unreachable"]


@pytest.mark.parametrize("scenario", ["queue ramp", "decode freeze", "scrape loss"])
def test_promtool_test_rules_reproduces_the_firing_time(promtool: Path, tmp_path: Path, scenario: str) -> None:
    v, rule = _scenario(scenario)
    fired, out = _promtool_test(promtool, tmp_path, v, rule)
    assert "SUCCESS" in out
    assert fired > v.truth[0].t + 30  # it fired mid-scenario, not at the first evaluation
