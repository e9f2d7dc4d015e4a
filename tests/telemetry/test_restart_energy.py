"""Right after an engine restarts, its tokens per joule is not a figure of the run before (issue 31
item 11): a real simulator under load, stopped, started again on the same port; the hub (simulated
GPUs, so energy is counted) shows no tok/J from before the stop while the new run generated nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from console.config import parse_engine_ref
from console.model import EngineSnapshot, FleetSnapshot
from console.telemetry.hub import Hub
from tests.client.simproc import SimProc, chat_load


def _engine(hub: Hub) -> EngineSnapshot:
    return hub.latest().engines[0]


def _until(ok: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not ok() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ok()


def test_tokens_per_joule_after_a_restart_is_not_the_previous_runs() -> None:
    first = SimProc("vllm", "--speed", "4")
    first.wait_ready()
    port = first.port
    hub = Hub([parse_engine_ref(first.ref)], refresh=0.25, gpu_source="simulated")
    seen: list[FleetSnapshot] = []
    hub.subscribe(seen.append)
    hub.start()
    second: SimProc | None = None
    try:
        stop = threading.Event()
        workers = [threading.Thread(target=chat_load, args=(first.url, stop), daemon=True) for _ in range(4)]
        for w in workers:
            w.start()
        try:
            _until(lambda: ((e := _engine(hub)).energy is not None and (e.energy.tokens_per_joule or 0) > 0))
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=15)
        before = _engine(hub).energy
        assert before is not None and before.tokens_per_joule is not None and before.tokens_per_joule > 0
        first.stop()
        _until(lambda: not _engine(hub).reachable)
        gone = _engine(hub).energy
        # Not live: no windowed figure (the GPU's energy is still counted in total_joules).
        assert gone is not None and gone.tokens_per_joule is None and gone.window_s is None
        second = SimProc("vllm", "--speed", "4", port=port)
        second.wait_ready()
        mark = len(seen)
        _until(lambda: sum(e.live for s in seen[mark:] for e in s.engines) >= 8)
        live = [s for s in seen[mark:] if s.engines[0].live]
        back = [s.engines[0] for s in live]
        # The new run generated nothing: its tok/J is none yet, or 0 over a window of its own, never
        # the run before's (that one's tokens are within the 60 s window).
        assert all(e.energy is not None and e.energy.tokens_per_joule in (None, 0.0) for e in back), \
            [e.energy.tokens_per_joule if e.energy else "no energy" for e in back]
        assert back[0].energy is not None and back[0].energy.tokens_per_joule is None
        assert any(e.energy is not None and e.energy.tokens_per_joule == 0.0 for e in back)
        newest = back[-1].energy
        assert newest is not None and newest.window_s is not None
        assert newest.window_s <= live[-1].taken_at - live[0].taken_at + 1e-6  # from the new run's start
    finally:
        hub.stop()
        first.stop()
        if second is not None:
            second.stop()
