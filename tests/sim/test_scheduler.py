"""The pure scheduler with a fake clock: batching, prefix cache, LRU eviction, queueing, preemption."""

from __future__ import annotations

from console.sim.scheduler import FINISHED, Request, Scheduler, SchedulerConfig


def mk(rid: str, prompt: list[int], max_tokens: int = 8, eos: int = 10_000) -> Request:
    return Request(id=rid, prompt_ids=list(prompt), max_tokens=max_tokens, eos_len=eos)


def run_until_idle(s: Scheduler, now: float = 0.0, limit: int = 100_000) -> float:
    for _ in range(limit):
        out = s.step(now)
        if out is None:
            return now
        now = out.end
    raise AssertionError("scheduler did not drain")


def test_one_token_per_running_sequence_per_step() -> None:
    s = Scheduler(SchedulerConfig(max_running=4, kv_blocks=64))
    reqs = [mk(f"r{i}", list(range(i * 100, i * 100 + 20)), max_tokens=3) for i in range(3)]
    for r in reqs:
        s.add(r, 0.0)
    out = s.step(0.0)
    assert out is not None
    assert out.batch_size == 3 and out.new_requests == 3
    assert all(r.generated == 1 and r.first_token == out.end for r in reqs)
    out2 = s.step(out.end)
    assert out2 is not None and all(r.generated == 2 for r in reqs)
    run_until_idle(s, out2.end)
    assert all(r.state == FINISHED and r.finish_reason == "length" and r.generated == 3 for r in reqs)
    assert s.pool.num_used == 0


def test_step_time_grows_with_batch_and_uncached_prefill() -> None:
    cfg = SchedulerConfig(max_running=64, kv_blocks=4096)
    s = Scheduler(cfg)
    s.add(mk("a", list(range(16))), 0.0)
    small = s.step(0.0)
    s2 = Scheduler(cfg)
    for i in range(32):
        s2.add(mk(f"b{i}", list(range(i * 1000, i * 1000 + 16))), 0.0)
    big = s2.step(0.0)
    assert small is not None and big is not None
    assert big.duration > small.duration
    # Decode-only steps: larger batch -> longer step.
    d_small = s.step(small.end)
    d_big = s2.step(big.end)
    assert d_small is not None and d_big is not None
    assert d_big.duration > d_small.duration


def test_shared_prefix_hits_the_cache() -> None:
    s = Scheduler(SchedulerConfig(max_running=8, kv_blocks=256, block_size=16))
    prefix = list(range(1000, 1000 + 64))  # 4 full blocks
    a = mk("a", [*prefix, 1, 2, 3], max_tokens=2)
    s.add(a, 0.0)
    now = run_until_idle(s)
    b = mk("b", [*prefix, 7, 8, 9], max_tokens=2)
    s.add(b, now)
    run_until_idle(s, now)
    assert a.cached_tokens == 0
    assert b.cached_tokens == 64
    # An unrelated prompt misses.
    c = mk("c", list(range(5000, 5067)), max_tokens=2)
    s.add(c, now + 1)
    run_until_idle(s, now + 1)
    assert c.cached_tokens == 0


def test_full_prompt_hit_still_computes_last_token() -> None:
    s = Scheduler(SchedulerConfig(max_running=8, kv_blocks=256, block_size=16))
    prompt = list(range(32))  # exactly 2 blocks
    a = mk("a", prompt, max_tokens=1)
    s.add(a, 0.0)
    now = run_until_idle(s)
    b = mk("b", prompt, max_tokens=1)
    s.add(b, now)
    run_until_idle(s, now)
    assert b.cached_tokens == 16  # the block holding the last prompt token is recomputed


def test_lru_eviction_of_free_cached_blocks() -> None:
    s = Scheduler(SchedulerConfig(max_running=1, kv_blocks=6, block_size=16))
    first = mk("first", list(range(64)), max_tokens=1)  # 4 prompt blocks + room for 1 token = 5 blocks
    s.add(first, 0.0)
    now = run_until_idle(s)
    assert s.pool.num_used == 0 and len(s.pool.evictable) == 3  # cached but free (last token never cached)
    other = mk("other", list(range(9000, 9064)), max_tokens=1)  # needs 5 blocks: evicts cached ones
    s.add(other, now)
    now = run_until_idle(s, now)
    assert s.pool.evictions == 2  # 3 never-used blocks first, then 2 cached ones (LRU)
    again = mk("again", list(range(64)), max_tokens=1)
    s.add(again, now)
    run_until_idle(s, now)
    # Tail blocks are released first, so they were evicted first: only the first block still hits.
    assert again.cached_tokens == 16


def test_waiting_queue_when_max_running_is_reached() -> None:
    s = Scheduler(SchedulerConfig(max_running=2, kv_blocks=1024))
    reqs = [mk(f"r{i}", list(range(i * 50, i * 50 + 10)), max_tokens=5) for i in range(5)]
    for r in reqs:
        s.add(r, 0.0)
    out = s.step(0.0)
    assert out is not None
    assert len(s.running) == 2 and len(s.waiting) == 3
    run_until_idle(s, out.end)
    assert [r.scheduled is not None for r in reqs] == [True] * 5
    assert reqs[4].scheduled > reqs[0].scheduled  # type: ignore[operator]


def test_preemption_when_kv_runs_out() -> None:
    s = Scheduler(SchedulerConfig(max_running=16, kv_blocks=24, block_size=16))
    reqs = [mk(f"r{i}", list(range(i * 100, i * 100 + 30)), max_tokens=60) for i in range(6)]
    for r in reqs:
        s.add(r, 0.0)
    run_until_idle(s)
    assert s.preemptions > 0
    assert all(r.state == FINISHED and r.generated == 60 for r in reqs)
    assert any(r.num_preemptions > 0 for r in reqs)
    assert s.pool.num_used == 0


def test_natural_eos_and_min_tokens_and_ignore_eos() -> None:
    s = Scheduler(SchedulerConfig())
    natural = Request(id="n", prompt_ids=[1, 2, 3], max_tokens=100, eos_len=7)
    minimum = Request(id="m", prompt_ids=[1, 2, 4], max_tokens=100, eos_len=7, min_tokens=20)
    ignore = Request(id="i", prompt_ids=[1, 2, 5], max_tokens=30, eos_len=7, ignore_eos=True)
    for r in (natural, minimum, ignore):
        s.add(r, 0.0)
    run_until_idle(s)
    assert (natural.generated, natural.finish_reason) == (7, "stop")
    assert (minimum.generated, minimum.finish_reason) == (20, "stop")
    assert (ignore.generated, ignore.finish_reason) == (30, "length")


def test_abort_frees_blocks() -> None:
    s = Scheduler(SchedulerConfig(kv_blocks=64))
    r = mk("r", list(range(40)), max_tokens=100)
    s.add(r, 0.0)
    s.step(0.0)
    assert s.pool.num_used > 0
    assert s.abort(r, 1.0)
    assert r.finish_reason == "abort" and s.pool.num_used == 0 and s.idle
