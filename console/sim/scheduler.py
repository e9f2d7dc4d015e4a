"""A continuous-batching scheduler with a paged KV pool and a prefix cache. Pure Python, no I/O.

The caller owns the clock: ``step(now)`` plans one engine iteration starting at ``now`` and returns
when it ends; every running sequence gets exactly one token at that end time. Tests drive it with a
fake clock; the server drives it from an asyncio task with wall-clock time.

Model (close to vLLM V1, good enough for the other engines):
- a fixed pool of KV blocks of ``block_size`` tokens; a sequence of T tokens holds ceil(T/bs) blocks;
- full prompt blocks are hash-chained (hash of parent hash + token ids) and stay in the cache after
  their sequence frees them ("cached but free" blocks count as free and are evicted LRU);
- a new request's prompt is matched block by block against the cache (hits), the rest is prefilled;
- decode step time grows with batch size, prefill time with uncached prompt tokens;
- when a running sequence needs a block and none is free, the most recently admitted sequence is
  preempted (recompute: its blocks are freed, it goes back to the head of the waiting queue).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Protocol

WAITING, RUNNING, FINISHED = 0, 1, 2


@dataclass
class SchedulerConfig:
    max_running: int = 64
    kv_blocks: int = 2048
    block_size: int = 16
    max_model_len: int = 8192
    # Seconds per iteration: base + per running sequence; prefill adds base + per uncached token.
    decode_base_s: float = 0.010
    decode_per_seq_s: float = 0.0004
    prefill_base_s: float = 0.004
    prefill_per_token_s: float = 0.00004
    # Divides every duration (benchmarks use a large value to make the simulator CPU-bound).
    speed: float = 1.0


class Observer(Protocol):
    """Hooks a metrics flavour implements to derive its series from what the scheduler does."""

    def on_arrival(self, req: Request, now: float) -> None: ...
    def on_scheduled(self, req: Request, now: float, queried: int, hits: int) -> None: ...
    def on_first_token(self, req: Request, t: float) -> None: ...
    def on_token(self, req: Request, t: float, gap: float) -> None: ...
    def on_finish(self, req: Request, t: float) -> None: ...
    def on_preempt(self, req: Request, now: float) -> None: ...
    def on_step(self, s: StepOutcome) -> None: ...


@dataclass(eq=False)
class Request:
    """One sequence. ``generated`` counts tokens emitted so far (all of them reach the client)."""

    id: str
    prompt_ids: list[int]
    max_tokens: int
    eos_len: int  # natural EOS position (ignored with ignore_eos)
    min_tokens: int = 0
    ignore_eos: bool = False
    arrival: float = 0.0
    received: float | None = None  # when the HTTP request came in (before parsing/validation)
    scheduled: float | None = None  # first time it was admitted to the running batch
    first_token: float | None = None
    last_token: float | None = None
    finish: float | None = None
    generated: int = 0
    cached_tokens: int = 0  # prefix-cache hit tokens at first admission
    num_preemptions: int = 0
    state: int = WAITING
    finish_reason: str | None = None
    blocks: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    # Opaque slot for the server (its per-request stream sink); the scheduler never touches it.
    sink: object = None

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + self.generated


@dataclass
class StepOutcome:
    start: float
    end: float
    iteration: int
    batch_size: int  # sequences that got a token
    prefill_tokens: int  # uncached tokens computed in this step
    new_requests: int  # sequences admitted in this step
    emitted: list[Request]
    finished: list[Request]
    preempted: list[Request]
    # Prefix-cache blocks reused / newly computed for admissions in this step (trtllm-style stats).
    reused_blocks: int = 0
    missed_blocks: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


class BlockPool:
    """Fixed KV blocks with reference counts, a hash index and an LRU of cached free blocks."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.hash_of: list[int | None] = [None] * num_blocks
        self.free: deque[int] = deque(range(num_blocks))  # never cached, or evicted
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, ref 0, LRU first
        self.by_hash: dict[int, int] = {}
        self.evictions = 0

    @property
    def num_free(self) -> int:
        return len(self.free) + len(self.evictable)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    def alloc(self) -> int:
        if self.free:
            b = self.free.popleft()
        else:
            b, _ = self.evictable.popitem(last=False)
            h = self.hash_of[b]
            if h is not None and self.by_hash.get(h) == b:
                del self.by_hash[h]
            self.hash_of[b] = None
            self.evictions += 1
        self.refs[b] = 1
        return b

    def take(self, b: int) -> None:
        """Add a reference to a cached block (a prefix hit)."""
        if self.refs[b] == 0:
            self.evictable.pop(b, None)
        self.refs[b] += 1

    def release(self, b: int) -> None:
        self.refs[b] -= 1
        if self.refs[b] == 0:
            if self.hash_of[b] is not None:
                self.evictable[b] = None
            else:
                self.free.append(b)

    def register(self, b: int, h: int) -> None:
        if h not in self.by_hash:
            self.by_hash[h] = b
            self.hash_of[b] = h

    def match(self, hashes: list[int]) -> list[int]:
        out: list[int] = []
        for h in hashes:
            b = self.by_hash.get(h)
            if b is None:
                break
            out.append(b)
        return out

    def reset_cache(self) -> None:
        for b in list(self.evictable):
            h = self.hash_of[b]
            if h is not None:
                self.by_hash.pop(h, None)
            self.hash_of[b] = None
            self.free.append(b)
        self.evictable.clear()


def block_hashes(ids: list[int], block_size: int) -> list[int]:
    """Hash chain over the full blocks of ``ids``."""
    out: list[int] = []
    parent = 0
    for i in range(0, len(ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(ids[i : i + block_size])))
        out.append(parent)
    return out


class Scheduler:
    def __init__(self, config: SchedulerConfig, observer: Observer | None = None) -> None:
        self.config = config
        self.pool = BlockPool(config.kv_blocks)
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.observer = observer
        self.iteration = 0
        self.preemptions = 0

    # ----- requests in -----
    def add(self, req: Request, now: float) -> None:
        req.arrival = now
        req.state = WAITING
        bs = self.config.block_size
        # Never let a full-prompt hit skip the last prompt token (it must be computed to sample).
        req.block_hashes = block_hashes(req.prompt_ids[: max(0, req.prompt_len - 1)], bs)
        self.waiting.append(req)
        if self.observer:
            self.observer.on_arrival(req, now)

    def abort(self, req: Request, now: float) -> bool:
        """Drop a request (client went away). Returns False if it had already finished."""
        if req.state == FINISHED:
            return False
        if req.state == RUNNING:
            self.running.remove(req)
            self._free(req)
        else:
            try:
                self.waiting.remove(req)
            except ValueError:
                pass
        req.state = FINISHED
        req.finish_reason = "abort"
        req.finish = now
        if self.observer:
            self.observer.on_finish(req, now)
        return True

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting

    @property
    def kv_usage(self) -> float:
        return self.pool.num_used / self.pool.num_blocks if self.pool.num_blocks else 0.0

    # ----- one iteration -----
    def step(self, now: float) -> StepOutcome | None:
        if self.idle:
            return None
        cfg = self.config
        bs = cfg.block_size
        pool = self.pool
        self.iteration += 1
        preempted: list[Request] = []

        # 1. Every running sequence needs room for one more token; preempt from the back if not.
        for req in list(self.running):
            if req.state != RUNNING:
                continue
            need = -(-(req.num_tokens + 1) // bs) - len(req.blocks)
            while need > 0 and pool.num_free < need and self.running:
                victim = self.running[-1]
                self._preempt(victim, now)
                preempted.append(victim)
                if victim is req:
                    break
            if req.state != RUNNING:
                continue
            for _ in range(need):
                req.blocks.append(pool.alloc())

        # 2. Admit waiting requests (FCFS, head-of-line blocking like vLLM).
        new: list[Request] = []
        rejected: list[Request] = []
        prefill_tokens = 0
        reused = missed = 0
        while self.waiting and len(self.running) < cfg.max_running:
            req = self.waiting[0]
            hit_blocks = pool.match(req.block_hashes)
            total_blocks = -(-(req.num_tokens + 1) // bs)
            need = total_blocks - len(hit_blocks)
            # Taking hit blocks off the evictable list also shrinks what we may allocate.
            evictable_hits = sum(1 for b in hit_blocks if pool.refs[b] == 0)
            if pool.num_free - evictable_hits < need:
                if not self.running and not new:
                    # Cannot ever fit: fail it rather than deadlock.
                    self.waiting.popleft()
                    req.state = FINISHED
                    req.finish_reason = "length"
                    req.finish = now
                    rejected.append(req)
                    if self.observer:
                        self.observer.on_finish(req, now)
                    continue
                break
            self.waiting.popleft()
            for b in hit_blocks:
                pool.take(b)
            req.blocks = list(hit_blocks)
            for _ in range(need):
                req.blocks.append(pool.alloc())
            for i in range(len(hit_blocks), len(req.block_hashes)):
                pool.register(req.blocks[i], req.block_hashes[i])
            hit_tokens = len(hit_blocks) * bs
            prefill_tokens += req.num_tokens - hit_tokens
            reused += len(hit_blocks)
            missed += -(-req.prompt_len // bs) - len(hit_blocks)
            req.state = RUNNING
            self.running.append(req)
            new.append(req)
            if req.scheduled is None:
                req.scheduled = now
                req.cached_tokens = hit_tokens
                if self.observer:
                    self.observer.on_scheduled(req, now, req.prompt_len, hit_tokens)

        if not self.running:
            # Everything was preempted or rejected; nothing computes this iteration.
            return StepOutcome(now, now, self.iteration, 0, 0, 0, [], rejected, preempted)

        # 3. Duration of this iteration.
        batch = len(self.running)
        dur = cfg.decode_base_s + cfg.decode_per_seq_s * batch
        if new:
            dur += cfg.prefill_base_s + cfg.prefill_per_token_s * prefill_tokens
        end = now + dur / cfg.speed

        # 4. One token for every running sequence, at the end of the iteration.
        emitted = list(self.running)
        finished: list[Request] = list(rejected)
        n_rej = len(rejected)
        obs = self.observer
        for req in emitted:
            req.generated += 1
            if req.first_token is None:
                req.first_token = end
                if obs:
                    obs.on_first_token(req, end)
            elif obs:
                obs.on_token(req, end, end - (req.last_token or end))
            req.last_token = end
            reason = self._finish_reason(req)
            if reason is not None:
                req.finish_reason = reason
                req.finish = end
                req.state = FINISHED
                finished.append(req)
        if len(finished) > n_rej:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
            for req in finished[n_rej:]:
                self._free(req)
                if obs:
                    obs.on_finish(req, end)
        out = StepOutcome(
            now, end, self.iteration, batch, prefill_tokens, len(new), emitted, finished, preempted, reused, missed
        )
        if obs:
            obs.on_step(out)
        return out

    def _finish_reason(self, req: Request) -> str | None:
        if req.generated >= req.max_tokens or req.num_tokens >= self.config.max_model_len:
            return "length"
        if not req.ignore_eos and req.generated >= req.min_tokens and req.generated >= req.eos_len:
            return "stop"
        return None

    def _free(self, req: Request) -> None:
        # Release tail blocks first so the LRU evicts the end of a sequence before its shared prefix.
        for b in reversed(req.blocks):
            self.pool.release(b)
        req.blocks = []

    def _preempt(self, req: Request, now: float) -> None:
        self.running.remove(req)
        self._free(req)
        req.state = WAITING
        req.num_preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)
        if self.observer:
            self.observer.on_preempt(req, now)
