"""Bench bookkeeping without servers: prompt-token check, SLO parsing, goodput, combine/ratios, workloads."""

from __future__ import annotations

import pytest

from console.client.aggregate import is_good, parse_slo
from console.client.bench import BenchConfig, prompt_token_check, short_labels
from console.client.loadgen import LevelRaw, LevelSpec, SelfCheck
from console.client.servermetrics import LevelServerStats
from console.client.timing import RequestRecord, compute
from console.client.workloads import WorkloadSpec, generate
from console.profiles import get_profile
from console.target import EngineTarget


def _raw(prompt_tokens: list[int]) -> LevelRaw:
    recs = [RequestRecord(index=i, prompt_tokens=p) for i, p in enumerate(prompt_tokens)]
    return LevelRaw(LevelSpec(), recs, "ignore_eos", 0, 1, None, None, SelfCheck(), LevelServerStats(), {})


def test_prompt_token_mismatch_is_flagged() -> None:
    e = (EngineTarget("a", get_profile("vllm"), "http://a"), EngineTarget("b", get_profile("sglang"), "http://b"))
    cfg = BenchConfig(engines=e, levels=(LevelSpec(),))
    ok = prompt_token_check(cfg, {(0, 0, 0): _raw([10, 11]), (1, 0, 0): _raw([10, 11])})
    assert ok["ok"] and ok["compared"] == 2
    bad = prompt_token_check(cfg, {(0, 0, 0): _raw([10, 11]), (1, 0, 0): _raw([10, 13])})
    assert not bad["ok"] and bad["mismatches"] == 1 and bad["examples"][0]["b"] == 13


def test_short_labels() -> None:
    v, s = get_profile("vllm"), get_profile("sglang")
    assert short_labels([EngineTarget("vllm@http://h:1", v, "http://h:1"),
                         EngineTarget("sglang@http://h:2", s, "http://h:2")]) == ["vllm", "sglang"]
    assert short_labels([EngineTarget("vllm@http://h:1", v, "http://h:1"),
                         EngineTarget("vllm@http://h:2", v, "http://h:2")]) == ["vllm:1", "vllm:2"]


def test_slo_parsing_and_goodput_membership() -> None:
    assert parse_slo("ttft:500,tpot:50") == {"ttft": 500.0, "tpot": 50.0}
    with pytest.raises(ValueError):
        parse_slo("latency:5")
    r = RequestRecord(index=0, t_send_ns=0, status=200, completion_tokens=3)
    r.event_t_ns = [400_000_000, 460_000_000, 520_000_000]  # TTFT 400 ms, TPOT 60 ms
    r.event_usage = [None, None, None]
    m = compute(r)
    assert is_good(m, {"ttft": 500})
    assert not is_good(m, {"ttft": 500, "tpot": 50})


def test_workloads_are_seeded_and_shaped() -> None:
    a = generate(WorkloadSpec(input_len=20), 5, seed=1, tag="x")
    assert a == generate(WorkloadSpec(input_len=20), 5, seed=1, tag="x")
    assert a != generate(WorkloadSpec(input_len=20), 5, seed=1, tag="y")
    assert all(len(p.prompt.split()) == 20 for p in a)
    sp = generate(WorkloadSpec(kind="shared-prefix", input_len=40, prefix_groups=2), 8, seed=1)
    assert len({p.system for p in sp}) == 2 and all(len(p.system.split()) == 30 for p in sp)
    assert all(len(p.prompt.split()) == 10 for p in sp)
