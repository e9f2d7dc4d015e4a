"""What each cache of the metrics path saves: the collector's CPU per payload with it and without it.

    .venv/bin/python benchmarks/cache_worth.py [--series 2000] [--payloads 20] [--rounds 5] [--only NAME]

Payloads: (a) a demo engine's, the vLLM simulator as ``enginedeck demo`` runs it (its fleet's
member, under the fleet's load), and (b) a vLLM simulator serving about ``--series`` series
(``hub_cpu.scale_fleet``, under load); ``--payloads`` of each, read one second apart
(``scrape_path.read_payloads``).

The path is the collector's digest of one engine (``collector._digest_sync``): ``normalize`` with
the engine's ``ScrapeParser`` and ``NormalizeMemo``, then ``EngineMetricsState.ingest`` and
``metrics``. A round starts a fresh engine, gives it the first payload untimed (the previous scrape
of a running hub) and times the rest in order; the process-wide caches stay as the rounds before
left them (warm, as in a running hub). Each cache is switched off from here: a process-wide one
replaced by a dict that never keeps anything, a per-engine one by its absence or a stand-in that
never hits. Rounds alternate on and off; CPU (time.process_time) per payload is the fastest of
``--rounds`` each. The cold columns time a fresh engine's first payload after
``normalize.clear_caches()`` (what a cache saves when a hub meets a new kind of engine). Every
reading and every ModelMetrics made with a cache off must equal the one made with it on
(asserted); otherwise prints figures only.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from hub_cpu import scale_fleet  # this folder
from scrape_path import read_payloads

from console.profiles import EngineProfile, load_profiles
from console.sim.fleet import start_fleet
from console.telemetry.metrics import normalize as normalize_mod
from console.telemetry.metrics import promdelta, promtext, wanted
from console.telemetry.metrics.normalize import clear_caches, normalize
from console.telemetry.metrics.normmemo import NormalizeMemo
from console.telemetry.metrics.promdelta import ScrapeParser
from console.telemetry.metrics.windows import EngineMetricsState, _HVec, _hvec_raw


class Forgets(dict[Any, Any]):
    """A cache that never keeps anything: every lookup misses, every store is dropped."""

    def get(self, key: Any, default: Any = None) -> Any:
        return default

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


class ForgetsPerConfig(Forgets):
    """A cache of caches (one per label-split configuration) whose every cache forgets."""

    def get(self, key: Any, default: Any = None) -> Any:
        return Forgets()


@contextlib.contextmanager
def patched(*swaps: tuple[object, str, object]) -> Iterator[None]:
    """Attributes replaced for the duration (restored, with what they held, afterwards)."""
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in swaps]
    try:
        for obj, name, value in swaps:
            setattr(obj, name, value)
        yield
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


def _uncached_known_labels(text: str) -> promtext.Labels | None:
    try:
        return promtext.parse_labels(text)  # through the (switched-off) label cache: parsed each time
    except ValueError:
        return None


def _correct_hist_every_time(self: EngineMetricsState, key: Any, h: Any, t: float) -> _HVec:
    return _HVec(h.bounds, self._correct(key, _hvec_raw(h), h.bounds, t))


def _series_afresh(original: Callable[..., Any]) -> Callable[..., Any]:
    def series(self: NormalizeMemo, *args: Any, **kw: Any) -> Any:
        self._entries.clear()  # no plan or series kept from the previous payload
        return original(self, *args, **kw)
    return series


def _no_picks(self: NormalizeMemo, layout: object, part: Any) -> bool:
    return False


# name -> (what it switches off as patches, or a flag for the path: "no parser" / "no memo").
Switch = tuple[str, Callable[[], contextlib.AbstractContextManager[None]] | str]


def switches() -> list[Switch]:
    return [
        ("wanted._CACHE", lambda: patched((wanted, "_CACHE", Forgets()))),
        ("promtext._LABEL_CACHE", lambda: patched((promtext, "_LABEL_CACHE", Forgets()),
                                                  (promdelta, "known_labels", _uncached_known_labels))),
        ("promtext._SHAPES", lambda: patched((promtext, "_SHAPES", Forgets()))),
        ("normalize._SPLIT_CACHES", lambda: patched((normalize_mod, "_SPLIT_CACHES", ForgetsPerConfig()))),
        ("ScrapeParser (per engine)", "no parser"),
        ("NormalizeMemo, all of it", "no memo"),
        ("NormalizeMemo: picks", lambda: patched((NormalizeMemo, "picks", _no_picks))),
        ("NormalizeMemo: histogram plans", lambda: patched(
            (NormalizeMemo, "series", _series_afresh(NormalizeMemo.series)))),
        ("windows: unchanged series by identity", lambda: patched(
            (EngineMetricsState, "_correct_hist", _correct_hist_every_time))),
    ]


def digest_round(profile: EngineProfile, bodies: list[bytes], parser: bool, memo: bool) -> tuple[float, list[object]]:
    """(CPU ms per payload after the first, what each gave) for one fresh engine over ``bodies``."""
    p = ScrapeParser() if parser else None
    m = NormalizeMemo() if memo else None
    state = EngineMetricsState(profile)
    out: list[object] = []

    def one(i: int, body: bytes) -> None:
        reading = normalize(profile, body, full=False, parser=p, memo=m)
        state.ingest(float(i), reading, wall=1.7e9 + i)
        out.append((reading.models, reading.resolved, reading.missing, reading.unmapped, reading.sample_count,
                    state.metrics()))

    one(0, bodies[0])  # the engine's previous scrape
    t = time.process_time()
    for i, body in enumerate(bodies[1:], 1):
        one(i, body)
    return (time.process_time() - t) / (len(bodies) - 1) * 1e3, out


def cold_round(profile: EngineProfile, body: bytes, parser: bool, memo: bool) -> float:
    """CPU ms of a fresh engine's first payload with every process-wide cache emptied first (an
    engine added to a hub that has seen no other of its kind)."""
    clear_caches()
    t = time.process_time()
    digest_round(profile, [body, body], parser, memo)  # the second, unchanged, is the idle shortcut
    return (time.process_time() - t) * 1e3


def measure(profile: EngineProfile, bodies: list[bytes], switch: Switch, rounds: int) -> list[float]:
    """CPU ms per payload with the cache and without it, and of a cold first payload with and without:
    fastest of ``rounds`` each, on and off alternating."""
    _, how = switch
    ms: list[list[float]] = [[], [], [], []]
    for _ in range(rounds):
        on, want = digest_round(profile, bodies, True, True)
        ms[0].append(on)
        ms[2].append(cold_round(profile, bodies[0], True, True))
        flags = (how != "no parser", how != "no memo") if isinstance(how, str) else (True, True)
        with contextlib.nullcontext() if isinstance(how, str) else how():
            ms[3].append(cold_round(profile, bodies[0], *flags))
            off, got = digest_round(profile, bodies, *flags)
        ms[1].append(off)
        assert got == want, f"{switch[0]} off changes the result"
    return [min(x) for x in ms]


def table(name: str, profile: EngineProfile, bodies: list[bytes], rounds: int, only: list[str]) -> None:
    for switch in switches():
        if only and not any(o in switch[0] for o in only):
            continue
        on, off, cold_on, cold_off = measure(profile, bodies, switch, rounds)
        print(f"| {switch[0]} | {name} | {on:.3f} | {off:.3f} | {100 * (off - on) / off:+.1f} % "
              f"| {cold_on:.2f} | {cold_off:.2f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=2000)
    ap.add_argument("--payloads", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", action="append", default=[], help="caches whose name holds this (repeatable)")
    a = ap.parse_args()
    profile = load_profiles()["vllm"]
    fleet = start_fleet(["vllm"], load=True, seed=1)  # the demo fleet's vLLM member, with its load
    try:
        demo = read_payloads(fleet.endpoints[0][1], a.payloads)
    finally:
        fleet.stop()
    with scale_fleet(a.series, 1, 1.0, True) as (fleet, line):
        large = read_payloads(fleet.endpoints[0][1], a.payloads)

    def series(bodies: list[bytes]) -> int:
        return sum(1 for line in bodies[0].splitlines() if line and not line.startswith(b"#"))

    demo_name, large_name = f"demo ({series(demo)} series)", f"{series(large)} series"
    print(f"{a.payloads} payloads of each, 1 s apart; large: {line}")
    print(f"CPU ms per payload (parse, normalise, windows), fastest of {a.rounds}, on and off alternating; "
          "cold: a fresh engine's first payload, process-wide caches emptied")
    print("| cache | payload | with | without | saving | cold with | cold without |")
    print("|---|---|---|---|---|---|---|")
    for name, bodies in ((demo_name, demo), (large_name, large)):
        table(name, profile, bodies, a.rounds, a.only)


if __name__ == "__main__":
    main()
