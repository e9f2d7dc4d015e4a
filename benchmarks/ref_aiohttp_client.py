"""Reference streaming client written the way vLLM's and SGLang's benchmark clients work.

As in vllm/benchmarks/lib/endpoint_request_func.py (https://github.com/vllm-project/vllm) and
sglang/bench_serving.py (https://github.com/sgl-project/sglang): one ``aiohttp.ClientSession``
(``TCPConnector(limit=0)``, large read buffer), ``async for line in response.content`` (line iteration),
strip ``data: ``, stdlib ``json.loads`` per event, ``time.perf_counter()`` per event, TTFT at the first
event with ``choices`` text, one ITL sample per chunk, output tokens from ``usage.completion_tokens``,
on the default asyncio event loop. Used as the baseline by ``client_capacity.py``.

Run alone:  python benchmarks/ref_aiohttp_client.py --url http://127.0.0.1:8000 --concurrency 64 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class RefOutput:
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    output_tokens: int = 0
    events: int = 0
    generated_text: str = ""
    success: bool = False
    error: str = ""


async def ref_request(session: aiohttp.ClientSession, url: str, payload: dict[str, Any]) -> RefOutput:
    """vLLM ``async_request_openai_completions`` style (line iteration + json.loads)."""
    out = RefOutput()
    st = time.perf_counter()
    most_recent = st
    async with session.post(url, json=payload) as response:
        if response.status != 200:
            out.error = response.reason or str(response.status)
            return out
        async for chunk_bytes in response.content:
            chunk_bytes = chunk_bytes.strip()
            if not chunk_bytes:
                continue
            chunk = chunk_bytes.decode("utf-8").removeprefix("data: ")
            if chunk == "[DONE]":
                continue
            data = json.loads(chunk)
            if choices := data.get("choices"):
                text = choices[0].get("text")
                timestamp = time.perf_counter()
                if out.ttft == 0.0:
                    out.ttft = timestamp - st
                else:
                    out.itl.append(timestamp - most_recent)
                most_recent = timestamp
                out.generated_text += text or ""
                out.events += 1
            if usage := data.get("usage"):
                out.output_tokens = usage.get("completion_tokens") or out.output_tokens
        out.latency = most_recent - st
        out.success = True
    return out


def make_session(concurrency: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, keepalive_timeout=60)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=6 * 60 * 60),
        read_bufsize=10 * 1024 * 1024,
    )


async def closed_loop(urls: list[str], payload: dict[str, Any], concurrency: int, seconds: float) -> dict[str, Any]:
    """C workers, each sending the next request as soon as its previous one finished, for ``seconds``."""
    events = 0
    requests = 0
    errors = 0
    stop_at = time.perf_counter() + seconds
    async with make_session(concurrency) as session:

        async def worker(i: int) -> None:
            nonlocal events, requests, errors
            url = urls[i % len(urls)]
            while time.perf_counter() < stop_at:
                out = await ref_request(session, url, payload)
                events += out.events
                requests += 1
                errors += 0 if out.success else 1

        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        cpu1, t1 = time.process_time(), time.perf_counter()
    return {"events": events, "requests": requests, "errors": errors, "cpu_s": cpu1 - cpu0, "wall_s": t1 - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", action="append", required=True, help="engine base URL (repeatable)")
    ap.add_argument("--model", default="Qwen/Qwen3-0.6B")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--output-len", type=int, default=256)
    args = ap.parse_args()
    payload = {"model": args.model, "prompt": "hello " * 16, "max_tokens": args.output_len, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0.0}  # fmt: skip
    res = asyncio.run(closed_loop([u.rstrip("/") + "/v1/completions" for u in args.url], payload,
                                  args.concurrency, args.seconds))  # fmt: skip
    eps = res["events"] / res["wall_s"]
    per_core = res["events"] / res["cpu_s"] if res["cpu_s"] else float("nan")
    print(f"reference aiohttp+json: {res['events']} events in {res['wall_s']:.1f}s = {eps:,.0f} events/s, "
          f"client CPU {res['cpu_s']:.2f}s -> {per_core:,.0f} events per CPU-second; "
          f"{res['requests']} requests, {res['errors']} errors")  # fmt: skip


if __name__ == "__main__":
    main()
