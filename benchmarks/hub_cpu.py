"""CPU of the telemetry hub alone (no UI) at a 1 s refresh.

Default: the demo fleet (4 engines, in other processes); prints the hub threads' CPU time per wall
second. The UI's own cost is measured by benchmarks/console_cpu.py; this isolates collection.

Scale (``--engines 16,64 --series 2000``): vLLM simulators serving a payload of about ``--series``
real vLLM series (data-parallel engine ranks, ``sim --data-parallel``) under synthetic load; the
hub watches N engines spread over ``--sims`` simulators (each renders its payload once a second,
``--metrics-every 1``, so the machine is not swamped by rendering; every hub engine still fetches,
parses and windows a whole payload each period). Load and simulators run in other processes, so
this process is the hub alone: its CPU time (time.process_time) over a fixed wall window, per
engine, for each N in one run, and the ratio of the largest N's per-engine cost to the smallest's.
Usage: python benchmarks/hub_cpu.py --engines 16,64 --series 2000 [--seconds 30] [--sims 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import psutil

from console.config import EngineInstance, parse_engine_ref
from console.model import FleetSnapshot
from console.sim.fleet import Fleet, start_fleet
from console.telemetry.hub import Hub


def demo(a: argparse.Namespace) -> None:
    fleet = start_fleet(["vllm", "sglang", "trtllm", "tgi"], load=True, seed=1)
    try:
        insts = [dataclasses.replace(parse_engine_ref(f"{p}@{u}"), pids=(pid,)) for p, u, pid in fleet.endpoints]
        # The fleet's load thread lives in this process too: measure only the hub's threads.
        hub = Hub(insts, refresh=a.refresh, gpu_source="simulated")
        proc = psutil.Process()
        before = {t.id for t in proc.threads()}
        hub.start()
        time.sleep(3)  # warm-up: first identity reads, first windows
        new = [t.id for t in proc.threads() if t.id not in before]
        t0 = {t.id: t.user_time + t.system_time for t in proc.threads() if t.id in new}
        w0 = time.monotonic()
        time.sleep(a.seconds)
        t1 = {t.id: t.user_time + t.system_time for t in proc.threads() if t.id in new}
        wall = time.monotonic() - w0
        cpu = sum(t1.get(k, 0.0) - v for k, v in t0.items())
        snap = hub.latest()
        hub.stop()
        print(f"hub threads: {len(new)}; engines {len(snap.engines)}, GPUs {len(snap.gpus.gpus)}; "
              f"refresh {a.refresh} s")
        print(f"hub CPU: {100 * cpu / wall:.2f}% of one core over {wall:.0f} s")
        print(f"history: {hub.history.memory_bytes() / 2**20:.2f} MiB in {len(hub.history.keys())} series")
    finally:
        fleet.stop()


def data_parallel_for(series: int) -> int:
    """The fewest vLLM engine ranks whose exposition holds at least ``series`` series."""
    from prometheus_client import generate_latest

    from console.sim.engines import FLAVOURS, SimOptions

    def count(dp: int) -> int:
        f = FLAVOURS["vllm"](SimOptions(engine="vllm", model="m", data_parallel=dp))
        text = generate_latest(f.metrics_registry()).decode()
        return sum(1 for line in text.splitlines() if line and not line.startswith("#"))

    one, two = count(1), count(2)
    return max(1, -(-(series - one) // (two - one)) + 1)


class Scrapes:
    """Counts, per engine, the published snapshots that carry a new metrics sample."""

    def __init__(self) -> None:
        self.seen: dict[str, float | None] = {}
        self.count = 0

    def __call__(self, snap: FleetSnapshot) -> None:
        for e in snap.engines:
            at = e.metrics_freshness.updated_at
            if at is not None and self.seen.get(e.name) != at and not e.metrics_freshness.stale:
                self.count += 1
            self.seen[e.name] = at


def measure(n: int, fleet: Fleet, a: argparse.Namespace) -> tuple[float, float, int]:
    """(hub CPU % of a core, new samples per engine per second, engines live) for ``n`` engines."""
    insts: list[EngineInstance] = []
    for i in range(n):
        profile, url, pid = fleet.endpoints[i % len(fleet.endpoints)]
        base = parse_engine_ref(f"{profile}@{url}")
        insts.append(dataclasses.replace(base, name=f"engine-{i:02d}", pids=(pid,)))
    hub = Hub(insts, refresh=a.refresh, gpu_source="simulated")
    scrapes = Scrapes()
    hub.subscribe(scrapes)
    hub.start()
    try:
        # Warm-up: every engine live (first identity reads, first windows, caches filled), then more.
        started = time.monotonic()
        while time.monotonic() - started < 120 and not all(e.live and e.total for e in hub.latest().engines):
            time.sleep(0.2)
        print(f"    {n} engines live after {time.monotonic() - started:.1f} s", flush=True)
        time.sleep(a.warmup)
        gc.collect()
        c0, n0, w0 = time.process_time(), scrapes.count, time.monotonic()
        time.sleep(a.seconds)
        c1, n1, w1 = time.process_time(), scrapes.count, time.monotonic()
        live = sum(1 for e in hub.latest().engines if e.live and e.total is not None)
    finally:
        hub.stop()
    wall = w1 - w0
    return 100 * (c1 - c0) / wall, (n1 - n0) / wall / n, live


def scale(a: argparse.Namespace) -> None:
    dp = data_parallel_for(a.series)
    extra = ["--data-parallel", str(dp), "--metrics-every", str(a.refresh), "--no-access-log"]
    fleet = start_fleet(["vllm"] * a.sims, load=False, seed=1, extra_args=extra)
    load: subprocess.Popen[bytes] | None = None
    try:
        if not a.no_load:
            cmd = [sys.executable, "-m", "console", "sim", "--seed", "1"]
            for p, u, _ in fleet.endpoints:
                cmd += ["--load", f"{p}@{u}"]
            load = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        with urllib.request.urlopen(f"{fleet.endpoints[0][1]}/metrics", timeout=10) as r:
            body = r.read()
        series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        print(f"payload: {series} series, {len(body) / 1024:.0f} KiB (vLLM, {dp} data-parallel ranks); "
              f"{a.sims} simulators{'' if a.no_load else ' under load'}; refresh {a.refresh} s; "
              f"window {a.seconds:g} s from {a.warmup:g} s after all are live; process CPU time")
        per: dict[int, float] = {}
        for n in a.engines:
            cpu, rate, live = measure(n, fleet, a)
            per[n] = cpu / n
            print(f"{n:3d} engines: hub {cpu:6.2f}% of a core, {per[n]:.3f}% per engine "
                  f"({per[n] / max(rate, 1e-9):.3f}% per engine per sample/s); "
                  f"{rate:.2f} samples/s per engine; {live}/{n} live")
        if len(per) > 1:
            lo, hi = min(per), max(per)
            print(f"per-engine cost ratio {hi} / {lo} engines: {per[hi] / per[lo]:.2f}")
    finally:
        if load is not None:
            os.killpg(load.pid, signal.SIGTERM)
            load.wait(10)
        fleet.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--refresh", type=float, default=1.0)
    ap.add_argument("--engines", default="", help="comma-separated engine counts (scale mode), e.g. 16,64")
    ap.add_argument("--series", type=int, default=2000, help="scale mode: series per payload")
    ap.add_argument("--sims", type=int, default=4, help="scale mode: simulators the engines share")
    ap.add_argument("--warmup", type=float, default=5.0,
                    help="scale mode: seconds from every engine live to the measurement")
    ap.add_argument("--no-load", action="store_true", help="scale mode: no synthetic client load")
    a = ap.parse_args()
    if not a.engines:
        demo(a)
        return
    a.engines = [int(x) for x in a.engines.split(",")]
    threading.current_thread().name = "bench"
    scale(a)


if __name__ == "__main__":
    main()
