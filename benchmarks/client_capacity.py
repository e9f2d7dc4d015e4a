"""Client capacity: the most SSE token events per second ONE load-generator process consumes.

Starts several simulator processes (vLLM flavour, fast decode via ``--speed``) so that the client is
the bottleneck, then runs, each in its own fresh process and one after the other (ABAB):

* ``enginedeck``: the real load generator (``console.client.loadgen.run_level``, closed loop,
  raw-asyncio HTTP/1.1 + incremental SSE + orjson, full per-event timestamping and records);
* ``reference``: ``benchmarks/ref_aiohttp_client.py`` (aiohttp + line iteration + json, the
  vLLM/SGLang benchmark-client style).

Prints events/s and events per CPU-second of the client process (events/s per core) for both.

Two sources (``--source sim|replay|both``, default both):

* ``sim``: the simulator processes themselves. On a small host (2 cores) the Python simulators
  cannot outrun a client, so the client is not saturated: its CPU per event then includes the
  per-read overhead of reads that carry only a few events, and the figure is a lower bound of
  its capacity.
* ``replay``: a minimal HTTP server process per simulator that answers every request with the
  simulator's own captured response bytes (one real ``/v1/completions`` stream fetched at start),
  written at once. The server costs almost nothing per event, so the client is the bottleneck:
  this is the capacity figure.

    .venv/bin/python benchmarks/client_capacity.py [--sims 3] [--concurrency 128] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from console.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODEL = "Qwen/Qwen3-0.6B"


def start_sims(n: int, speed: float) -> list[tuple[subprocess.Popen[bytes], str]]:
    out = []
    for _ in range(n):
        port = free_port()
        cmd = [sys.executable, "-m", "console", "sim", "--engine", "vllm", "--port", str(port), "--no-access-log",
               "--speed", str(speed), "--max-running", "1024", "--kv-blocks", "100000"]  # fmt: skip
        p = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        out.append((p, f"http://127.0.0.1:{port}"))
    for _, url in out:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
    return out


def stop_sims(sims: list[tuple[subprocess.Popen[bytes], str]]) -> None:
    for p, _ in sims:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p, _ in sims:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def capture_stream(url: str, out_len: int) -> bytes:
    """One real streamed response from the simulator, raw HTTP bytes (headers + chunked body)."""
    import json
    import socket

    body = json.dumps({"model": MODEL, "prompt": "hello " * 16, "max_tokens": out_len, "stream": True,
                       "stream_options": {"include_usage": True, "continuous_usage_stats": True},
                       "ignore_eos": True}).encode()  # fmt: skip
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)  # fmt: skip
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.replace(b"Connection: close", b"Connection: keep-alive")


def serve_replay(port: int, path: str) -> None:
    """Answer every request (keep-alive) with the captured bytes. Runs as its own process."""
    data = Path(path).read_bytes()

    class Replay(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.t: Any = transport
            self.buf = b""

        def data_received(self, chunk: bytes) -> None:
            self.buf += chunk
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end].decode("latin-1").lower()
                length = 0
                for line in head.split("\r\n"):
                    if line.startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                if len(self.buf) < end + 4 + length:
                    return
                self.buf = self.buf[end + 4 + length :]
                self.t.write(data)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Replay, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def start_replays(urls: list[str], out_len: int, tmp: Path) -> list[tuple[subprocess.Popen[bytes], str]]:
    import socket

    out = []
    for i, url in enumerate(urls):
        f = tmp / f"replay{i}.bin"
        f.write_bytes(capture_stream(url, out_len))
        port = free_port()
        p = subprocess.Popen([sys.executable, __file__, "--serve-replay", str(port), str(f)], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        out.append((p, f"http://127.0.0.1:{port}"))
    for _, u in out:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", int(u.rsplit(":", 1)[1])), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
    return out


def _enginedeck(urls: list[str], conc: int, seconds: float, out_len: int, q: Any) -> None:
    from console.client.loadgen import LevelSpec, Target, encode_bodies, run_level
    from console.client.stream import GenParams
    from console.client.workloads import WorkloadSpec, generate
    from console.profiles import get_profile
    from console.target import EngineTarget

    prof = get_profile("vllm")
    per = max(1, conc // len(urls))
    n = 20_000
    prompts = generate(WorkloadSpec(input_len=16, output_len=out_len), n, seed=1)
    spec = LevelSpec("closed", per, num_prompts=n, warmup=0, max_duration=seconds)
    params = GenParams(max_tokens=out_len, fixed_length=True)
    targets = [Target(EngineTarget(f"sim{i}", prof, u), MODEL) for i, u in enumerate(urls)]
    encoded = [encode_bodies(t, prompts, params) for t in targets]  # prepared before the clock starts
    times: list[float] = []

    async def go() -> Any:
        times.extend((time.process_time(), time.perf_counter()))
        return await asyncio.gather(*(
            run_level(t, spec, prompts, params, scrape_metrics=False, encoded=e)
            for t, e in zip(targets, encoded, strict=True)
        ))  # fmt: skip

    raws: Any = asyncio.run(go())
    cpu1, t1 = time.process_time(), time.perf_counter()
    cpu0, t0 = times
    events = sum(len(r.event_t_ns) for raw in raws for r in raw.records)
    reqs = sum(len(raw.records) for raw in raws)
    errors = sum(1 for raw in raws for r in raw.records if not r.ok)
    q.put({"events": events, "requests": reqs, "errors": errors, "cpu_s": cpu1 - cpu0, "wall_s": t1 - t0})


def _reference(urls: list[str], conc: int, seconds: float, out_len: int, q: Any) -> None:
    from ref_aiohttp_client import closed_loop

    payload = {"model": MODEL, "prompt": "hello " * 16, "max_tokens": out_len, "stream": True,
               "stream_options": {"include_usage": True}, "ignore_eos": True, "temperature": 0.0}  # fmt: skip
    q.put(asyncio.run(closed_loop([u + "/v1/completions" for u in urls], payload, conc, seconds)))


def run_variant(name: str, urls: list[str], conc: int, seconds: float, out_len: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    target = _enginedeck if name == "enginedeck" else _reference
    p = ctx.Process(target=target, args=(urls, conc, seconds, out_len, q))
    p.start()
    res = q.get(timeout=seconds + 120)
    p.join(30)
    res["name"] = name
    return dict(res)


def measure(label: str, urls: list[str], args: argparse.Namespace) -> dict[str, float]:
    results: dict[str, list[dict[str, Any]]] = {"enginedeck": [], "reference": []}
    for r in range(args.rounds):
        order = ["enginedeck", "reference"] if r % 2 == 0 else ["reference", "enginedeck"]
        for name in order:
            res = run_variant(name, urls, args.concurrency, args.seconds, args.output_len)
            results[name].append(res)
            print(f"  [{label}] round {r + 1} {name:10s}: {res['events']:>8} events "
                  f"{res['events'] / res['wall_s']:>9,.0f}/s  CPU {res['cpu_s']:.2f}s / wall {res['wall_s']:.2f}s "
                  f"-> {res['events'] / res['cpu_s']:>9,.0f} events per CPU-s  ({res['requests']} req, "
                  f"{res['errors']} errors)", flush=True)  # fmt: skip
    print(f"\n{label}: {len(urls)} server processes, C={args.concurrency}, {args.output_len} tokens/request, "
          f"{os.cpu_count()} CPUs on this host")  # fmt: skip
    per_core: dict[str, float] = {}
    for name, rs in results.items():
        ev = sum(x["events"] for x in rs)
        wall = sum(x["wall_s"] for x in rs)
        cpu = sum(x["cpu_s"] for x in rs)
        per_core[name] = ev / cpu
        print(f"  {name:10s}: {ev / wall:>9,.0f} events/s   {ev / cpu:>9,.0f} events/s per core (client CPU "
              f"{100 * cpu / wall:.0f}% of a core)")  # fmt: skip
    print(f"  per-core ratio enginedeck/reference: {per_core['enginedeck'] / per_core['reference']:.2f}x\n")
    return per_core


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-replay":
        serve_replay(int(sys.argv[2]), sys.argv[3])
        return
    ap = argparse.ArgumentParser(description="client capacity: enginedeck vs aiohttp reference")
    ap.add_argument("--sims", type=int, default=3, help="simulator processes (default 3)")
    ap.add_argument("--speed", type=float, default=100.0, help="simulator time speed-up (default 100)")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2, help="ABAB rounds (default 2)")
    ap.add_argument("--source", choices=["sim", "replay", "both"], default="both")
    args = ap.parse_args()
    import tempfile

    sims = start_sims(args.sims, args.speed)
    replays: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        urls = [u for _, u in sims]
        if args.source in ("sim", "both"):
            measure("simulator", urls, args)
        if args.source in ("replay", "both"):
            with tempfile.TemporaryDirectory() as tmp:
                replays = start_replays(urls, args.output_len, Path(tmp))
                measure("replay of the simulator's stream", [u for _, u in replays], args)
    finally:
        stop_sims(sims + replays)


if __name__ == "__main__":
    main()
