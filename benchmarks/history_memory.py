"""Memory of the bounded history: every engine series, GPU and host series filled to capacity.

Prints the store's own accounting (ring buffers) and the process RSS growth measured with psutil,
for a fleet of N engines and G GPUs filled to capacity at 1 s, then filled again (it must not grow).
The ring capacity is the console's (``CHART_POINTS``) unless ``--capacity`` is given; ``--seconds
3600`` fills an hour, so the hour of 5 s min/max/mean summaries each series also keeps is full.
Usage: python benchmarks/history_memory.py [--engines 8] [--gpus 8] [--seconds 400] [--capacity N]
"""

from __future__ import annotations

import argparse
import gc
import time

import psutil

from console.telemetry.metrics.history import CHART_POINTS, History
from console.telemetry.source import ENGINE_SERIES, GPU_SERIES, HOST_SERIES


def fill(h: History, engines: int, gpus: int, seconds: int, t0: float) -> None:
    for s in range(seconds):
        t = t0 + s
        for e in range(engines):
            for m in ENGINE_SERIES:
                h.append((f"engine-{e}", m), t, float(s % 97))
        for g in range(gpus):
            for m in GPU_SERIES:
                h.append((f"gpu:{g}", m), t, float(s % 89))
        for m in HOST_SERIES:
            h.append(("host", m), t, float(s % 83))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=int, default=CHART_POINTS)
    ap.add_argument("--capacity", type=int, default=CHART_POINTS, help="ring points per series")
    a = ap.parse_args()
    proc = psutil.Process()
    gc.collect()
    rss0 = proc.memory_info().rss
    h = History(capacity=a.capacity)
    start = time.perf_counter()
    fill(h, a.engines, a.gpus, a.seconds, 0.0)
    took = time.perf_counter() - start
    gc.collect()
    rss1 = proc.memory_info().rss
    fill(h, a.engines, a.gpus, a.seconds, float(a.seconds))  # a second hour: the rings wrap
    gc.collect()
    rss2 = proc.memory_info().rss
    series = len(h.keys())
    points = series * a.seconds  # appended (the rings keep --capacity of them, the summaries an hour)
    print(f"series: {series} ({a.engines} engines x {len(ENGINE_SERIES)}, {a.gpus} GPUs x {len(GPU_SERIES)}, "
          f"host x {len(HOST_SERIES)}), ring capacity {a.capacity} points each, {a.seconds} s appended")
    print(f"store accounting: {h.memory_bytes() / 2**20:.2f} MiB for {points:,} points "
          f"({h.memory_bytes() / points:.1f} B/point)")
    print(f"RSS growth after {a.seconds} s: {(rss1 - rss0) / 2**20:.2f} MiB; "
          f"after {2 * a.seconds} s (wrapped): {(rss2 - rss0) / 2**20:.2f} MiB")
    print(f"append cost: {took / points * 1e6:.2f} us/point")


if __name__ == "__main__":
    main()
