"""What the overview's trends cost to draw at each refresh, at 80x24 and 200x50.

    .venv/bin/python benchmarks/overview_trends.py [--rounds 300] [--tree DIR]

The overview of the frozen test fleet (4 engines, 8 GPUs) in a headless Pilot, its history 400
points a series at 1 s; before each drawing every series gets its next point (as the hub appends
one a refresh) and the fleet's time moves on by a second. Timed: ``OverviewScreen._sparks``, the
trends from the history to the Text the line shows (not Textual's drawing of that line), CPU
(time.process_time) per call, median and 90th percentile over ``--rounds``. ``--tree DIR``
measures another checkout (its ``console`` and ``tests``: ``git archive REV | tar -x -C DIR``) the
same way, for a before/after in one session. Prints figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the checkout to measure (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    import console

    print(f"tree: {Path(console.__file__).resolve().parents[1]}")
    for size in ((80, 24), (200, 50)):
        asyncio.run(_measure(size, args.rounds))


async def _measure(size: tuple[int, int], rounds: int) -> None:
    from console.profiles import load_profiles
    from console.telemetry.metrics.history import History
    from console.telemetry.source import ENGINE_SERIES
    from console.ui.app import DeckApp, UiOptions
    from tests.ui.frozen import T0, FrozenSource, frozen_fleet

    fleet = frozen_fleet()
    history = History()
    now = [T0]

    def value(n: int, m: int, t: float) -> float:
        return 100.0 * (1.2 + math.sin((t + 7 * n + 3 * m) / 37.0))

    def append(t: float) -> None:
        for n, e in enumerate(fleet.engines):
            for m, metric in enumerate(ENGINE_SERIES):
                history.append((e.name, metric), t, value(n, m, t))

    for k in range(400):
        append(T0 - 399 + k)
    src = FrozenSource(fleet, history)
    app = DeckApp(src, options=UiOptions(simulated=True), profiles=load_profiles(), clock=lambda: now[0])
    async with app.run_test(size=size) as pilot:
        for _ in range(3):
            await pilot.pause()
        screen = app.screen
        draw = screen._sparks  # type: ignore[attr-defined]
        samples = []
        lines = 0
        for _ in range(rounds):
            now[0] += 1.0
            append(now[0])
            snap = replace(fleet, taken_at=now[0])
            t0 = time.process_time()
            text, _key, lines = draw(snap)
            samples.append(time.process_time() - t0)
        samples.sort()
        print(f"{size[0]}x{size[1]}: {statistics.median(samples) * 1e3:.2f} ms median, "
              f"{samples[int(0.9 * len(samples))] * 1e3:.2f} ms p90 per drawing; {lines} lines, "
              f"{len(text.plain)} characters")


if __name__ == "__main__":
    main()
