"""Chart backfill from a real Prometheus: 8 simulated engines, the 15-minute history in one go.

Starts 8 simulators under load (``console.sim``), Debian's ``prometheus`` scraping them every
second (tests/prometheus/promserver.py), waits ``--warm`` seconds, then reads them as a
``[sources.NAME]`` (``console.prometheus``) and times ``PromSource.backfill`` of every engine over
``--range`` seconds (default 900: the 15-minute charts), best and median of ``--rounds``. It
prints the points filled per series and how many of them hold data (Prometheus has data for the
warm-up only, unless ``--warm`` is at least the range), and where the time went: the best
round's split (waiting for Prometheus, decoding, filling the history; summed over the parallel
queries), then each query once more in turn with ``stats=all`` for Prometheus' own evaluation time,
by kind (gauges, rates, quantiles). ``--points`` caps the steps filled (default: what a chart draws),
``--prom URL`` reads an already running server instead
(every engine it scrapes; ``--warm`` is then not waited), ``--workers`` sets the queries in flight.
Usage: python benchmarks/prom_backfill.py [--engines 8] [--warm 60] [--range 900] [--rounds 5]
       [--workers 8] [--points 400] [--prom URL]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator

import httpx
import orjson

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from console.prometheus import source as prom_source
from console.prometheus.api import accept_encoding, step_for
from console.prometheus.source import PromSource
from console.remote.fleet import RemoteFleet
from console.remote.merge import qualified
from console.sim.fleet import start_fleet
from console.sources import PromTarget
from console.telemetry.metrics.history import History
from tests.prometheus.promserver import PromServer


@contextlib.contextmanager
def lab(engines: int, warm: float) -> Iterator[str]:
    """``engines`` simulators under load and a Prometheus scraping them for ``warm`` seconds: its URL."""
    flavours = ["vllm", "sglang", "tgi"]
    sims = start_fleet([flavours[i % len(flavours)] for i in range(engines)], load=True, seed=1)
    try:
        server = PromServer.start([u.split("//", 1)[1] for _p, u, _pid in sims.endpoints])
        try:
            server.wait_scraped(2)
            time.sleep(warm)
            yield server.url
        finally:
            server.stop()
    finally:
        sims.stop()


def server_split(src: PromSource, range_s: float) -> str:
    """Each backfill query once, in turn, with ``stats=all``: Prometheus' evaluation time by kind."""
    step = step_for(range_s, src.interval_s)
    end = time.time()
    start = end - step * int(range_s // step)
    kinds: dict[str, list[float]] = {}
    # The source's own encoding (identity on loopback): the wall time is then what its queries cost.
    with httpx.Client(base_url=src.target.url, timeout=60, trust_env=False,
                      headers={"Accept-Encoding": accept_encoding(src.target.url)}) as client:
        for _label, q in src.backfill_queries()[1]:
            began = time.perf_counter()
            resp = client.get("/api/v1/query_range", params={
                "query": q.promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
                "stats": "all"})
            wall = time.perf_counter() - began
            stats = orjson.loads(resp.content)["data"].get("stats") or {}
            kind = ("quantiles" if q.quantiles else
                    "gauges" if q.series in ("running", "waiting", "kv_usage") else "rates")
            k = kinds.setdefault(kind, [0, 0.0, 0.0, 0.0])
            k[0] += 1
            k[1] += wall
            k[2] += float((stats.get("timings") or {}).get("evalTotalTime") or 0.0)
            k[3] += float((stats.get("samples") or {}).get("totalQueryableSamples") or 0)
    total = [sum(k[i] for k in kinds.values()) for i in range(4)]
    parts = "; ".join(f"{name} {k[0]:.0f} queries {k[2]:.3f} s ({k[3] / 1e6:.1f} M samples)"
                      for name, k in sorted(kinds.items()))
    return (f"in turn, {total[0]:.0f} queries: {total[1]:.3f} s wall, of it {total[2]:.3f} s Prometheus' "
            f"evaluation ({total[3] / 1e6:.1f} M samples read): {parts}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--warm", type=float, default=60.0, help="seconds of scraping before the backfill")
    ap.add_argument("--range", type=float, default=900.0, help="history range in seconds (900: 15 min)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=prom_source.BACKFILL_WORKERS, help="queries in flight")
    ap.add_argument("--prom", default="", help="an already running Prometheus (its URL) instead of a new lab")
    ap.add_argument("--points", type=int, default=prom_source.BACKFILL_POINTS,
                    help="the most steps filled (default: what a chart draws)")
    args = ap.parse_args()
    prom_source.BACKFILL_WORKERS = args.workers
    prom_source.BACKFILL_POINTS = args.points
    with contextlib.nullcontext(args.prom) if args.prom else lab(args.engines, args.warm) as url:
        fleet = RemoteFleet([], sources=[PromTarget("prom", url, history_s=args.range)], refresh=1.0)
        fleet.start()
        try:
            deadline = time.monotonic() + 20
            while len(fleet.publish().engines) < args.engines and time.monotonic() < deadline:
                time.sleep(0.2)
            src = fleet.sources[0]
            n = len(fleet.latest().engines)
            times, splits = [], []
            for _ in range(args.rounds):
                h = History(capacity=3600)
                times.append(src.backfill(h, lambda who: qualified("prom", who)))
                splits.append(src.last_split)
            keys = h.keys()
            key = next(k for k in keys if isinstance(k, tuple) and k[1] == "generation_tps")
            vals = h.values(key)
            print(f"{n} engines ({', '.join(sorted({e.profile for e in fleet.latest().engines}))}), range "
                  f"{args.range:g} s, step {step_for(args.range, src.interval_s):g} s, warm-up "
                  f"{'(running server)' if args.prom else f'{args.warm:g} s'}, {args.workers} queries in flight, "
                  f"load avg {os.getloadavg()[0]:.1f}")
            print(f"backfill of every engine: best {min(times):.3f} s, median {statistics.median(times):.3f} s "
                  f"over {args.rounds} rounds; {len(keys)} series, {len(vals)} points per series "
                  f"({sum(1 for v in vals if v == v)} with data)")
            print("best round: " + min(splits, key=lambda s: s.wall_s).line())
            print(server_split(src, args.range))
        finally:
            fleet.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
