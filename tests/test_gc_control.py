"""Automatic garbage collection paused by several holders at once: it comes back with the last
holder, never with the first to finish (a digest's pause ending during a key press's must not end
the key's), and only if it was on when the first began."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator

import pytest

from console import gc_control
from console.ui.input_gate import InputGate


@pytest.fixture(autouse=True)
def _collection_on() -> Iterator[None]:
    assert gc.isenabled() and gc_control.depth() == 0
    yield
    assert gc_control.depth() == 0
    gc.enable()


def test_the_last_holder_turns_collection_back_on() -> None:
    gc_control.pause()
    gc_control.pause()
    assert not gc.isenabled()
    gc_control.resume()
    assert not gc.isenabled()  # one holder left
    gc_control.resume()
    assert gc.isenabled()
    gc_control.resume()  # more resumes than pauses: nothing to end, and no depth below zero
    assert gc.isenabled() and gc_control.depth() == 0


def test_collection_off_before_the_first_holder_stays_off() -> None:
    gc.disable()
    with gc_control.paused():
        pass
    assert not gc.isenabled()
    gc.enable()


def test_holders_on_many_threads_leave_collection_on_and_count_nothing() -> None:
    start = threading.Barrier(8)
    seen_off: list[bool] = []

    def work() -> None:
        start.wait()
        for _ in range(2000):
            with gc_control.paused():
                seen_off.append(not gc.isenabled())

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(seen_off) and len(seen_off) == 16000
    assert gc.isenabled() and gc_control.depth() == 0


def test_a_digest_finishing_during_a_key_press_leaves_collection_paused_for_the_key() -> None:
    """The race that let a young collection into a key's frame: a payload's normalise (its own
    pause) ends while the UI's hold is in force."""
    gate = InputGate()
    digest_may_end = threading.Event()
    digest_paused = threading.Event()

    def digest() -> None:
        with gc_control.paused():
            digest_paused.set()
            digest_may_end.wait(5)

    worker = threading.Thread(target=digest)
    worker.start()
    assert digest_paused.wait(5)

    async def key() -> tuple[bool, bool]:
        gate.hold(0.3, pause_gc=True)  # a key press while the digest is in its pause
        digest_may_end.set()
        await asyncio.to_thread(worker.join, 5)
        during = gc.isenabled()
        await asyncio.sleep(0.45)
        return during, gc.isenabled()

    during, after = asyncio.run(key())
    assert (during, after) == (False, True)
    assert gate.gc_paused > 0.25


def test_the_start_up_pause_ends_once_with_a_freeze_however_often_resumed() -> None:
    gc_control.startup_pause()
    gc_control.startup_pause()
    assert not gc.isenabled() and gc_control.depth() == 1
    with gc_control.paused():  # a digest during start-up
        gc_control.startup_resume()
        assert not gc.isenabled()  # the digest still holds its pause
    assert gc.isenabled() and gc.get_freeze_count() > 0
    gc_control.startup_resume()
    assert gc.isenabled() and gc_control.depth() == 0
    gc.unfreeze()
