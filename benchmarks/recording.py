"""Recording: disk per hour and CPU of the recorder on the demo fleet, and seek time in a 24 h recording.

1. The demo fleet (4 simulated engines under load, 8 simulated GPUs, the host) collected by a hub at
   1 s and recorded by a ``Recorder`` (raw payloads every 60 s) for ``--seconds``: bytes on disk
   per hour, and the CPU time of the recorder's thread (status documents, compression, writes) per
   wall second. The hub's own collection is not counted (benchmarks/hub_cpu.py measures it).
2. A 24 h recording at 1 s built from those documents (their times moved along a day), then
   ``--seeks`` seeks to random times through ``ReplaySource``: wall and CPU time from the command to
   the snapshot being published (with the charts' history rebuilt), and the time to open the folder.
Usage: python benchmarks/recording.py [--seconds 120] [--seeks 20] [--skip-record | --skip-seek]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from console.config import parse_engine_ref
from console.recording import Recording, RecordingWriter
from console.recording.recorder import Recorder
from console.recording.replay import ReplaySource
from console.sim.fleet import start_fleet
from console.telemetry.hub import Hub


def _thread_cpu(name_prefix: str) -> float:
    ids = {t.native_id for t in threading.enumerate() if t.name.startswith(name_prefix) and t.native_id}
    return sum(t.user_time + t.system_time for t in psutil.Process().threads() if t.id in ids)


def record(a: argparse.Namespace, directory: Path) -> None:
    fleet = start_fleet(["vllm", "sglang", "trtllm", "tgi"], load=True, seed=1)
    try:
        insts = [dataclasses.replace(parse_engine_ref(f"{p}@{u}"), pids=(pid,)) for p, u, pid in fleet.endpoints]
        hub = Hub(insts, refresh=1.0, gpu_source="simulated")
        writer = RecordingWriter(directory)
        rec = Recorder(hub, writer, raw_every=60.0)
        hub.start()
        time.sleep(5)  # warm-up: identities, first windows; then record
        rec.start()
        time.sleep(0.5)
        c0, w0 = _thread_cpu("enginedeck-recorder"), time.monotonic()
        time.sleep(a.seconds)
        c1, wall = _thread_cpu("enginedeck-recorder"), time.monotonic() - w0
        hub.stop()
        rec.stop()
    finally:
        fleet.stop()
    size = sum(f.stat().st_size for f in directory.iterdir() if f.name != ".lock")
    r = Recording.open(directory)
    docs = sum(1 for _ in r.documents())
    raws = list(r.raw_payloads())
    raw_bytes = sum(ref.info.length for ref in r.raw_frames)
    span = r.span
    assert span is not None
    hours = (span[1] - span[0] + 1) / 3600
    print(f"recorded {docs} snapshots + {len(raws)} raw payloads over {wall:.0f} s "
          f"(engines 4, GPUs {len(hub.latest().gpus.gpus)}); dropped {rec.dropped}")
    print(f"disk: {size / 1e6 / hours:.2f} MB per hour ({size} bytes; raw payloads "
          f"{raw_bytes / 1e6 / hours:.2f} MB/h of it); raw JSON would be "
          f"{sum(len(orjson.dumps(d)) for _, d in r.documents()) / 1e6 / hours:.1f} MB/h")
    print(f"recorder thread CPU: {100 * (c1 - c0) / wall:.3f}% of one core")


def _day(src: Path, dest: Path, seconds: int) -> None:
    docs: list[tuple[float, dict[str, Any]]] = list(Recording.open(src).documents())
    t0 = docs[0][0]
    w = RecordingWriter(dest)
    for k in range(seconds):
        _t, doc = docs[k % len(docs)]
        at = t0 + k
        w.add({**doc, "taken_at": at}, at=at)
    w.close()


def seek(a: argparse.Namespace, src: Path, day: Path) -> None:
    c = time.process_time()
    if not day.is_dir():
        _day(src, day, 86400)
    size = sum(f.stat().st_size for f in day.iterdir())
    print(f"24 h recording: {size / 1e6:.1f} MB in {len(list(day.glob('*.edrec')))} segments "
          f"(built in {time.process_time() - c:.0f} s CPU)")
    w0, c0 = time.perf_counter(), time.process_time()
    rec = Recording.open(day)
    replay = ReplaySource(rec, playing=False)
    print(f"open + first position: {1000 * (time.perf_counter() - w0):.0f} ms wall, "
          f"{1000 * (time.process_time() - c0):.0f} ms CPU")
    span = replay.span
    stamps: list[tuple[float, float]] = []  # (wall, CPU) of each publication
    done = threading.Event()

    def published(_snap: object) -> None:
        stamps.append((time.perf_counter(), time.process_time()))
        if len(stamps) == 2:
            done.set()

    replay.subscribe(published)
    replay.start()
    rng = random.Random(3)
    first_w, first_c, full_w, full_c = [], [], [], []
    for _ in range(a.seeks):
        t = rng.uniform(*span)
        stamps.clear()
        done.clear()
        w0, c0 = time.perf_counter(), time.process_time()
        replay.seek(t)
        done.wait(20)
        (w1, c1), (w2, c2) = stamps[:2]
        first_w.append(w1 - w0)
        first_c.append(c1 - c0)
        full_w.append(w2 - w0)
        full_c.append(c2 - c0)
        assert abs(replay.position - t) <= 1.0
    replay.stop()

    def ms(xs: list[float]) -> str:
        return f"median {1000 * statistics.median(xs):.0f} ms, max {1000 * max(xs):.0f} ms"

    print(f"seek ({a.seeks} random times), command to the snapshot on view: wall {ms(first_w)}; CPU {ms(first_c)}")
    print(f"  ... to the whole history ({replay.history_points} points, the hour's summaries): wall {ms(full_w)}; "
          f"CPU {ms(full_c)}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seeks", type=int, default=20)
    ap.add_argument("--skip-seek", action="store_true")
    ap.add_argument("--from-dir", metavar="DIR", help="seek only: build the day from this recording")
    ap.add_argument("--keep", metavar="DIR", help="record into DIR (a new folder) and keep it")
    ap.add_argument("--day", metavar="DIR", help="build the 24 h recording here (kept; reused when it exists)")
    args = ap.parse_args()
    print(f"machine: {psutil.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="enginedeck-bench-rec-") as tmp:
        src = Path(args.from_dir or args.keep or Path(tmp) / "rec")
        if not args.from_dir:
            record(args, src)
        if not args.skip_seek:
            seek(args, src, Path(args.day) if args.day else Path(tmp) / "day")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
