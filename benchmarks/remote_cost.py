"""The console's cost per remote engine: a host over real SSH reporting 16, then 64 engines at 1 s.

A real sshd on 127.0.0.1 (the remote-host tests' lab: throwaway keys, ``tests/remote/sshd.py``) runs,
as the host's command, a feeder that prints one status document a second, as a host's ``enginedeck
status --json --watch 1`` does, with N engines: the engines of a real document of the demo fleet
(4 simulators under load, collected by a hub here), copied under new names, their numbers moving
each second. The feeder stands in for the remote hub, whose cost is the remote machine's; what is
measured is this side: ``RemoteFleet`` (ssh's output read, each document parsed into a snapshot,
merged, its history recorded, published at 1 s) in this process (time.process_time) and the ssh
client (its children's CPU), per engine per document, for each N in one run, and the ratio of the
largest N's per-engine cost to the smallest's (flat: 1.0).
Usage: python benchmarks/remote_cost.py [--engines 16,64] [--seconds 30]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import psutil

from console.config import parse_engine_ref
from console.hosts import HostTarget
from console.ports import free_port
from console.remote.fleet import RemoteFleet
from console.sim.fleet import start_fleet
from console.status_doc import status_doc
from console.telemetry.hub import Hub

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.remote.sshd import SshLab, missing_tools  # the tests' sshd lab

FEEDER = r'''
import json, random, sys, time
doc = json.load(open(sys.argv[1]))
rng = random.Random(1)
while True:
    doc["taken_at"] = time.time()
    for e in doc["engines"]:
        e["metrics"]["updated_at"] = e["health"]["updated_at"] = doc["taken_at"]
        s = e["summary"]
        for k in ("running", "waiting"):
            s[k] = float(rng.randrange(20))
        s["kv_usage"] = round(rng.random(), 6)
        for m in e["per_model"]:
            m.update(running=s["running"], waiting=s["waiting"], kv_usage=s["kv_usage"])
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    time.sleep(1.0)
'''


def real_document() -> dict[str, Any]:
    fleet = start_fleet(["vllm", "sglang", "trtllm", "tgi"], load=True, seed=1)
    try:
        insts = [dataclasses.replace(parse_engine_ref(f"{p}@{u}"), pids=(pid,)) for p, u, pid in fleet.endpoints]
        hub = Hub(insts, refresh=1.0, gpu_source="simulated")
        hub.start()
        time.sleep(8)  # windows filled, rates and quantiles present
        doc = status_doc(hub.latest())
        hub.stop()
    finally:
        fleet.stop()
    return doc


def with_engines(doc: dict[str, Any], n: int) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    base = doc["engines"]
    out["engines"] = []
    for k in range(n):
        e = copy.deepcopy(base[k % len(base)])
        e["name"] = f"{e['profile']}-{k}"
        e["url"] = f"http://10.0.0.{k // 250 + 1}:{8000 + k % 250}"
        out["engines"].append(e)
    return out


def measure(lab: SshLab, folder: Path, doc: dict[str, Any], n: int, seconds: float) -> tuple[float, float, int]:
    """(this process's CPU s, the ssh client's CPU s, documents received) over ``seconds``."""
    doc_path = folder / f"doc-{n}.json"
    doc_path.write_bytes(orjson.dumps(with_engines(doc, n)))
    feeder = folder / "feeder.py"
    feeder.write_text(FEEDER)
    srv = lab.server(f"h{n}", free_port("127.0.0.1"))
    target = HostTarget(name=f"h{n}", destination="127.0.0.1", port=srv.port,
                        # "#": the status command line the stream appends is a comment to the shell there
                        command=f"{sys.executable} {feeder} {doc_path} #",
                        ssh_options=("-F", str(lab.client_config)), period=1.0)
    fleet = RemoteFleet([target], refresh=1.0)
    fleet.start()
    try:
        t0 = time.monotonic()
        while len(fleet.latest().engines) < n:
            if time.monotonic() - t0 > 30:
                raise SystemExit(f"the host's {n} engines did not appear within 30 s")
            time.sleep(0.1)
        me = psutil.Process()
        time.sleep(2.0)  # past the first documents
        docs0 = fleet.streams[0].documents
        kids0 = sum(c.cpu_times().user + c.cpu_times().system for c in me.children(recursive=True))
        c0, w0 = time.process_time(), time.monotonic()
        time.sleep(seconds)
        cpu = time.process_time() - c0
        kids = sum(c.cpu_times().user + c.cpu_times().system for c in me.children(recursive=True)) - kids0
        docs = fleet.streams[0].documents - docs0
        wall = time.monotonic() - w0
        print(f"  {n:3d} engines: {docs} documents in {wall:.1f} s; this process {cpu:.2f} s CPU, ssh {kids:.2f} s")
        return cpu, kids, docs
    finally:
        fleet.stop()
        srv.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="16,64")
    ap.add_argument("--seconds", type=float, default=30.0)
    a = ap.parse_args()
    missing = missing_tools()
    if missing:
        raise SystemExit(f"not found: {', '.join(missing)} (apt-get install -y openssh-server)")
    sizes = [int(x) for x in a.engines.split(",")]
    print(f"machine: {psutil.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in psutil.getloadavg())}")
    doc = real_document()
    size = len(orjson.dumps(doc["engines"][0]))
    print(f"a real document of the demo fleet: {size} bytes an engine")
    per: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="enginedeck-remote-cost-") as tmp:
        lab = SshLab(Path(tmp) / "ssh")
        try:
            for n in sizes:
                cpu, ssh_cpu, docs = measure(lab, Path(tmp), doc, n, a.seconds)
                per[n] = (cpu + ssh_cpu) / max(1, docs) / n
                print(f"       per engine per document: {per[n] * 1000:.3f} ms CPU "
                      f"({per[n] * 100:.3f} % of a core at 1 s; ssh {ssh_cpu / max(1, docs) / n * 1000:.3f} ms of it)")
        finally:
            lab.close()
    lo, hi = min(sizes), max(sizes)
    print(f"per-engine cost at {hi} / at {lo}: {per[hi] / per[lo]:.2f} (flat: 1.0)")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in psutil.getloadavg())}")


if __name__ == "__main__":
    main()
