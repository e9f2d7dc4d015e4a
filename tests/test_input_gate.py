"""Collection steps aside while the UI handles a key (issue 12: keys stay responsive at 64 engines)."""

from __future__ import annotations

import asyncio
import time

from console.ui.input_gate import InputGate


def test_an_open_gate_does_not_wait() -> None:
    gate = InputGate()
    started = time.monotonic()
    asyncio.run(gate.opened())
    assert time.monotonic() - started < 0.05
    assert gate.waited == 0.0


def test_a_hold_is_waited_out() -> None:
    gate = InputGate()
    gate.hold(0.2)
    assert 0.1 < gate.remaining() <= 0.2
    started = time.monotonic()
    asyncio.run(gate.opened(limit=2.0))
    took = time.monotonic() - started
    assert 0.15 <= took < 1.0, took
    assert gate.remaining() == 0.0 and gate.waited >= 0.15


def test_a_hold_renewed_again_and_again_never_waits_past_the_limit() -> None:
    gate = InputGate()

    async def keys_held_down() -> None:
        for _ in range(40):  # a key held down: a new hold every 30 ms for 1.2 s
            gate.hold(0.25)
            await asyncio.sleep(0.03)

    async def main() -> float:
        presser = asyncio.create_task(keys_held_down())
        await asyncio.sleep(0.01)
        started = time.monotonic()
        await gate.opened(limit=0.3)
        took = time.monotonic() - started
        presser.cancel()
        return took

    took = asyncio.run(main())
    assert 0.25 <= took < 0.8, took


def test_a_later_shorter_hold_does_not_cut_an_earlier_one_short() -> None:
    gate = InputGate()
    gate.hold(0.5)
    gate.hold(0.01)
    assert gate.remaining() > 0.4


def test_a_collector_starts_no_payload_work_while_the_ui_holds_the_gate() -> None:
    from concurrent.futures import Future, ThreadPoolExecutor
    from typing import Any

    from console.config import parse_engine_ref
    from console.telemetry.engine.collector import EngineCollector
    from console.ui.input_gate import GATE

    submitted: list[float] = []

    class Recording(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
            submitted.append(time.monotonic())
            return super().submit(fn, *args, **kwargs)

    async def main() -> float:
        with Recording(max_workers=1) as pool:
            c = EngineCollector(parse_engine_ref("vllm@http://127.0.0.1:9"), period=1.0, executor=pool, foreground=GATE)
            GATE.hold(0.3)
            held_at = time.monotonic()
            await c._digest(b"vllm:num_requests_running 1\n", time.monotonic())
            return held_at

    held_at = asyncio.run(main())
    assert len(submitted) == 1
    assert submitted[0] - held_at >= 0.25, "the payload's work started while the UI held the gate"


def test_a_hold_on_the_ui_loop_pauses_garbage_collection_until_it_ends() -> None:
    import gc

    gate = InputGate()

    async def main() -> tuple[bool, bool, bool]:
        gate.hold(0.15, pause_gc=True)
        during = gc.isenabled()
        await asyncio.sleep(0.05)
        gate.hold(0.15, pause_gc=True)  # renewed: still paused, and resumed only after the later end
        await asyncio.sleep(0.12)
        still = gc.isenabled()
        await asyncio.sleep(0.1)
        return during, still, gc.isenabled()

    assert gc.isenabled()
    during, still, after = asyncio.run(main())
    assert (during, still, after) == (False, False, True)
    assert not gate.gc_held and 0.15 <= gate.gc_paused < 0.6, gate.gc_paused


def test_keys_held_down_cannot_keep_garbage_collection_off() -> None:
    import gc

    from console.ui.input_gate import GC_PAUSE_MAX, GC_REST

    gate = InputGate()
    seen: list[tuple[float, bool]] = []

    async def main() -> None:
        start = time.monotonic()
        while time.monotonic() - start < GC_PAUSE_MAX + 0.6:  # a new hold every 20 ms
            gate.hold(0.25, pause_gc=True)
            seen.append((time.monotonic() - start, gc.isenabled()))
            await asyncio.sleep(0.02)
        gate.release()

    asyncio.run(main())
    assert gc.isenabled()
    on = [t for t, enabled in seen if enabled]
    # Paused from the first key to the cap, then on for the rest, then paused again.
    assert on and GC_PAUSE_MAX - 0.05 <= on[0] <= GC_PAUSE_MAX + 0.1, on
    assert on[-1] - on[0] >= GC_REST - 0.05, on
    assert not seen[-1][1]


def test_a_collector_someone_else_turned_off_is_left_off() -> None:
    import gc

    gate = InputGate()

    async def main() -> None:
        gate.hold(0.05, pause_gc=True)
        await asyncio.sleep(0.1)

    gc.disable()
    try:
        asyncio.run(main())
        assert not gc.isenabled() and not gate.gc_held
    finally:
        gc.enable()
    gate.hold(0.05, pause_gc=True)  # no running loop: nothing could resume it, so it is not paused
    assert gc.isenabled() and not gate.gc_held


def test_a_plain_hold_leaves_garbage_collection_alone() -> None:
    import gc

    gate = InputGate()

    async def main() -> bool:
        gate.hold(0.2)
        return gc.isenabled()

    assert asyncio.run(main()) and not gate.gc_held
