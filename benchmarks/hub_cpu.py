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
import contextlib
import dataclasses
import gc
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator

import psutil

from console.config import EngineInstance, parse_engine_ref
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


def scale_instances(n: int, fleet: Fleet) -> list[EngineInstance]:
    """``n`` engines named engine-00.., spread round-robin over the fleet's simulators."""
    insts: list[EngineInstance] = []
    for i in range(n):
        profile, url, pid = fleet.endpoints[i % len(fleet.endpoints)]
        base = parse_engine_ref(f"{profile}@{url}")
        insts.append(dataclasses.replace(base, name=f"engine-{i:02d}", pids=(pid,)))
    return insts


@contextlib.contextmanager
def scale_fleet(series: int, sims: int, refresh: float, load: bool) -> Iterator[tuple[Fleet, str]]:
    """vLLM simulators serving about ``series`` series each (and synthetic load in another
    process); yields the fleet and a line describing the payload."""
    dp = data_parallel_for(series)
    extra = ["--data-parallel", str(dp), "--metrics-every", str(refresh), "--no-access-log"]
    fleet = start_fleet(["vllm"] * sims, load=False, seed=1, extra_args=extra)
    loader: subprocess.Popen[bytes] | None = None
    try:
        if load:
            cmd = [sys.executable, "-m", "console", "sim", "--seed", "1"]
            for p, u, _ in fleet.endpoints:
                cmd += ["--load", f"{p}@{u}"]
            loader = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
        with urllib.request.urlopen(f"{fleet.endpoints[0][1]}/metrics", timeout=10) as r:
            body = r.read()
        count = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
        yield fleet, (f"payload: {count} series, {len(body) / 1024:.0f} KiB (vLLM, {dp} data-parallel ranks); "
                      f"{sims} simulators{' under load' if load else ''}; refresh {refresh} s")
    finally:
        if loader is not None:
            os.killpg(loader.pid, signal.SIGTERM)
            loader.wait(10)
        fleet.stop()


def wait_live(hub: Hub, limit: float = 120.0) -> float:
    """Seconds until every engine of ``hub`` shows live metrics (at most ``limit``)."""
    started = time.monotonic()
    while time.monotonic() - started < limit and not all(e.live and e.total for e in hub.latest().engines):
        time.sleep(0.2)
    return time.monotonic() - started


def samples(hub: Hub) -> int:
    """Payloads read into the windows so far, all engines together."""
    return sum(c.samples for c in hub._collectors.values())


def measure(n: int, fleet: Fleet, a: argparse.Namespace) -> tuple[float, float, int]:
    """(hub CPU % of a core, samples per engine per second, engines live) for ``n`` engines."""
    hub = Hub(scale_instances(n, fleet), refresh=a.refresh, gpu_source="simulated")
    hub.start()
    try:
        # Warm-up: every engine live (first identity reads, first windows, caches filled), then more.
        print(f"    {n} engines live after {wait_live(hub):.1f} s", flush=True)
        time.sleep(a.warmup)
        gc.collect()
        c0, n0, w0 = time.process_time(), samples(hub), time.monotonic()
        time.sleep(a.seconds)
        c1, n1, w1 = time.process_time(), samples(hub), time.monotonic()
        live = sum(1 for e in hub.latest().engines if e.live and e.total is not None)
    finally:
        hub.stop()
    wall = w1 - w0
    return 100 * (c1 - c0) / wall, (n1 - n0) / wall / n, live


def scale(a: argparse.Namespace) -> None:
    with scale_fleet(a.series, a.sims, a.refresh, not a.no_load) as (fleet, payload):
        print(f"{payload}; window {a.seconds:g} s from {a.warmup:g} s after all are live; process CPU time")
        per: dict[int, float] = {}
        per_sample: dict[int, float] = {}
        for n in a.engines:
            cpu, rate, live = measure(n, fleet, a)
            per[n] = cpu / n
            per_sample[n] = per[n] / max(rate, 1e-9)
            print(f"{n:3d} engines: hub {cpu:6.2f}% of a core, {per[n]:.3f}% per engine; {rate:.2f} samples/s "
                  f"per engine ({live}/{n} live), so {per_sample[n]:.3f}% per engine at 1 sample/s "
                  f"({10 * per_sample[n]:.1f} ms CPU per sample)")
        if len(per) > 1:
            lo, hi = min(per), max(per)
            print(f"per-engine cost ratio {hi} / {lo} engines: {per[hi] / per[lo]:.2f} as measured, "
                  f"{per_sample[hi] / per_sample[lo]:.2f} per sample")


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
    # A timeout's SIGTERM unwinds normally, so the simulators and the load process are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if not a.engines:
        demo(a)
        return
    a.engines = [int(x) for x in a.engines.split(",")]
    threading.current_thread().name = "bench"
    scale(a)


if __name__ == "__main__":
    main()
