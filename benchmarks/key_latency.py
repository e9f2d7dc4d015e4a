"""Key -> screen change latency with many engines: the console on a real hub in this process.

    .venv/bin/python benchmarks/key_latency.py [--engines 64] [--series 2000] [--rounds 25] [--size 200x50]
        [--refresh 1]

The hub watches ``--engines`` engines with a payload of about ``--series`` vLLM series each (the
scale fleet of hub_cpu.py: shared simulators under load), in this process as in `enginedeck attach`,
so the keys compete with collection for the interpreter. The app runs headless under Textual's
Pilot; each round presses enter (overview -> engine detail), escape (back), g (GPUs), o (overview)
and times each from the key's posting to the first frame composed for the new screen (the
compositor's update handed to the driver). Rounds are spaced by a varying pause so they fall at
every phase of the 1 s collection. Prints p50/p90/p99/max per key and over all.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import statistics
import sys
import time
from typing import Any

from hub_cpu import scale_fleet, scale_instances, wait_live

from console import gc_control
from console.telemetry.hub import Hub
from console.ui.app import DeckApp, UiOptions
from console.ui.input_gate import GATE

KEYS = (("enter", "EngineScreen"), ("escape", "OverviewScreen"), ("g", "GpuScreen"), ("o", "OverviewScreen"))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


async def drive(app: DeckApp, rounds: int, size: tuple[int, int], seed: int,
                verbose: bool = False) -> dict[str, list[float]]:
    frames: list[tuple[float, str]] = []
    real = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None:
            frames.append((time.perf_counter(), type(screen).__name__))
        real(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    rng = random.Random(seed)
    out: dict[str, list[float]] = {k: [] for k, _ in KEYS}
    async with app.run_test(size=size) as pilot:
        await pilot.pause(3.0)  # first frames with data
        for _ in range(rounds):
            for key, target in KEYS:
                frames.clear()
                t0 = time.perf_counter()
                await pilot.press(key)
                deadline = t0 + 10.0
                while time.perf_counter() < deadline:
                    hit = next((t for t, name in frames if name == target), None)
                    if hit is not None and type(app.screen).__name__ == target:
                        out[key].append(1000 * (hit - t0))
                        break
                    await asyncio.sleep(0.002)
                else:
                    out[key].append(float("inf"))
                if verbose:
                    print(f"    {key} -> {target}: {out[key][-1]:.0f} ms", flush=True)
                await pilot.pause(0.3 + rng.random() * 0.7)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", type=int, default=64)
    ap.add_argument("--series", type=int, default=2000)
    ap.add_argument("--sims", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--size", default="200x50")
    ap.add_argument("--refresh", type=float, default=1.0, help="the hub's period (a long one leaves the UI's own work)")
    ap.add_argument("--no-load", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print each measurement as it is taken")
    a = ap.parse_args()
    gc_control.startup_pause()  # as `enginedeck attach` starts: no collection until the first frame, then a freeze
    # A timeout's SIGTERM unwinds normally, so the simulators and the load process are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    w, h = (int(x) for x in a.size.split("x"))
    with scale_fleet(a.series, a.sims, 1.0, not a.no_load) as (fleet, payload):
        insts = scale_instances(a.engines, fleet)
        hub = Hub(insts, refresh=a.refresh, gpu_source="simulated", foreground=GATE)
        hub.start()
        try:
            print(f"{payload}; {a.engines} engines live after {wait_live(hub):.1f} s; window {w}x{h}", flush=True)
            app = DeckApp(hub, options=UiOptions(simulated=True), profiles={i.profile.name: i.profile for i in insts},
                          instances={i.name: i for i in insts})
            s0 = sum(c.samples for c in hub._collectors.values())
            w0 = time.monotonic()
            gc_control.startup_resume()  # where ui.launch resumes it, just before the app runs
            lat = asyncio.run(drive(app, a.rounds, (w, h), seed=1, verbose=a.verbose))
            rate = (sum(c.samples for c in hub._collectors.values()) - s0) / (time.monotonic() - w0) / a.engines
        finally:
            hub.stop()
    every = [v for vs in lat.values() for v in vs]

    print(f"hub meanwhile: {rate:.2f} samples/s per engine; collection stepped aside for keys {GATE.waited:.1f} s "
          f"in all (waits overlap)")
    for key, target in KEYS:
        vs = lat[key]
        print(f"  {key:7s} -> {target:15s} p50 {statistics.median(vs):7.1f} ms  p90 {pct(vs, 90):7.1f}  "
              f"p99 {pct(vs, 99):7.1f}  max {max(vs):7.1f}  (n={len(vs)})")
    print(f"all keys: p50 {statistics.median(every):.1f} ms, p90 {pct(every, 90):.1f} ms, p99 {pct(every, 99):.1f} ms, "
          f"max {max(every):.1f} ms (n={len(every)})")


if __name__ == "__main__":
    main()
