"""The bench's progress comes back from its child process as typed events (console/client/progress.py),
in the order of the run: each engine's run starts, its levels report progress, then each is done."""

from __future__ import annotations

import asyncio

from console.client.bench import BenchConfig, check_ready, run_in_subprocess
from console.client.loadgen import LevelSpec
from console.client.progress import BenchEvent, LevelDone, LevelProgress, RunStarted
from console.client.stream import GenParams
from console.client.workloads import WorkloadSpec
from console.config import parse_engine_ref
from tests.client.simproc import sims


def test_progress_events_are_typed_and_in_run_order() -> None:
    with sims(("vllm", "--speed", "20"), ("sglang", "--speed", "20")) as (a, b):
        engines = (parse_engine_ref(a.ref).target, parse_engine_ref(b.ref).target)
        cfg = BenchConfig(engines=engines, levels=(LevelSpec("closed", 2, num_prompts=4),),
                          workload=WorkloadSpec(input_len=16, output_len=4),
                          params=GenParams(max_tokens=4, fixed_length=True), gpu="none", scrape_metrics=False)
        models = asyncio.run(check_ready(engines))
        events: list[BenchEvent] = []
        doc = run_in_subprocess(cfg, models, events.append, quiet=True)
    assert len(doc["runs"]) == 2
    starts = [e for e in events if isinstance(e, RunStarted)]
    assert [(e.engine, e.position, e.of) for e in starts] == [(a.ref, 0, 2), (b.ref, 1, 2)]
    done = [e for e in events if isinstance(e, LevelDone)]
    # 4 measured requests; the 2 warmup ones (C=2) are not counted in the level's result.
    assert [(e.engine, e.level, e.completed, e.failed) for e in done] == [(a.ref, "C=2", 4, 0), (b.ref, "C=2", 4, 0)]
    assert all(e.ttft_p50_ms is not None and e.ttft_p50_ms > 0 for e in done)
    # Each engine's events lie between its start and its level's end; the last progress report counts
    # the 4 measured requests against the 4 asked for, and the 2 warmup ones apart (never "6/6").
    for start, end in zip(starts, done, strict=True):
        own = events[events.index(start) + 1 : events.index(end)]
        assert own and all(isinstance(e, LevelProgress) and e.engine == start.engine for e in own)
        last = own[-1]
        assert isinstance(last, LevelProgress)
        assert (last.completed, last.total, last.errors, last.warmup_completed, last.warmup_total) == (4, 4, 0, 2, 2)
        assert last.counts() == "4/4 (+2 warmup)"
        assert all(e.total == 4 and e.warmup_total == 2 for e in own if isinstance(e, LevelProgress))
