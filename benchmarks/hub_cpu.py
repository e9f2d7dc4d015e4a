"""CPU of the telemetry hub alone (no UI) watching the demo fleet at a 1 s refresh.

Starts the simulated fleet (4 engines, in other processes), runs the hub in this process with
simulated GPUs for ``--seconds``, and prints this process's CPU time per wall second. The UI's own
cost is measured by benchmarks/console_cpu.py; this isolates the collection part.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import psutil

from console.config import parse_engine_ref
from console.sim.fleet import start_fleet
from console.telemetry.hub import Hub


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--refresh", type=float, default=1.0)
    a = ap.parse_args()
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


if __name__ == "__main__":
    main()
