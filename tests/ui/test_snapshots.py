"""Screen snapshots (pytest-textual-snapshot) of a fleet frozen to deterministic values.

Update after an intended visual change with: pytest tests/ui/test_snapshots.py --snapshot-update
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.ui.conftest import AppFactory

SnapCompare = Any


async def _settle(pilot: Pilot[Any]) -> None:
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_overview(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(), terminal_size=size, run_before=_settle)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_engine_detail(snap_compare: SnapCompare, make_app: AppFactory, size: tuple[int, int]) -> None:
    async def open_detail(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("down", "down", "down", "enter")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=open_detail)


def test_gpus_160x48(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    async def open_gpus(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("g")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=open_gpus)


def test_help_read_only_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    async def open_help(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(make_app(read_only=True), terminal_size=(80, 24), run_before=open_help)


def _turn(engine: str, url: str, reply: str, gap_ms: float, ttft_ms: float) -> Any:
    """A finished playground request with fixed timings (the real record and metrics types)."""
    from console.client.playground import Turn
    from console.client.timing import RequestRecord, compute

    t0 = 1_000_000_000
    words = reply.split(" ")
    events = [t0 + int(ttft_ms * 1e6) + int(i * gap_ms * 1e6) for i in range(len(words))]
    rec = RequestRecord(index=0, t_send_ns=t0, t_headers_ns=t0 + 1_000_000, t_first_visible_ns=events[0],
                        t_done_ns=events[-1], event_t_ns=events, event_usage=[1] * len(words), prompt_tokens=14,
                        completion_tokens=len(words), finish_reason="length", status=200, text=reply)  # fmt: skip
    return Turn(engine, "Qwen/Qwen3-0.6B", [], {}, url, None, rec, metrics=compute(rec),
                engine_state={"running": 8, "waiting": 0, "kv_usage": 0.35}, started_at=1_700_000_000.0)


REPLY = (
    "The prefix cache keeps the KV blocks of prompts it has seen.\n\n"
    "- A request that starts with the same tokens reuses them.\n"
    "- Prefill then only runs on the new part of the prompt.\n"
    "- Chat with a long system prompt gains the most.\n\n"
    "Watch the hit rate: near 0 means every prompt is unique, and the cache only costs memory.\n\n"
    "vLLM calls it automatic prefix caching; SGLang uses a radix tree."
)


def test_playground_split_reply_80x24(
    snap_compare: SnapCompare, make_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split view after a request: both replies with 8+ lines each, their timings, the summary."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()

    async def reply(pilot: Pilot[Any]) -> None:
        from console.ui.screens.playground import PlaygroundScreen

        await _settle(pilot)
        await pilot.press("P", "v")
        await _settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, PlaygroundScreen)
        turns = [_turn("vllm-a", "http://127.0.0.1:8000", REPLY, 21.0, 85.0),
                 _turn("sglang-b", "http://127.0.0.1:8001", REPLY.replace("radix tree", "radix tree too"), 23.5,
                       95.0)]  # fmt: skip
        await screen.show_turns("what does the prefix cache do?", turns,
                                "**you**: what does the prefix cache do?\n\n**assistant**: ")  # fmt: skip
        await _settle(pilot)
        await pilot.pause(0.2)  # the replies scroll to their end once laid out
        await _settle(pilot)

    try:
        assert snap_compare(make_app(), terminal_size=(80, 24), run_before=reply)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_bench_results_80x24(snap_compare: SnapCompare, make_app: AppFactory) -> None:
    """The labelled form and a finished A/B run's results (a recorded simulator run, see
    tests/ui/test_small_terminal.py) at 80x24."""
    from tests.ui.test_small_terminal import bench_doc

    async def results(pilot: Pilot[Any]) -> None:
        await _settle(pilot)
        await pilot.press("B")
        await _settle(pilot)
        pilot.app.screen._on_done(bench_doc())  # type: ignore[attr-defined]
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=results)
