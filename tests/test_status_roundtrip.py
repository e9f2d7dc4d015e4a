"""Every field of a snapshot the screens show comes back through the status document, field by field.

A replay (``console/recording/replay.py``) and a remote host (``console/remote/stream.py``) show
``snapshot_from_doc(status_doc(snapshot))``: whatever that loses, they show as n/a although the live
console showed it. The fields the document does not carry are named in ``NOT_CARRIED``, with why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from dataclasses import replace
from typing import Any

import aiohttp
import orjson
import pytest

from console.model import (
    Alert,
    AlertState,
    CacheTiers,
    EnergyView,
    EngineIdentity,
    EngineSnapshot,
    FleetSnapshot,
    Freshness,
    GpuFleet,
    GpuProcess,
    GpuSnapshot,
    HostSnapshot,
    HostView,
    InvalidFigure,
    KvTransfer,
    LifecycleView,
    LoraState,
    ModelMetrics,
    PdQueues,
    Phase,
    Quantiles,
    Rates,
    RawSeries,
    SourceState,
    SpecDecode,
)
from console.profiles import get_profile
from console.status_doc import status_doc
from console.status_parse import snapshot_from_doc
from console.telemetry.metrics.normalize import normalize
from console.telemetry.metrics.windows import EngineMetricsState
from tests.sim.conftest import ENGINES, METRICS_PATH, chat, sim

T = 1_796_000_000.0

# Fields the document does not hold, and why no screen needs them back from it.
NOT_CARRIED: dict[type, frozenset[str]] = {
    # Raw series and unmapped families: the metrics browser of a live engine; a recording keeps the
    # raw payloads beside the documents (console/recording/payloads.py). last_log_line: the engine
    # screen reads the log of an engine this console controls.
    EngineSnapshot: frozenset({"raw", "unmapped", "last_log_line"}),
    # Counter values and the cumulative TTFT histogram feed the alert rules; the document carries
    # the rules' verdicts (FleetSnapshot.alerts) instead.
    ModelMetrics: frozenset({"counters", "ttft_cumulative"}),
    # A host view's GPUs are merged into the fleet's GPU list (console/remote/merge.py).
    HostView: frozenset({"gpus"}),
}


def _via_json(doc: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(orjson.dumps(doc))  # type: ignore[no-any-return]


def _round_trip(snap: FleetSnapshot) -> FleetSnapshot:
    return snapshot_from_doc(_via_json(status_doc(snap)))


def _compare(want: object, got: object, path: str, seen: set[str]) -> list[str]:
    """Differences between ``want`` and ``got``, walking dataclasses field by field."""
    if dataclasses.is_dataclass(want) and not isinstance(want, type):
        if type(got) is not type(want):
            return [f"{path}: {type(want).__name__} came back as {got!r}"]
        out: list[str] = []
        skip = NOT_CARRIED.get(type(want), frozenset())
        for f in dataclasses.fields(want):
            if f.name in skip:
                continue
            seen.add(f"{type(want).__name__}.{f.name}")
            out += _compare(getattr(want, f.name), getattr(got, f.name), f"{path}.{f.name}", seen)
        return out
    if isinstance(want, tuple) and not isinstance(want, enum.Enum):
        if not isinstance(got, tuple) or len(got) != len(want):
            return [f"{path}: {want!r} came back as {got!r}"]
        return [d for i, (w, g) in enumerate(zip(want, got, strict=True)) for d in _compare(w, g, f"{path}[{i}]", seen)]
    if isinstance(want, float) and isinstance(got, float):
        return [] if want == pytest.approx(got, rel=1e-5, abs=5e-5) else [f"{path}: {want!r} came back as {got!r}"]
    return [] if want == got else [f"{path}: {want!r} came back as {got!r}"]


def _rates(x: float, at_finish: bool = False, step: float = 0.0) -> Rates:
    return Rates(x, x + 0.5, x + 1.25, at_finish=at_finish, step=step)


def _q(x: float) -> Quantiles:
    return Quantiles(p50=x, p90=2 * x, p99=3 * x, count=120.0, mean=1.5 * x, low_sample=False, capped=("p99",))


def _energy(gpus: tuple[int, ...], tokens: bool) -> EnergyView:
    return EnergyView(joules=4200.5, window_s=60.0, power_w=70.008, tokens_per_joule=2.5 if tokens else None,
                      total_tokens_per_joule=7.25 if tokens else None, joules_per_1k_output=400.0 if tokens else None,
                      idle_w=61.5, busy_w=320.25, total_joules=98765.5, source="counter", attribution="estimate",
                      reason="GPU 0 shared with eng-b: split by memory", gpus=gpus, simulated=True)


def full_snapshot() -> FleetSnapshot:
    """A fleet with every field of every part set to something other than its default."""
    m = ModelMetrics(
        model="qwen", running=3.0, waiting=2.0, kv_usage=0.42, kv_usage_mean=0.4, replicas=2, prefix_hit_rate=0.61,
        prefix_hit_rate_window="gauge", prompt_tps=_rates(1500.0), generation_tps=_rates(820.0, True),
        request_rate=_rates(3.0), error_rate=_rates(0.25), preemptions_total=12.0, preemption_rate=_rates(0.5),
        ttft=_q(0.085), itl=_q(0.021), tpot=_q(0.022), e2e=_q(1.5), queue_time=_q(0.004),
        ttft_cumulative=((0.1, float("inf")), (3.0, 5.0)), counters={"requests": 5.0},
        spec=SpecDecode(acceptance_rate=0.6, acceptance_length=2.8, draft_share=0.55, window="gauge",
                        per_position=(0.8, 0.6, 0.4)),
        kv_transfer=KvTransfer(bytes_per_s=123456.5, link_gb_s=12.5, latency_s=0.0042,
                               failures_per_s=_rates(0.125)),
        lora=LoraState(running=2.0, waiting=1.0, slots_used=2.0, slots_total=4.0),
        prefill_time=_q(0.03), decode_time=_q(0.7), inference_time=_q(0.73), waiting_capacity=1.0,
        waiting_deferred=1.0, sleep_level=1, kv_host_usage=0.25, admission_rejections_per_s=_rates(0.75, step=10.0),
        pd_queues=PdQueues(bootstrap=2.0, inflight=1.0, prealloc=3.0, transfer=4.0,
                           bootstrap_failures_per_s=_rates(0.125)),
        cache_tiers=CacheTiers(tokens_per_s=(("device", 5000.0), ("host", 250.0)), external_hit_rate=0.125),
        invalid=(InvalidFigure(field="kv_usage_mean", value=1e308, allowed="0-1"),
                 InvalidFigure(field="counters.generation_tokens", value=-250.0, allowed="",
                               reason='vllm:generation_tokens_total{model_name="qwen"} is negative (-250)')),
    )  # fmt: skip
    fresh = Freshness(SourceState.STALE, updated_at=T - 3, stale_since=T - 2, reason="timed out")
    engine = EngineSnapshot(
        name="gpu1/vllm-a", profile="vllm", url="http://127.0.0.1:18000", taken_at=T, phase=Phase.EXITED,
        reachable=True, health_detail="connection refused",
        identity=EngineIdentity(version="0.11.0", models=("qwen",), max_model_len=8192),
        metrics_freshness=fresh, health_freshness=fresh, models=(m,), total=m,
        raw=(RawSeries("vllm:x", (("a", "b"),), 1.0, "gauge"),), unmapped=("foo",), missing=("queue_time",),
        managed=True, simulated=True, gpus=(0, 1), pids=(123,), cpu_percent=12.5, rss_bytes=2**30,
        last_log_line="INFO ready",
        lifecycle=LifecycleView(phase=Phase.EXITED, detail="stopped (exit code 0)", ended="stopped", exit_code=0,
                                oom_killed=True, since=T - 8, countdown=7),
        energy=_energy((0, 1), True), host="gpu1", source="prom", role="decode",
    )  # fmt: skip
    gpu = GpuSnapshot(
        index=0, name="H100", uuid="GPU-0", taken_at=T, util_percent=55.0, mem_util_percent=40.0,
        mem_used_bytes=2**34, mem_total_bytes=80 * 2**30, temperature_c=61.0, power_w=310.0, power_limit_w=700.0,
        sm_clock_mhz=1980, mem_clock_mhz=2619, ecc_errors=1, xid_errors=(79,), throttle_reasons=("sw_thermal",),
        processes=(GpuProcess(123, 2**34, "python", "ctr", "gpu1/vllm-a"),), simulated=True, energy_mj=123456.0,
        energy_source="counter", mig=True, energy=_energy((0,), False), host="gpu1",
    )  # fmt: skip
    host = HostSnapshot(taken_at=T, cpu_percent=20.0, cpu_count=16, mem_used_bytes=2**33, mem_total_bytes=2**36,
                        load_avg=(1.0, 0.5, 0.25), hostname="box", freshness=fresh)
    alert = Alert(rule="kv_pressure", engine="gpu1/vllm-a", severity="warning", state=AlertState.FIRING,
                  summary="KV cache nearly full", since=T - 60, value=0.97, condition="kv_usage >= 0.95",
                  values=(("kv_usage", 0.97), ("waiting", None)), runbook="docs/alerts.md#kv", note="snapped",
                  clears_at=T + 42)
    view = HostView(name="gpu1", destination="user@gpu1:2222", freshness=fresh, last_doc_at=T - 1.5, host=host,
                    engines=1, kind="ssh")
    views = (view, replace(view, name="k8s", destination="https://127.0.0.1:6443", kind="kubernetes"),
             replace(view, name="prom", destination="http://127.0.0.1:9090", kind="prometheus"))
    return FleetSnapshot(taken_at=T, engines=(engine,), host=host, alerts=(alert,), hosts=views,
                         gpus=GpuFleet(gpus=(gpu,), freshness=fresh, driver_version="550.1", source="simulated",
                                       unavailable_reason="partly"))


def _fields_set(obj: object, fields: dict[str, bool]) -> None:
    """Record, per ``Class.field`` reachable from ``obj``, whether some instance sets it to other
    than its default (a field left at its default everywhere would not be tested)."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        key = f"{type(obj).__name__}.{f.name}"
        fields[key] = fields.get(key, False) or v != default
        for x in v if isinstance(v, tuple) else (v,):
            _fields_set(x, fields)


def test_the_fixture_sets_every_field() -> None:
    fields: dict[str, bool] = {}
    _fields_set(full_snapshot(), fields)
    skipped = {f"{cls.__name__}.{name}" for cls, names in NOT_CARRIED.items() for name in names}
    assert [k for k, ok in fields.items() if not ok and k not in skipped] == []
    assert len(fields) > 150


def test_every_field_comes_back_through_the_document() -> None:
    snap = full_snapshot()
    seen: set[str] = set()
    assert _compare(snap, _round_trip(snap), "snap", seen) == []
    # Spot checks on what replay and remote engines showed as n/a before.
    for name in ("EngineSnapshot.energy", "EngineSnapshot.lifecycle", "ModelMetrics.spec", "ModelMetrics.kv_transfer",
                 "ModelMetrics.lora", "GpuSnapshot.energy", "GpuSnapshot.throttle_reasons", "FleetSnapshot.alerts",
                 "LifecycleView.ended", "EnergyView.tokens_per_joule"):
        assert name in seen


def test_a_document_without_the_later_fields_still_reads() -> None:
    """Recordings made before lifecycle and throttle_reasons were recorded: no such panel, as then."""
    doc = _via_json(status_doc(full_snapshot()))
    del doc["engines"][0]["lifecycle"], doc["gpus"]["devices"][0]["throttle_reasons"]
    back = snapshot_from_doc(doc)
    assert back.engines[0].lifecycle is None and back.gpus.gpus[0].throttle_reasons is None


FEATURES: dict[str, dict[str, Any]] = {
    "vllm": {"spec_decode": "3:0.6", "pd_decode": True, "pd_fail_every": 4, "max_lora": 2},
    "sglang": {"spec_decode": "4", "pd_decode": True, "max_lora": 3},
}


@pytest.mark.parametrize(("engine", "features"), [(e, False) for e in ENGINES] + [(e, True) for e in FEATURES])
async def test_round_trip_of_each_profile_from_its_simulator(engine: str, features: bool) -> None:
    """The metrics each profile really produces (with speculative decoding, P/D and LoRA on where
    the engine has them: vLLM and SGLang) come back equal."""
    profile = get_profile(engine)
    st = EngineMetricsState(profile)
    async with sim(engine, **(FEATURES[engine] if features else {})) as one, aiohttp.ClientSession() as s:
        for t in (0.0, 5.0, 10.0):
            replies = await asyncio.gather(*(chat(s, one.url, f"request {i} " * 20, max_tokens=24) for i in range(4)))
            assert all(status == 200 for status, _ in replies)
            async with s.get(one.url + METRICS_PATH[engine]) as r:
                st.ingest(t, normalize(profile, await r.text()))
    models, total = st.metrics()
    if features:
        assert total.spec is not None and total.kv_transfer is not None and total.lora is not None
    e = EngineSnapshot(name=engine, profile=engine, url=one.url, taken_at=T, phase=Phase.READY, reachable=True,
                       models=models, total=total, energy=_energy((0,), True), managed=True,
                       lifecycle=LifecycleView(phase=Phase.READY, since=T - 30))
    snap = FleetSnapshot(taken_at=T, engines=(e,))
    assert _compare(snap, _round_trip(snap), "snap", set()) == []
