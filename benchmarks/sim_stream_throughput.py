"""How many SSE token events per second one simulator process streams to many concurrent clients.

Starts ``enginedeck sim`` as a subprocess (fast decode via --speed, no access log), then runs the
streaming clients in separate processes (so client parsing does not share the server's CPU time),
each with asyncio + aiohttp. Every client loops on long ``ignore_eos`` chat streams. Prints the
events/s the clients received and the tokens/s the server's ground truth counted over the window.

    .venv/bin/python benchmarks/sim_stream_throughput.py [--clients 64] [--procs 2] [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
import urllib.request

from console.ports import free_port


def _client_proc(url: str, n: int, t_start: float, t_end: float, engine: str, q: mp.Queue) -> None:  # type: ignore[type-arg]
    import aiohttp

    async def one(session: aiohttp.ClientSession, i: int, counts: list[int]) -> None:
        body = {"model": "bench", "messages": [{"role": "user", "content": f"client {i} says hello to the sim"}],
                "max_tokens": 4000, "stream": True}
        if engine not in ("tgi",):
            body["ignore_eos"] = True
        if engine in ("vllm", "sglang", "trtllm"):
            body.pop("model")
        while time.time() < t_end:
            async with session.post(f"{url}/v1/chat/completions", json=body) as resp:
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    *events, buf = buf.split(b"\n\n")
                    now = time.time()
                    if t_start <= now < t_end:
                        counts[0] += sum(1 for e in events if e.startswith(b"data: {"))
                    if now >= t_end:
                        break

    async def main() -> int:
        counts = [0]
        conn = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=conn, read_bufsize=1 << 20) as session:
            await asyncio.gather(*(one(session, i, counts) for i in range(n)), return_exceptions=True)
        return counts[0]

    q.put(asyncio.run(main()))


def _state(url: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{url}/_sim/state", timeout=5) as r:
        return dict(json.loads(r.read())["counters"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--procs", type=int, default=2, help="client processes")
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement window")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--speed", type=float, default=1000.0, help="simulator --speed (decode step time / F)")
    args = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "console", "sim", "--engine", args.engine, "--port", str(port), "--speed",
           str(args.speed), "--max-running", str(max(64, args.clients)), "--kv-blocks", "100000",
           "--no-access-log"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 20
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    print("simulator did not start", file=sys.stderr)
                    return 1
                time.sleep(0.05)
        t_start = time.time() + args.warmup
        t_end = t_start + args.seconds
        q: mp.Queue = mp.Queue()  # type: ignore[type-arg]
        per = [args.clients // args.procs + (1 if i < args.clients % args.procs else 0) for i in range(args.procs)]
        procs = [mp.Process(target=_client_proc, args=(url, n, t_start, t_end, args.engine, q)) for n in per]
        for p in procs:
            p.start()
        time.sleep(max(0.0, t_start - time.time()))
        before = _state(url)
        cpu0 = _cpu(server.pid)
        time.sleep(max(0.0, t_end - time.time()))
        after = _state(url)
        cpu1 = _cpu(server.pid)
        events = sum(q.get(timeout=30) for _ in procs)
        for p in procs:
            p.join(10)
        gen = after["generation_tokens"] - before["generation_tokens"]
        print(f"engine={args.engine} clients={args.clients} client_procs={args.procs} window={args.seconds:g}s "
              f"speed={args.speed:g} cpus={os.cpu_count()}")
        print(f"client-received SSE events/s: {events / args.seconds:,.0f}")
        print(f"server tokens/s (ground truth, /_sim/state): {gen / args.seconds:,.0f}")
        if cpu0 is not None and cpu1 is not None:
            print(f"server CPU: {100 * (cpu1 - cpu0) / args.seconds:.0f}% of one core")
        return 0
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)


def _cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main())
