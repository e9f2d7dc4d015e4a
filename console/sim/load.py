"""Synthetic client load for a simulated fleet: streaming chat requests whose concurrency drifts.

A mix of shared-prefix prompts (a few long "system prompts" + a short question, so prefix caches
hit) and random prompts (so they miss), modest concurrency that rises and falls over a few minutes so
KV usage, queue length and hit rates visibly move. Responses are read as raw bytes, not parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import threading
import time
from dataclasses import dataclass

from console.sim.tokens import WORDS


@dataclass
class LoadTarget:
    profile: str
    url: str
    model: str
    api_key: str | None = None


def make_prompt(rng: random.Random, system_prompts: list[str], shared_fraction: float) -> str:
    question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 40))) + "?"
    if rng.random() < shared_fraction:
        return rng.choice(system_prompts) + "\n\n" + question
    body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(80, 500)))
    return body + "\n\n" + question


def concurrency_at(t: float, phase: float, low: int, high: int, period: float = 150.0) -> int:
    """Target number of in-flight requests at time t: a slow wave with a faster wobble."""
    wave = 0.5 + 0.4 * math.sin(2 * math.pi * (t / period + phase)) + 0.1 * math.sin(2 * math.pi * t / 23.0)
    return max(low, min(high, round(low + (high - low) * wave)))


async def _worker(session: object, target: LoadTarget, idx: int, high: int, rng: random.Random,
                  system_prompts: list[str], t0: float, phase: float, stop: asyncio.Event) -> None:
    import aiohttp

    assert isinstance(session, aiohttp.ClientSession)
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    while not stop.is_set():
        if idx >= concurrency_at(time.monotonic() - t0, phase, 1, high):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
            continue
        body = {
            "model": target.model,
            "messages": [{"role": "user", "content": make_prompt(rng, system_prompts, 0.7)}],
            "max_tokens": rng.choice((32, 64, 128, 256)),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        try:
            async with session.post(f"{target.url}/v1/chat/completions", json=body, headers=headers) as resp:
                async for _ in resp.content.iter_any():
                    if stop.is_set():
                        break
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def run_load(targets: list[LoadTarget], stop: asyncio.Event, *, seed: int = 0, high: int = 24) -> None:
    import aiohttp

    rng = random.Random(seed)
    # A few long shared system prompts per fleet: every engine sees the same prefixes.
    system_prompts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(200, 600))) for _ in range(4)]
    t0 = time.monotonic()
    conn = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=5)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout) as session:
        tasks = []
        for n, target in enumerate(targets):
            limit = 12 if target.profile == "llamacpp" else high
            for i in range(limit):
                wrng = random.Random(seed * 7919 + n * 131 + i)
                tasks.append(asyncio.create_task(
                    _worker(session, target, i, limit, wrng, system_prompts, t0, n / max(1, len(targets)), stop)))
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class LoadThread:
    """Runs ``run_load`` on its own event loop in a daemon thread (usable from sync code)."""

    def __init__(self, targets: list[LoadTarget], *, seed: int = 0) -> None:
        self._targets = targets
        self._seed = seed
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="sim-load", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._started.wait(5.0)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def main() -> None:
            self._stop = asyncio.Event()
            self._started.set()
            await run_load(self._targets, self._stop, seed=self._seed)

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(ev.set)
        self._thread.join(timeout)
