"""TTFT accuracy: the client's TTFT against the simulator's own per-request TTFT, at concurrency 64.

Starts one simulator (vLLM flavour) and runs the real load generator (closed loop, C=64) with
prompts of distinct lengths, so every client record can be matched to the simulator's ground-truth
record in ``GET /_sim/state`` (same ``prompt_tokens``). For each request:

    error = client TTFT (t_first_token - t_send, perf_counter_ns on arrival) - simulator ttft
            (first token produced - request arrival, measured inside the simulator)

The error is what the client adds (request write, loopback, HTTP parsing on both sides, the
simulator's own event-loop lag before it writes the token, and the client's read latency).
Prints median / p90 / p99 / max of the error in ms. Target: median under 1 ms.

The simulator stamps a token at the *scheduled* end of its iteration and writes it when its event
loop gets there, so at C=64 on a small host part of the error is the simulator's own delivery lag.
To separate the client's share, the same run is repeated against ``--source fixed``: a minimal
server process with a fixed configured prefill (``--prefill-ms``) that stamps, with the same
monotonic clock (``perf_counter_ns`` = CLOCK_MONOTONIC, shared by all processes on Linux), the
moment it received the request and the moment it wrote the first token. The client's error is
then measured against both the configured prefill and the server's own stamps. The aiohttp
reference client (``ref_aiohttp_client.py``) is measured the same way for comparison.

    .venv/bin/python benchmarks/ttft_accuracy.py [--source sim|fixed|both] [--concurrency 64] [--requests 512]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from console.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


FIXED_SERVER = r"""
import asyncio, sys, time, orjson
port, prefill, gap, n_tok = int(sys.argv[1]), float(sys.argv[2]) / 1000, float(sys.argv[3]) / 1000, int(sys.argv[4])
state = {}
ev = lambda text: b"data: " + orjson.dumps({"object": "text_completion", "choices": [{"index": 0, "text": text,
    "finish_reason": None}]}) + b"\n\n"
def chunk(b): return b"%x\r\n" % len(b) + b + b"\r\n"
class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.buf = t, b""
        import socket
        t.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    def data_received(self, d):
        now = time.perf_counter_ns()
        self.buf += d
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0: return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n"):
                if line.lower().startswith("content-length:"): length = int(line.split(":", 1)[1])
            if len(self.buf) < end + 4 + length: return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            if head.startswith("GET /_state"):
                out = orjson.dumps(state)
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                self.t.write(head % len(out) + out)
                continue
            key = str(len(orjson.loads(body)["prompt"].split()))
            asyncio.get_running_loop().create_task(self.stream(key, now))
    async def stream(self, key, t_recv):
        loop = asyncio.get_running_loop()
        self.t.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        due = t_recv + int(prefill * 1e9)
        await asyncio.sleep(max(0.0, (due - time.perf_counter_ns()) / 1e9))
        t_w = time.perf_counter_ns()
        self.t.write(chunk(ev(" first")))
        state[key] = [t_recv, t_w]
        for _ in range(n_tok - 1):
            await asyncio.sleep(gap)
            self.t.write(chunk(ev(" tok")))
        u = {"prompt_tokens": int(key), "completion_tokens": n_tok, "total_tokens": int(key) + n_tok}
        usage = {"object": "text_completion", "choices": [], "usage": u}
        self.t.write(chunk(b"data: " + orjson.dumps(usage) + b"\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
async def main():
    srv = await asyncio.get_running_loop().create_server(P, "127.0.0.1", port)
    async with srv: await srv.serve_forever()
asyncio.run(main())
"""


def _wait(url: str) -> None:
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)


def _summ(errors: list[float]) -> str:
    from console.client.timing import Dist

    d = Dist.of(errors)
    if not d.n:
        return "no data"
    return f"median {d.p50:.3f}  p90 {d.p90:.3f}  p99 {d.p99:.3f}  max {d.max:.3f} ms  (n={d.n})"


def run_fixed(args: argparse.Namespace) -> None:
    """Fixed-prefill server: client TTFT against the configured prefill and the server's own stamps."""
    import random

    from console.client.loadgen import LevelSpec, Target, run_level
    from console.client.stream import GenParams
    from console.client.timing import compute
    from console.client.workloads import Prompt, words
    from console.profiles import get_profile
    from console.target import EngineTarget

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", FIXED_SERVER, str(port), str(args.prefill_ms), str(args.gap_ms),
                             str(args.output_len)], cwd=ROOT, start_new_session=True)  # fmt: skip
    try:
        _wait(url)
        rng = random.Random(5)
        n = args.requests + args.concurrency
        prompts = [Prompt(f"p{i}", words(rng, 40 + i), input_words=40 + i, output_len=args.output_len)
                   for i in range(n)]  # fmt: skip
        spec = LevelSpec("closed", args.concurrency, num_prompts=args.requests, warmup=args.concurrency)
        raw = asyncio.run(run_level(Target(EngineTarget("fixed", get_profile("llamacpp"), url), "m"), spec, prompts,
                                    GenParams(max_tokens=args.output_len), scrape_metrics=False))  # fmt: skip
        with urllib.request.urlopen(url + "/_state", timeout=10) as r:
            state = json.loads(r.read())
        ref = _ref_fixed(url, prompts[args.concurrency :], args, state)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    vs_cfg, vs_stamp, deliver, req_path = [], [], [], []
    for rec in raw.records:
        st = state.get(str(rec.prompt_tokens))
        if rec.warmup or not rec.ok or st is None:
            continue
        m = compute(rec)
        assert m.ttft_ms is not None
        t_recv, t_w = st
        vs_cfg.append(m.ttft_ms - args.prefill_ms)
        vs_stamp.append(m.ttft_ms - (t_w - t_recv) / 1e6)
        deliver.append((rec.event_t_ns[0] - t_w) / 1e6)
        req_path.append((t_recv - rec.t_send_ns) / 1e6)
    print(f"\nfixed-prefill server ({args.prefill_ms:g} ms prefill, {args.gap_ms:g} ms token gap), "
          f"C={args.concurrency}, {args.requests} requests")  # fmt: skip
    print(f"  enginedeck TTFT - configured prefill      : {_summ(vs_cfg)}")
    print(f"  enginedeck TTFT - server's own TTFT stamps: {_summ(vs_stamp)}")
    print(f"     of which send -> server received       : {_summ(req_path)}")
    print(f"     of which first write -> client stamped : {_summ(deliver)}")
    print(f"  reference  TTFT - server's own TTFT stamps: {_summ(ref)}")
    from console.client.timing import Dist

    med = Dist.of(vs_stamp).p50
    print(f"  target median |error| < 1 ms: {'PASS' if med is not None and abs(med) < 1.0 else 'FAIL'}")


def _ref_fixed(url: str, prompts: list, args: argparse.Namespace, state: dict) -> list[float]:  # type: ignore[type-arg]
    """The aiohttp reference client on the same server (after the enginedeck run; its own stamps)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from ref_aiohttp_client import make_session, ref_request

    errors: list[float] = []

    async def go() -> None:
        it = iter(prompts)
        async with make_session(args.concurrency) as session:

            async def worker() -> None:
                for p in it:
                    out = await ref_request(session, url + "/v1/completions",
                                            {"prompt": p.prompt, "max_tokens": args.output_len, "stream": True})
                    errors.append((p.input_words, out.ttft))

            await asyncio.gather(*(worker() for _ in range(args.concurrency)))

    state_before = set(state)
    asyncio.run(go())
    with urllib.request.urlopen(url + "/_state", timeout=10) as r:
        st2 = json.loads(r.read())
    out = []
    for words_n, ttft in errors:  # type: ignore[misc]
        key = str(words_n)
        if key in st2 and ttft:
            t_recv, t_w = st2[key]
            out.append(ttft * 1000.0 - (t_w - t_recv) / 1e6)
    del state_before
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="client TTFT vs simulator ground truth")
    ap.add_argument("--source", choices=["sim", "fixed", "both"], default="both")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--speed", type=float, default=1.0)
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--prefill-ms", type=float, default=50.0)
    ap.add_argument("--gap-ms", type=float, default=20.0)
    args = ap.parse_args()
    if args.source in ("sim", "both"):
        run_sim(args)
    if args.source in ("fixed", "both"):
        run_fixed(args)


def run_sim(args: argparse.Namespace) -> None:
    from console.client.loadgen import LevelSpec, Target, run_level
    from console.client.stream import GenParams
    from console.client.timing import Dist, compute
    from console.client.workloads import Prompt, words
    from console.profiles import get_profile
    from console.target import EngineTarget

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", "sim", "--engine", args.engine, "--port", str(port), "--no-access-log",
         "--speed", str(args.speed)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                with urllib.request.urlopen(url + "/v1/models", timeout=1) as r:
                    model = json.loads(r.read())["data"][0]["id"]
                    break
            except OSError:
                time.sleep(0.1)
        import random

        rng = random.Random(5)
        n = args.requests + args.concurrency
        # distinct prompt lengths -> one-to-one match with the simulator's records
        prompts = [Prompt(f"p{i}", words(rng, 40 + i), input_words=40 + i, output_len=args.output_len)
                   for i in range(n)]  # fmt: skip
        prof = get_profile(args.engine)
        spec = LevelSpec("closed", args.concurrency, num_prompts=args.requests, warmup=args.concurrency)
        raw = asyncio.run(run_level(Target(EngineTarget(args.engine, prof, url), model), spec, prompts,
                                    GenParams(max_tokens=args.output_len, fixed_length=True),
                                    scrape_metrics=False))  # fmt: skip
        # the reference client on the same simulator, with the next block of distinct lengths
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from ref_aiohttp_client import make_session, ref_request

        ref_prompts = [Prompt(f"q{i}", words(rng, 40 + n + i), input_words=40 + n + i) for i in range(args.requests)]
        ref_out: list[tuple[int, float]] = []

        async def ref_go() -> None:
            it = iter(ref_prompts)
            async with make_session(args.concurrency) as session:

                async def worker() -> None:
                    for p in it:
                        o = await ref_request(session, url + "/v1/completions", {
                            "model": model, "prompt": p.prompt, "max_tokens": args.output_len, "stream": True,
                            "ignore_eos": True})  # fmt: skip
                        ref_out.append((p.input_words, o.ttft * 1000.0))

                await asyncio.gather(*(worker() for _ in range(args.concurrency)))

        asyncio.run(ref_go())
        with urllib.request.urlopen(url + "/_sim/state", timeout=10) as r:
            state = json.loads(r.read())
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    truth = {int(q["prompt_tokens"]): q for q in state["requests"]}
    ref_err = [t - truth[k]["ttft"] * 1000.0 for k, t in ref_out if k in truth and t > 0]
    errors = []
    client_ttft = []
    server_ttft = []
    for rec in raw.records:
        if rec.warmup or not rec.ok or rec.prompt_tokens not in truth:
            continue
        m = compute(rec)
        if m.ttft_ms is None:
            continue
        st = truth[rec.prompt_tokens]["ttft"] * 1000.0
        client_ttft.append(m.ttft_ms)
        server_ttft.append(st)
        errors.append(m.ttft_ms - st)
    d, c, s_ = Dist.of(errors), Dist.of(client_ttft), Dist.of(server_ttft)
    lag = Dist.of(raw.selfcheck.loop_lag_ms)
    print(f"TTFT accuracy, {args.engine} simulator, C={args.concurrency}, {len(errors)} matched requests "
          f"(of {args.requests}), {args.output_len} output tokens, speed {args.speed:g}, {os.cpu_count()} CPUs")
    print(f"  simulator TTFT (ms): p50 {s_.p50:.2f}  p90 {s_.p90:.2f}  p99 {s_.p99:.2f}")
    print(f"  client TTFT    (ms): p50 {c.p50:.2f}  p90 {c.p90:.2f}  p99 {c.p99:.2f}")
    print(f"  enginedeck - sim (ms): median {d.p50:.3f}  p90 {d.p90:.3f}  p99 {d.p99:.3f}  max {d.max:.3f}  "
          f"min {d.min:.3f}")
    print(f"  reference client - sim : {_summ(ref_err)}")
    print(f"  client loop lag p50/p99 {lag.p50:.2f}/{lag.p99:.2f} ms, client CPU {raw.selfcheck.cpu_percent:.0f}%")
    print(f"  target median < 1 ms: {'PASS' if d.p50 is not None and abs(d.p50) < 1.0 else 'FAIL'}")


if __name__ == "__main__":
    main()
