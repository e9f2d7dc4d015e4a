"""Chart backfill from a real Prometheus: 8 simulated engines, the 15-minute history in one go.

Starts 8 simulators under load (``console.sim``), Debian's ``prometheus`` scraping them every
second (tests/prometheus/promserver.py), waits ``--warm`` seconds, then reads them as a
``[sources.NAME]`` (``console.prometheus``) and times ``PromSource.backfill`` of every engine over
``--range`` seconds (default 900: the 15-minute charts), best and median of ``--rounds``. It
prints the points filled per series and how many of them hold data (Prometheus has data for the
warm-up only, unless ``--warm`` is at least the range).
Usage: python benchmarks/prom_backfill.py [--engines 8] [--warm 60] [--range 900] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from console.prometheus.api import step_for
from console.remote.fleet import RemoteFleet
from console.remote.merge import qualified
from console.sim.fleet import start_fleet
from console.sources import PromTarget
from console.telemetry.history import History
from tests.prometheus.promserver import PromServer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--warm", type=float, default=60.0, help="seconds of scraping before the backfill")
    ap.add_argument("--range", type=float, default=900.0, help="history range in seconds (900: 15 min)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    flavours = ["vllm", "sglang", "tgi"]
    sims = start_fleet([flavours[i % len(flavours)] for i in range(args.engines)], load=True, seed=1)
    try:
        targets = [u.split("//", 1)[1] for _p, u, _pid in sims.endpoints]
        server = PromServer.start(targets)
        try:
            server.wait_scraped(2)
            time.sleep(args.warm)
            fleet = RemoteFleet([], sources=[PromTarget("prom", server.url, history_s=args.range)], refresh=1.0)
            fleet.start()
            try:
                deadline = time.monotonic() + 20
                while len(fleet.publish().engines) < args.engines and time.monotonic() < deadline:
                    time.sleep(0.2)
                src = fleet.sources[0]
                n = len(fleet.latest().engines)
                times = []
                for _ in range(args.rounds):
                    h = History(capacity=3600)
                    times.append(src.backfill(h, lambda who: qualified("prom", who)))
                keys = h.keys()
                key = next(k for k in keys if isinstance(k, tuple) and k[1] == "generation_tps")
                vals = h.values(key)
                print(f"{n} engines ({', '.join(sorted({e.profile for e in fleet.latest().engines}))}), range "
                      f"{args.range:g} s, step {step_for(args.range, src.interval_s):g} s, warm-up {args.warm:g} s, "
                      f"load avg "
                      f"{os.getloadavg()[0]:.1f}")
                print(f"backfill of every engine: best {min(times):.3f} s, median {statistics.median(times):.3f} s "
                      f"over {args.rounds} rounds; {len(keys)} series, {len(vals)} points per series "
                      f"({sum(1 for v in vals if v == v)} with data)")
            finally:
                fleet.stop()
        finally:
            server.stop()
    finally:
        sims.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
