"""What alerts cost, and whether a healthy simulator fires any.

1. Evaluation CPU: every shipped rule on N engines (vLLM snapshots taken from a simulated engine under
   moderate load, renamed), one evaluation per simulated second for ``--seconds`` of virtual time:
   CPU time (time.process_time) per fleet evaluation and per engine. The hub runs this once per
   published snapshot.
2. Healthy fleet, 10 minutes: each engine flavour at idle and at moderate load for ``--minutes`` of
   virtual time (the simulator's scheduler and metrics, read through the console's telemetry; see
   tests/alerts/harness.py), printing how many alerts went pending or fired (target: 0).
Usage: python benchmarks/alerts_eval.py [--engines 4,16,64] [--seconds 600] [--minutes 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.alerts.evaluate import AlertEvaluator
from console.alerts.rules import load_rules
from console.model import AlertState, FleetSnapshot
from console.profiles import load_profiles
from tests.alerts.harness import Knobs, VirtualEngine


def evaluation_cost(n: int, seconds: int) -> tuple[float, float]:
    """(ms of CPU per fleet evaluation, ms per engine) for n engines."""
    v = VirtualEngine("vllm", scrape_every=5.0, knobs=Knobs(rate=0.6, max_tokens=64))
    snaps = []
    for _ in range(12):  # one minute of real snapshots, replayed with moving time
        v.tick()
        snaps.append(v.snap)
    ev = AlertEvaluator(load_rules(user=False), load_profiles())
    t0 = 1_900_000_000.0
    cpu = time.process_time()
    for s in range(seconds):
        base = snaps[s % len(snaps)]
        engines = tuple(replace(base, name=f"vllm-{i}", taken_at=t0 + s) for i in range(n))
        ev.evaluate(FleetSnapshot(taken_at=t0 + s, engines=engines))
    per = (time.process_time() - cpu) / seconds * 1000.0
    return per, per / n


def healthy(minutes: float) -> list[tuple[str, str, int]]:
    out = []
    for engine in ("vllm", "sglang", "trtllm", "tgi", "llamacpp"):
        for label, rate in (("idle", 0.0), ("moderate", 0.6)):
            v = VirtualEngine(engine, scrape_every=2.0, gpus=1, knobs=Knobs(rate=rate, max_tokens=64))
            v.run(minutes * 60)
            n = sum(1 for tr in v.transitions if tr.state in (AlertState.PENDING, AlertState.FIRING))
            out.append((engine, label, n))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engines", default="4,16,64")
    ap.add_argument("--seconds", type=int, default=600)
    ap.add_argument("--minutes", type=float, default=10.0)
    args = ap.parse_args()
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for n in (int(x) for x in args.engines.split(",")):
        per, per_engine = evaluation_cost(n, args.seconds)
        print(f"evaluation, {n:3d} engines x {len(load_rules(user=False))} rules: {per:.3f} ms CPU per snapshot, "
              f"{per_engine:.3f} ms per engine")
    total = 0
    for engine, label, n in healthy(args.minutes):
        total += n
        print(f"healthy {engine:<8} {label:<8} {args.minutes:g} min (virtual): {n} alerts pending or firing")
    print(f"healthy fleet total: {total} (target 0)")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
