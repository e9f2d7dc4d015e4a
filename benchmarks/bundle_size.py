"""Size and time of a 15-minute incident bundle for 8 engines (issue 13 part 3: <= 5 MB, <= 3 s).

Eight real simulators (vLLM, SGLang, TensorRT-LLM and TGI flavours, twice each) under synthetic
load; a hub collects them for a few seconds at 1 s. The 15-minute recording is made quickly from
those real status documents: one document a second for ``--minutes`` (each a real one, its time
moved), and each engine's real raw /metrics payload once a minute, written with RecordingWriter.
Then the bundle is made against the live simulators (their endpoints are probed for real) in
this process, with the hub and the load stopped, timing wall and CPU (time.process_time); and once more by
`enginedeck bundle` in a child process (wall and the child's CPU: imports, its own fresh
snapshot). Prints sizes, times, the files and the load average.
Usage: python benchmarks/bundle_size.py [--minutes 15] [--engines 8]
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from console.bundle.archive import read_manifest
from console.bundle.make import BundleRequest, default_name, make_bundle
from console.bundle.window import Window
from console.config import parse_engine_ref
from console.recording import RecordingWriter
from console.sim.fleet import start_fleet
from console.status_doc import status_doc
from console.telemetry.hub import Hub

FLAVOURS = ("vllm", "sglang", "trtllm", "tgi")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--engines", type=int, default=8)
    ap.add_argument("--collect", type=float, default=8.0, help="seconds of real collection (default 8)")
    a = ap.parse_args()
    engines = [FLAVOURS[i % len(FLAVOURS)] for i in range(a.engines)]
    fleet = start_fleet(engines, load=True, seed=1)
    try:
        refs = [f"{p}@{u}" for p, u, _ in fleet.endpoints]
        instances = [parse_engine_ref(r) for r in refs]
        hub = Hub(instances, refresh=1.0, gpu_source="simulated")
        docs = []
        hub.subscribe(lambda snap: docs.append(status_doc(snap)))
        hub.start()
        time.sleep(a.collect)
        hub.stop()
        snapshot = hub.latest()
        if fleet.load is not None:  # the load runs in this process: its CPU would count as the bundle's
            fleet.load.stop()
        raw = {}
        for inst in instances:
            with urllib.request.urlopen(inst.url + inst.profile.metrics.path, timeout=10) as r:
                raw[inst.name] = r.read()
        print(f"{len(docs)} real status documents ({sum(len(str(d)) for d in docs) // max(1, len(docs))} chars "
              f"each), raw payloads {sum(map(len, raw.values())) // 1024} KiB for {len(raw)} engines")
        with tempfile.TemporaryDirectory(prefix="bundle-bench-") as tmp:
            rec_dir = Path(tmp) / "recording"
            now = time.time()
            seconds = int(a.minutes * 60)
            t0 = now - seconds
            writer = RecordingWriter(rec_dir)
            for i in range(seconds):
                doc = copy.copy(docs[i % len(docs)])
                doc["taken_at"] = t0 + i
                writer.add(doc, at=t0 + i)
                if i % 60 == 0:
                    for name, body in raw.items():
                        writer.add_raw(name, body, at=t0 + i)
            writer.close()
            rec_bytes = sum(p.stat().st_size for p in rec_dir.iterdir())
            print(f"recording: {seconds} documents, {len(raw) * (seconds // 60 + 1)} raw payloads, "
                  f"{rec_bytes / 2**20:.2f} MiB on disk")
            dest = Path(tmp) / default_name("bench", now)
            req = BundleRequest(instances=instances, window=Window(t0 - 0.5, t0 + seconds), dest=dest,
                                snapshot=snapshot, recording_dir=rec_dir)  # fmt: skip
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = make_bundle(req)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            m = read_manifest(result.path)
            print(f"in process: {result.bytes / 2**20:.2f} MiB, wall {wall:.2f} s, CPU {cpu:.2f} s, "
                  f"{len(m['files'])} files, recording: {m['recording']['note']}")
            biggest = sorted(m["files"], key=lambda f: -f["bytes"])[:5]
            print("  largest files (uncompressed): " + ", ".join(f"{f['path']} {f['bytes'] // 1024} KiB"
                                                                  for f in biggest))  # fmt: skip
            print("  collectors: " + ", ".join(f"{c['name']} {c['seconds']:.2f} s" for c in m["collectors"]))
            out = Path(tmp) / "cli.tar.gz"
            cmd = [sys.executable, "-m", "console", "bundle", "--last", f"{time.time() - t0 + 0.5:.1f}s", "--recording",
                   str(rec_dir), "--gpus", "simulated", "-o", str(out)]  # fmt: skip
            for r in refs:
                cmd += ["--engine", r]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall0 = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            wall = time.perf_counter() - wall0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            child_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            if proc.returncode != 0:
                print(proc.stderr)
                return 1
            print(f"enginedeck bundle: {out.stat().st_size / 2**20:.2f} MiB, wall {wall:.2f} s, CPU {child_cpu:.2f} s "
                  f"(imports and its own fresh snapshot included)")
            print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        fleet.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
