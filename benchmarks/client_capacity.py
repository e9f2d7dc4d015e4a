"""Client capacity: the most SSE token events (and requests) per CPU-second ONE client process handles.

Starts several simulator processes (vLLM flavour, fast decode via ``--speed``) so that the client is
the bottleneck, then runs these variants, each in its own fresh process, interleaved (the order
rotates and reverses every round, so a load change on a shared host hits every variant alike):

* ``enginedeck``: the real load generator (``console.client.loadgen.run_level``, closed loop,
  raw-asyncio HTTP/1.1 + incremental SSE + orjson, full per-event timestamping and records);
* ``reference``: ``benchmarks/ref_aiohttp_client.py`` (aiohttp + line iteration + json, the
  vLLM/SGLang benchmark-client style);
* ``own-http`` and ``aiohttp-orjson`` (``benchmarks/transport_loops.py``): the fair comparison of
  the transport alone. Same pre-encoded orjson bodies, same SSE parser and sink
  (``OpenAIStreamSink``), same closed loop; only the HTTP client differs (``console/transport/http.py``
  vs aiohttp). This pair decides whether the hand-written client earns its place.

Prints events/s, events and requests per CPU-second of the client process for each variant, the
per-round ratios and the overall ratios of the two pairs. ``--output-len 256,8`` runs a long-stream
workload (events per CPU-second) and a short one (requests per CPU-second).

Two sources (``--source sim|replay|both``, default both):

* ``sim``: the simulator processes themselves. On a small host (2 cores) the Python simulators
  cannot outrun a client, so the client is not saturated: its CPU per event then includes the
  per-read overhead of reads that carry only a few events, and the figure is a lower bound of
  its capacity.
* ``replay``: a minimal HTTP server process per simulator that answers every request with the
  simulator's own captured response bytes (one real ``/v1/completions`` stream fetched at start),
  written at once. The server costs almost nothing per event, so the client is the bottleneck:
  this is the capacity figure.

    .venv/bin/python benchmarks/client_capacity.py [--sims 3] [--concurrency 128] [--seconds 10] \\
        [--rounds 2] [--output-len 256,8] [--variants own-http,aiohttp-orjson] [--source sim|replay|both]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import queue
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


def _transport(which: str, urls: list[str], conc: int, seconds: float, out_len: int, q: Any) -> None:
    from transport_loops import aiohttp_loop, own_loop

    from console.client.loadgen import Target, encode_bodies
    from console.client.stream import GenParams
    from console.client.workloads import WorkloadSpec, generate
    from console.profiles import get_profile
    from console.target import EngineTarget

    target = Target(EngineTarget("sim", get_profile("vllm"), urls[0]), MODEL)
    prompts = generate(WorkloadSpec(input_len=16, output_len=out_len), 2_000, seed=1)
    bodies, _ = encode_bodies(target, prompts, GenParams(max_tokens=out_len, fixed_length=True))
    loop = own_loop if which == "own-http" else aiohttp_loop
    q.put(asyncio.run(loop(urls, target.path, bodies, conc, seconds)))


def _own_http(urls: list[str], conc: int, seconds: float, out_len: int, q: Any) -> None:
    _transport("own-http", urls, conc, seconds, out_len, q)


def _aiohttp_orjson(urls: list[str], conc: int, seconds: float, out_len: int, q: Any) -> None:
    _transport("aiohttp-orjson", urls, conc, seconds, out_len, q)


VARIANTS = {"enginedeck": _enginedeck, "reference": _reference, "own-http": _own_http,
            "aiohttp-orjson": _aiohttp_orjson}  # fmt: skip
PAIRS = [("own-http", "aiohttp-orjson"), ("enginedeck", "reference")]


def run_variant(name: str, urls: list[str], conc: int, seconds: float, out_len: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=VARIANTS[name], args=(urls, conc, seconds, out_len, q))
    p.start()
    deadline = time.monotonic() + seconds + 120
    while True:  # fail at once (not after the deadline) when the child died without a result
        try:
            res = q.get(timeout=1.0)
            break
        except queue.Empty:
            if not p.is_alive() or time.monotonic() > deadline:
                p.kill()
                raise RuntimeError(f"variant {name} gave no result (exit code {p.exitcode})") from None
    p.join(30)
    res["name"] = name
    return dict(res)


def _order(names: list[str], r: int) -> list[str]:
    """Rotate by the round number and reverse every other round (ABAB... becomes AB BA AB ...)."""
    k = r % len(names)
    rot = names[k:] + names[:k]
    return rot if (r // len(names)) % 2 == 0 else rot[::-1]


def measure(label: str, urls: list[str], out_len: int, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    names: list[str] = args.variants
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in _order(names, r):
            res = run_variant(name, urls, args.concurrency, args.seconds, out_len)
            results[name].append(res)
            print(f"  [{label}, {out_len} tok] round {r + 1} {name:14s}: {res['events']:>8} events "
                  f"{res['events'] / res['wall_s']:>9,.0f}/s  CPU {res['cpu_s']:.2f}s / wall {res['wall_s']:.2f}s "
                  f"-> {res['events'] / res['cpu_s']:>9,.0f} events, {res['requests'] / res['cpu_s']:>7,.0f} req "
                  f"per CPU-s  ({res['requests']} req, {res['errors']} errors)", flush=True)  # fmt: skip
    print(f"\n{label}: {len(urls)} server processes, C={args.concurrency}, {out_len} tokens/request, "
          f"{os.cpu_count()} CPUs on this host, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    per_cpu: dict[str, dict[str, float]] = {}
    for name, rs in results.items():
        ev = sum(x["events"] for x in rs)
        req = sum(x["requests"] for x in rs)
        wall = sum(x["wall_s"] for x in rs)
        cpu = sum(x["cpu_s"] for x in rs)
        per_cpu[name] = {"events": ev / cpu, "requests": req / cpu}
        print(f"  {name:14s}: {ev / wall:>9,.0f} events/s   {ev / cpu:>9,.0f} events/CPU-s   {req / cpu:>7,.0f} "
              f"requests/CPU-s (client CPU {100 * cpu / wall:.0f}% of a core)")  # fmt: skip
    for a, b in PAIRS:
        if a in results and b in results:
            per_round = [
                (x["events"] / x["cpu_s"]) / (y["events"] / y["cpu_s"])
                for x, y in zip(results[a], results[b], strict=True)
            ]
            print(f"  {a}/{b}: {per_cpu[a]['events'] / per_cpu[b]['events']:.2f}x events per CPU-s, "
                  f"{per_cpu[a]['requests'] / per_cpu[b]['requests']:.2f}x requests per CPU-s; per round "
                  f"{', '.join(f'{x:.2f}' for x in per_round)}")  # fmt: skip
    print()
    return per_cpu


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-replay":
        serve_replay(int(sys.argv[2]), sys.argv[3])
        return
    ap = argparse.ArgumentParser(description="client capacity: own HTTP client vs aiohttp")
    ap.add_argument("--sims", type=int, default=3, help="simulator processes (default 3)")
    ap.add_argument("--speed", type=float, default=100.0, help="simulator time speed-up (default 100)")
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--output-len", default="256,8", help="tokens per request, comma-separated (default 256,8)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {', '.join(VARIANTS)}")
    ap.add_argument("--source", choices=["sim", "replay", "both"], default="both")
    args = ap.parse_args()
    args.variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    lengths = [int(x) for x in args.output_len.split(",") if x.strip()]
    import tempfile

    sims = start_sims(args.sims, args.speed)
    replays: list[tuple[subprocess.Popen[bytes], str]] = []
    try:
        urls = [u for _, u in sims]
        for out_len in lengths:
            if args.source in ("sim", "both"):
                measure("simulator", urls, out_len, args)
            if args.source in ("replay", "both"):
                with tempfile.TemporaryDirectory() as tmp:
                    replays = start_replays(urls, out_len, Path(tmp))
                    measure("replay of the simulator's stream", [u for _, u in replays], out_len, args)
                stop_sims(replays)
                replays = []
    finally:
        stop_sims(sims + replays)


if __name__ == "__main__":
    main()
