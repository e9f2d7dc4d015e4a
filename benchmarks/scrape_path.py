"""CPU of one scrape's path, stage by stage, on successive payloads of a loaded vLLM simulator.

    .venv/bin/python benchmarks/scrape_path.py [--series 2000] [--payloads 30] [--fetches 200]

1. Fetch: CPU per GET of the simulator's /metrics through ``EngineProbe`` (the console's own HTTP
   client, body decoded by ``BoundedBody``) and through an httpx.AsyncClient streaming the same
   request into the same decoder (what the probes used before).
2. Parse: ``--payloads`` payloads read one second apart from the simulator under load, parsed with
   the profile's filter by ``promtext.parse`` (whole) and by one ``ScrapeParser`` (changes to the
   previous payload); the two results are compared, and the share of lines that changed is shown.
3. Normalise: ``normalize`` over the same payloads, without and with the engine's ScrapeParser, and
   with its ScrapeParser and NormalizeMemo (the collector's path).
CPU is time.process_time per item, fastest of 3 rounds. Prints figures; asserts only equality.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import time
import urllib.request
from collections.abc import Callable

from hub_cpu import scale_fleet  # this folder: simulators serving about --series series

from console.config import parse_engine_ref
from console.profiles import load_profiles
from console.telemetry.engine.scrape import MAX_METRICS_BYTES, EngineProbe
from console.telemetry.metrics.normalize import normalize, wanted_names
from console.telemetry.metrics.normmemo import NormalizeMemo
from console.telemetry.metrics.promdelta import ScrapeParser
from console.telemetry.metrics.promtext import parse
from console.transport.bodies import ACCEPT_ENCODING, BoundedBody


async def _own(base: str, n: int) -> tuple[float, str]:
    """CPU ms per fetch through the probe, and the Content-Encoding the server chose."""
    probe = EngineProbe(parse_engine_ref(f"vllm@{base}"), timeout=5.0)
    try:
        for _ in range(5):
            got = await probe.metrics()
            assert got.ok, got.reason()
        t = time.process_time()
        for _ in range(n):
            await probe.metrics()
        cpu = (time.process_time() - t) / n * 1e3
        resp = await probe.client.get("/metrics", headers={"Accept-Encoding": ACCEPT_ENCODING})
        return cpu, resp.headers.get("content-encoding", "identity")
    finally:
        probe.close()


async def _httpx(base: str, n: int) -> float:
    import httpx

    async with httpx.AsyncClient(trust_env=False) as client:
        async def one() -> None:
            async with client.stream("GET", f"{base}/metrics", headers={"Accept-Encoding": ACCEPT_ENCODING},
                                     timeout=5.0) as resp:
                body = BoundedBody(resp.headers.get("content-encoding", ""), MAX_METRICS_BYTES)
                async for chunk in resp.aiter_raw():
                    body.feed(chunk)
                body.result()

        for _ in range(5):
            await one()
        t = time.process_time()
        for _ in range(n):
            await one()
        return (time.process_time() - t) / n * 1e3


def read_payloads(base: str, n: int) -> list[bytes]:
    """``n`` payloads of the simulator at ``base``, one second apart, after 5 s of its load."""
    time.sleep(5)  # load running: values move between payloads
    bodies = []
    for _ in range(n):
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as r:
            bodies.append(r.read())
        time.sleep(1.0)
    return bodies


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=2000)
    ap.add_argument("--payloads", type=int, default=30)
    ap.add_argument("--fetches", type=int, default=200)
    a = ap.parse_args()
    profile = load_profiles()["vllm"]
    wanted = wanted_names(profile)
    with scale_fleet(a.series, 1, 1.0, True) as (fleet, payload):
        base = fleet.endpoints[0][1]
        print(payload)
        owns = [asyncio.run(_own(base, a.fetches)) for _ in range(3)]
        own, encoding = min(owns)
        hx = min(asyncio.run(_httpx(base, a.fetches)) for _ in range(3))
        print(f"fetch (Accept-Encoding: {ACCEPT_ENCODING}; answered {encoding}): own client {own:.2f} ms CPU, "
              f"httpx {hx:.2f} ms ({hx / own:.1f}x)")
        bodies = read_payloads(base, a.payloads)
    lines = [b.split(b"\n") for b in bodies]
    changed = sorted(sum(x != y for x, y in zip(p, q, strict=False)) / len(q) for p, q in itertools.pairwise(lines))
    print(f"{len(bodies)} payloads 1 s apart, {len(lines[0])} lines; lines changed between successive ones: "
          f"median {100 * changed[len(changed) // 2]:.1f}%")
    check = ScrapeParser()
    for b in bodies:
        whole, parts = parse(b, wanted), check.parse(b, wanted)
        assert {n: f.samples for n, f in whole.families.items()} == {n: f.samples for n, f in parts.families.items()}
    print(f"ScrapeParser equals a full parse on every payload "
          f"({check.full_parses} full, {check.delta_parses} as changes)")

    def per(fn: Callable[[bytes], object]) -> float:
        t = time.process_time()
        for b in bodies:
            fn(b)
        return (time.process_time() - t) / len(bodies) * 1e3

    def primed() -> ScrapeParser:
        p = ScrapeParser()
        p.parse(bodies[-1], wanted)  # as in a running hub: the previous payload is known
        return p

    def fastest(make: Callable[[], Callable[[bytes], object]]) -> float:
        return min(per(make()) for _ in range(3))

    full = fastest(lambda: lambda b: parse(b, wanted))
    delta = fastest(lambda: functools.partial(primed().parse, wanted=wanted))
    nfull = fastest(lambda: lambda b: normalize(profile, b, full=False))
    ndelta = fastest(lambda: functools.partial(normalize, profile, full=False, parser=primed()))

    def kept() -> Callable[[bytes], object]:
        # As the engine's collector does: its parser and its NormalizeMemo, both primed.
        parser, memo = primed(), NormalizeMemo()
        normalize(profile, bodies[-1], full=False, parser=parser, memo=memo)
        return functools.partial(normalize, profile, full=False, parser=parser, memo=memo)

    nmemo = fastest(kept)
    print(f"parse with the profile's filter: whole {full:.2f} ms, as changes {delta:.2f} ms ({full / delta:.1f}x)")
    print(f"normalise: {nfull:.2f} ms, with the engine's ScrapeParser {ndelta:.2f} ms ({nfull / ndelta:.1f}x), "
          f"and its NormalizeMemo too {nmemo:.2f} ms ({nfull / nmemo:.1f}x)")


if __name__ == "__main__":
    main()
