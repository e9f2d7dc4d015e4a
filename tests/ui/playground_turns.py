"""Finished playground requests with fixed timings, for snapshot and Pilot tests of the playground."""

from __future__ import annotations

from typing import Any


def finished_turn(engine: str, url: str, reply: str, gap_ms: float, ttft_ms: float) -> Any:
    """A finished playground request with fixed timings (the real record and metrics types)."""
    from console.client.playground import Turn
    from console.client.timing import RequestRecord, compute

    t0 = 1_000_000_000
    words = reply.split(" ")
    events = [t0 + int(ttft_ms * 1e6) + int(i * gap_ms * 1e6) for i in range(len(words))]
    rec = RequestRecord(index=0, t_send_ns=t0, t_headers_ns=t0 + 1_000_000, t_first_visible_ns=events[0],
                        t_done_ns=events[-1], event_t_ns=events, event_usage=[1] * len(words), prompt_tokens=14,
                        completion_tokens=len(words), finish_reason="length", status=200, text=reply)  # fmt: skip
    return Turn(
        engine,
        "Qwen/Qwen3-0.6B",
        [],
        {},
        url,
        None,
        rec,
        metrics=compute(rec),
        engine_state={"running": 8, "waiting": 0, "kv_usage": 0.35},
        started_at=1_700_000_000.0,
    )


REPLY = (
    "The prefix cache keeps the KV blocks of prompts it has seen.\n\n"
    "- A request that starts with the same tokens reuses them.\n"
    "- Prefill then only runs on the new part of the prompt.\n"
    "- Chat with a long system prompt gains the most.\n\n"
    "Watch the hit rate: near 0 means every prompt is unique, and the cache only costs memory.\n\n"
    "vLLM calls it automatic prefix caching; SGLang uses a radix tree."
)
