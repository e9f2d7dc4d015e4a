"""Load generation for one level: closed loop at concurrency C, or open loop at rate λ.

Rules: request bodies are encoded before the level starts (no JSON work
on the hot path); closed loop = C workers pulling the next prompt the moment they are free; the
first C requests are the warmup; open loop = absolute precomputed send times (``arrivals``), an
optional in-flight cap, and ``t_sched`` kept so schedule lag and ``E2E_from_sched`` are reported.
While the level runs, a 50 ms ticker measures event-loop lag, process CPU time is read before and
after, the engine's ``/metrics`` is sampled once a second (KV usage/running/waiting peaks) and
the GPU source (if any) once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns as _perf_ns  # the clock of every request timestamp (http.py's too)
from typing import Any, Literal

import orjson

from console import gc_control
from console.client.arrivals import Arrival, schedule
from console.client.gpu import GpuSampler, SimulatedGpuCollect
from console.client.progress import LevelProgress, ProgressFn
from console.client.servermetrics import LevelServerStats, MetricsScraper, counter_total, gauge
from console.client.stream import (
    EndpointKind,
    GenParams,
    LengthMode,
    auth_headers,
    build_body,
    endpoint_path,
    max_tokens_of,
)
from console.client.stream import stream_request as _stream_request
from console.client.timing import RequestRecord
from console.client.workloads import Prompt
from console.profiles import EngineProfile
from console.target import EngineTarget
from console.transport.http import Cancellable, HTTPClient

PROGRESS_HZ = 10.0
# Stop sending in a level whose error rate exceeds this after at least STOP_MIN_REQUESTS (6.5 item 3).
STOP_ERROR_RATE = 0.05
STOP_MIN_REQUESTS = 20


@dataclass(frozen=True, slots=True)
class Target:
    """One engine as the load generator sees it: the engine, the model it is asked for, the endpoint."""

    engine: EngineTarget
    model: str
    kind: EndpointKind = "completions"

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def profile(self) -> EngineProfile:
        return self.engine.profile

    @property
    def url(self) -> str:
        return self.engine.url

    @property
    def path(self) -> str:
        return endpoint_path(self.profile.api, self.kind)


@dataclass(frozen=True, slots=True)
class LevelSpec:
    mode: Literal["closed", "open"] = "closed"
    concurrency: int = 1  # closed: workers; open: in-flight cap (0 = none)
    rate: float | None = None
    arrival: Arrival = "poisson"
    burstiness: float = 1.0
    num_prompts: int = 64  # measured requests (after the warmup)
    warmup: int | None = None  # default: C requests (closed), 0 (open)
    max_duration: float | None = None  # stop sending after this many seconds
    seed: int = 0

    @property
    def label(self) -> str:
        if self.mode == "closed":
            return f"C={self.concurrency}"
        cap = f", cap {self.concurrency}" if self.concurrency else ""
        return f"rate={self.rate:g}/s {self.arrival}{cap}"

    @property
    def warmup_count(self) -> int:
        if self.warmup is not None:
            return self.warmup
        return self.concurrency if self.mode == "closed" else 0

    def describe(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "rate": self.rate,
            "arrival": self.arrival if self.mode == "open" else None,
            "burstiness": self.burstiness if self.mode == "open" else None,
            "num_prompts": self.num_prompts,
            "warmup": self.warmup_count,
            "max_duration": self.max_duration,
        }


@dataclass(slots=True)
class SelfCheck:
    loop_lag_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    events: int = 0

    @property
    def cpu_percent(self) -> float:
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0


@dataclass(slots=True)
class LevelRaw:
    spec: LevelSpec
    records: list[RequestRecord]
    length_mode: LengthMode
    t_start_ns: int
    t_end_ns: int
    w0_ns: int | None  # end of warmup
    w1_ns: int | None  # last measured send (closed) / last send (open)
    selfcheck: SelfCheck
    server: LevelServerStats
    gpu: dict[str, Any]
    stopped_early: str = ""  # why sending stopped before every prompt was sent ("" = it did not)
    stopped_on_errors: bool = False  # ... because too many requests failed (not a time limit)


class _LoopLag:
    """A ticker that sleeps 50 ms and records how late it wakes (event-loop lag)."""

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        period_ns = int(self.period * 1e9)
        nxt = _perf_ns() + period_ns
        while True:
            await asyncio.sleep(max(0.0, (nxt - _perf_ns()) / 1e9))
            now = _perf_ns()
            self.samples.append(max(0.0, (now - nxt) / 1e6))
            nxt += period_ns
            if nxt < now:  # never try to catch up a backlog of ticks
                nxt = now + period_ns

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


def encode_bodies(target: Target, prompts: Sequence[Prompt], params: GenParams) -> tuple[list[bytes], LengthMode]:
    bodies: list[bytes] = []
    mode: LengthMode = "natural"
    for p in prompts:
        gp = params
        if p.output_len is not None and p.output_len != params.max_tokens:
            gp = GenParams(
                max_tokens=p.output_len, temperature=params.temperature, fixed_length=params.fixed_length,
                top_p=params.top_p, seed=params.seed, stop=params.stop, extra=params.extra,
            )  # fmt: skip
        content: Any = p.chat_messages() if target.kind == "chat" else p.completion_text()
        body, mode = build_body(target.profile.api, target.kind, target.model, content, gp)
        bodies.append(orjson.dumps(body))
    return bodies, mode


async def run_level(
    target: Target,
    spec: LevelSpec,
    prompts: Sequence[Prompt],
    params: GenParams,
    *,
    progress: ProgressFn | None = None,
    gpu: GpuSampler | None = None,
    scrape_metrics: bool = True,
    request_timeout: float | None = 600.0,
    encoded: tuple[list[bytes], LengthMode] | None = None,
    stop_on_errors: bool = True,
) -> LevelRaw:
    """Run one level. ``prompts`` must hold warmup + measured prompts (warmup first).

    ``encoded``: the bodies from ``encode_bodies`` if the caller prepared them already."""
    bodies, lmode = encoded if encoded is not None else encode_bodies(target, prompts, params)
    # What a request asks for at most (a usage claim above it fails the request), per output length.
    limits: dict[int | None, int | None] = {}

    def limit(out_len: int | None) -> int | None:
        if out_len not in limits:
            asked = out_len if out_len is not None else params.max_tokens
            limits[out_len] = max_tokens_of({"max_tokens": asked, **params.extra})
        return limits[out_len]
    client = HTTPClient(target.url)
    api_key = target.engine.api_key  # read once, before the level starts
    headers = auth_headers(api_key)
    path = target.path
    warm = spec.warmup_count
    records: list[RequestRecord] = []
    stop_reason = ""
    stopped_on_errors = False
    completed = 0  # every request finished, warmup included (the error-rate stop counts them all)
    warmup_completed = 0
    errors = 0
    completions_ns: list[int] = []
    last_progress = 0
    tokens_events = 0

    scraper = MetricsScraper(target.profile, target.url, api_key) if scrape_metrics else None
    server = LevelServerStats()
    before = await scraper.scrape() if scraper else None
    if scraper and before is None:
        server.error = scraper.error or "metrics not available"

    def report(force: bool = False) -> None:
        nonlocal last_progress
        if progress is None:
            return
        now = _perf_ns()
        if not force and now - last_progress < 1e9 / PROGRESS_HZ:
            return
        last_progress = now
        progress(LevelProgress(target.name, spec.label, completed=completed - warmup_completed, errors=errors,
                               total=len(bodies) - warm, events=tokens_events, warmup_completed=warmup_completed,
                               warmup_total=warm))  # fmt: skip

    def done(rec: RequestRecord) -> None:
        nonlocal completed, warmup_completed, errors, tokens_events, stop_reason, stopped_on_errors
        completed += 1
        warmup_completed += int(rec.warmup)
        completions_ns.append(_perf_ns())
        tokens_events += len(rec.event_t_ns)
        if not rec.ok and not rec.cut:
            errors += 1
            if (stop_on_errors and not stop_reason and completed >= STOP_MIN_REQUESTS
                    and errors / completed > STOP_ERROR_RATE):  # fmt: skip
                stop_reason = f"error rate {errors / completed:.0%} > {STOP_ERROR_RATE:.0%} after {completed} requests"
                stopped_on_errors = True
        report()

    inflight: set[Cancellable] = set()  # with --max-duration: the requests under way
    deadline_passed = False

    def cut_at_deadline() -> None:
        nonlocal stop_reason, deadline_passed
        deadline_passed = True
        stop_reason = stop_reason or max_duration_reason
        for handle in list(inflight):
            handle.cancel()

    async def one(i: int, t_sched: int) -> None:
        rec = RequestRecord(index=i, prompt_id=prompts[i].id, t_sched_ns=t_sched, warmup=i < warm)
        records.append(rec)
        try:
            if deadline is None:
                await _stream_request(client, path, bodies[i], rec, headers=headers, timeout=request_timeout,
                                      max_tokens=limit(prompts[i].output_len))  # fmt: skip
            else:
                # --max-duration bounds every request, warmup included: one still streaming at
                # the deadline is cut off there (``cut_at_deadline``), not left to run for the
                # request timeout.
                handle = Cancellable()
                if deadline_passed:  # its worker looked just before the deadline: not sent at all
                    handle.cancel()
                else:
                    inflight.add(handle)
                    try:
                        await _stream_request(client, path, bodies[i], rec, headers=headers,
                                              timeout=request_timeout, max_tokens=limit(prompts[i].output_len),
                                              cancel=handle)  # fmt: skip
                    finally:
                        inflight.discard(handle)
                if handle.cancelled:
                    rec.cancelled = True
                    rec.cut = rec.error is None  # a request that had failed already stays failed
                    rec.error = rec.error or f"cancelled: still running when the {max_duration_reason}"
        except Exception as exc:  # a failure no check foresaw ends this request, not the level
            rec.error = rec.error or f"client error: {type(exc).__name__}: {str(exc)[:200]}"
        done(rec)

    lag = _LoopLag()
    sampler_stop = asyncio.Event()

    async def sample_server() -> None:
        if gpu is not None:  # energy at the start, so the steady window is covered from its first instant
            await gpu.sample()
        while not sampler_stop.is_set():
            try:
                await asyncio.wait_for(sampler_stop.wait(), 1.0)
            except TimeoutError:
                pass
            if scraper is not None and before is not None:
                r = await scraper.scrape()
                if r is not None:
                    server.sample(r)
                    if gpu is not None and isinstance(gpu.collector, SimulatedGpuCollect):
                        gpu.collector.feed(
                            gauge(r, "running", "sum"), gauge(r, "kv_usage"), counter_total(r, "generation_tokens")
                        )
            if gpu is not None:
                await gpu.sample()

    gc_control.measuring_begin()  # no collector pauses inside a level
    cpu0 = time.process_time()
    t_start = _perf_ns()
    lag.start()
    if gpu is not None:
        gpu.begin()
    sampler = asyncio.get_running_loop().create_task(sample_server())
    deadline = t_start + int(spec.max_duration * 1e9) if spec.max_duration else None
    max_duration_reason = f"max duration {spec.max_duration:g}s reached" if spec.max_duration else ""
    loop = asyncio.get_running_loop()
    cutter = loop.call_later(spec.max_duration, cut_at_deadline) if spec.max_duration else None
    last_send = 0
    try:
        if spec.mode == "closed":
            nxt = 0
            n = len(bodies)

            async def worker() -> None:
                nonlocal nxt, stop_reason, last_send
                while nxt < n and not stop_reason:
                    if deadline is not None and _perf_ns() > deadline:
                        stop_reason = stop_reason or max_duration_reason
                        return
                    i = nxt
                    nxt += 1
                    t = _perf_ns()
                    last_send = t
                    await one(i, t)

            await asyncio.gather(*(worker() for _ in range(max(1, spec.concurrency))))
        else:
            assert spec.rate is not None
            offsets = schedule(len(bodies), spec.rate, arrival=spec.arrival, burstiness=spec.burstiness, seed=spec.seed)
            sem = asyncio.Semaphore(spec.concurrency) if spec.concurrency > 0 else None
            tasks: list[asyncio.Task[None]] = []
            start = _perf_ns() + 5_000_000  # a little lead so the first send is not already late

            async def capped(i: int, t_sched: int) -> None:
                assert sem is not None
                async with sem:
                    await one(i, t_sched)

            for i, off in enumerate(offsets):
                t_target = start + int(off * 1e9)
                delay = (t_target - _perf_ns()) / 1e9
                if delay > 0:
                    await asyncio.sleep(delay)
                if deadline is not None and _perf_ns() > deadline:
                    stop_reason = stop_reason or max_duration_reason
                if stop_reason:
                    break
                last_send = t_target
                coro = capped(i, t_target) if sem is not None else one(i, t_target)
                tasks.append(asyncio.get_running_loop().create_task(coro))
            if tasks:
                await asyncio.gather(*tasks)
    finally:
        if cutter is not None:
            cutter.cancel()
        t_end = _perf_ns()
        cpu1 = time.process_time()
        await lag.stop()
        sampler_stop.set()
        await sampler
        if gpu is not None:  # and at the end, so the window reaches the last send (a hung driver: skipped)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(gpu.sample(), 2.0)
        gc_control.measuring_end()
        client.close()
    after = await scraper.scrape() if scraper else None
    if scraper:
        server.finish(target.profile, before, after)
        if after is None and not server.error:
            server.error = scraper.error
        scraper.close()
    report(force=True)

    # Measurement window (6.4): w0 = end of warmup, w1 = last send of the level.
    sends = sorted(r.t_send_ns for r in records if not r.warmup)
    w0: int | None
    if spec.mode == "closed":
        w0 = sorted(completions_ns)[warm - 1] if 0 < warm <= len(completions_ns) else (sends[0] if sends else None)
    else:
        w0 = sends[0] if sends else None
    w1 = sends[-1] if sends else None
    if spec.mode == "open":
        w1 = last_send or w1
    sc = SelfCheck(lag.samples, cpu1 - cpu0, (t_end - t_start) / 1e9, tokens_events)
    records.sort(key=lambda r: r.index)
    return LevelRaw(
        spec, records, lmode, t_start, t_end, w0, w1, sc, server, gpu.result() if gpu else {}, stop_reason,
        stopped_on_errors,
    )  # fmt: skip
