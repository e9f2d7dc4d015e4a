"""No rule is silently dead (llm-d's HighPreemptions read ``vllm:num_preemptions``, which no vLLM
exposes). Every input of every rule resolves: a canonical metric some profile maps (or a GPU field
the console has), and for each profile that claims it, a raw name that a captured sample of that
engine or its simulator actually exposes. vLLM's dashboard generator has this guard for dashboards."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from console.alerts.rules import Rule, load_rules
from console.alerts.signals import SIGNALS
from console.model import GpuSnapshot, RawSeries
from console.profiles import CANONICAL, EngineProfile, MetricMapping, load_profiles
from tests.alerts.harness import VirtualEngine

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples"
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum", "_created")
GPU_FIELDS = {f.name for f in dataclasses.fields(GpuSnapshot)}


def exposed_names(engine: str) -> set[str]:
    """Every metric-like name in the engine's captured samples and in its simulator's exposition."""
    names: set[str] = set()
    for f in SAMPLES.glob(f"{engine}-*"):
        names.update(NAME.findall(f.read_text(encoding="utf-8", errors="replace")))
    # Some traffic, aborts and an HTTP 500 too: labelled counters exist from their first use only.
    v = VirtualEngine(engine, knobs=dataclasses.replace(VirtualEngine().knobs, rate=2.0, error_fraction=0.2))
    v.fl.on_error(500)
    v.run(10)
    names.update(s.name for s in _sim_series(v))
    return names


def _sim_series(v: VirtualEngine) -> Iterable[RawSeries]:
    from console.telemetry.metrics.normalize import normalize

    if v.fl.metrics_mount == "custom":
        body = v.fl.render_metrics("").body
        text = body if isinstance(body, bytes) else b""
    else:
        from prometheus_client import generate_latest

        text = generate_latest(v.fl.metrics_registry())
    return normalize(v.profile, text, full=True).raw


def _exposes(names: set[str], raw: str) -> bool:
    return any(raw + s in names for s in SUFFIXES) or any(raw.removesuffix("_total") + s in names for s in SUFFIXES)


def dead_inputs(rules: Iterable[Rule], profiles: Mapping[str, EngineProfile],
                exposed: Mapping[str, set[str]]) -> list[str]:
    """Why each rule input is dead, one line each (empty: none is)."""
    problems: list[str] = []
    for rule in rules:
        for cond in rule.when:
            sig = SIGNALS[cond.signal]
            for alt in sig.inputs:
                for name in alt:
                    if name.startswith("gpu."):
                        if name.removeprefix("gpu.") not in GPU_FIELDS:
                            problems.append(f"{rule.id}: {name} is no field of GpuSnapshot")
                    elif name not in CANONICAL:
                        problems.append(f"{rule.id}: {name} is no canonical metric")
            users = [p for p in profiles.values() if sig.available(p)]
            if not sig.gpu and sig.inputs and not users:
                problems.append(f"{rule.id}: signal {sig.name} has inputs no engine profile maps")
            for p in users:
                for name in sig.inputs_for(p):
                    m = p.metrics.map.get(name)
                    if m is None:
                        continue
                    for raw in _read_names(m):
                        if not _exposes(exposed.get(p.name, set()), raw):
                            problems.append(f"{rule.id}: {p.name} maps {name} to {raw!r}, which no sample or "
                                            f"simulator of {p.name} exposes")
    return problems


def _read_names(m: MetricMapping) -> list[str]:
    """The names a mapping needs: its newest name (older ones are legacy alternatives) and its parts'."""
    return [m.names[0], *(p.names[0] for p in m.plus)]


@pytest.fixture(scope="module")
def exposed() -> dict[str, set[str]]:
    return {name: exposed_names(name) for name in load_profiles()}


def test_every_shipped_rule_input_resolves_on_every_profile_and_sample(exposed: dict[str, set[str]]) -> None:
    rules = load_rules(user=False)
    assert len(rules) >= 10
    assert dead_inputs(rules, load_profiles(), exposed) == []


def test_every_rule_works_on_some_engine() -> None:
    profiles = load_profiles()
    for rule in load_rules(user=False):
        assert any(all(SIGNALS[c.signal].available(p) for c in rule.when) for p in profiles.values()), rule.id


def test_the_guard_catches_a_renamed_metric_and_an_unmapped_canonical(exposed: dict[str, set[str]]) -> None:
    """llm-d's bug, replayed: a profile that reads vllm:num_preemptions (no _total) is reported."""
    profiles = dict(load_profiles())
    vllm = profiles["vllm"]
    wrong = dataclasses.replace(vllm.metrics.map["preemptions"], names=("vllm:num_preemptions_count",))
    metrics = dataclasses.replace(vllm.metrics, map={**vllm.metrics.map, "preemptions": wrong})
    profiles["vllm"] = dataclasses.replace(vllm, metrics=metrics)
    rules = [r for r in load_rules(user=False) if r.id == "preempting"]
    problems = dead_inputs(rules, profiles, exposed)
    assert problems and "vllm:num_preemptions_count" in problems[0]
    # A rule on a signal whose inputs no profile maps is dead too.
    only_tgi = {"tgi": profiles["tgi"]}
    assert any("no engine profile maps" in p for p in dead_inputs(rules, only_tgi, exposed))
