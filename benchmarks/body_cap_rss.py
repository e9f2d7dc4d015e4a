"""Memory under huge bodies: `status --watch` and the console behind a source that answers 50 MB.

    .venv/bin/python benchmarks/body_cap_rss.py [--idle 15] [--fault 30] [--after 15] [--mb 50]
                                                 [--framing length|chunked|both] [--only status|console]

An engine-shaped server on 127.0.0.1 answers a normal vLLM payload, then for ``--fault`` seconds
answers every path with a ``--mb`` MB body (``length``: with Content-Length; ``chunked``: without),
then normal payloads again. Runs `enginedeck status --watch 1` and `enginedeck attach` (in tmux) on
it and samples each process's RSS every 0.5 s. Prints, per client and framing: the idle RSS (mean of
the last 5 s before the fault), the peak during the fault, and the RSS at ``--after`` seconds after
the fault ended, with the difference to idle (the target: within 20 MB). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from aiohttp import web

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
MB = 1e6
NORMAL = (
    b"# TYPE vllm:num_requests_running gauge\n"
    b'vllm:num_requests_running{model_name="m"} 3\n'
    b"# TYPE vllm:kv_cache_usage_perc gauge\n"
    b'vllm:kv_cache_usage_perc{model_name="m"} 0.42\n'
    b"# TYPE vllm:generation_tokens_total counter\n"
    b'vllm:generation_tokens_total{model_name="m"} 1000\n'
)


class Source:
    def __init__(self, mb: int) -> None:
        self.big = b"x" * (mb * 1_000_000)
        self.fault = ""  # "", "length" or "chunked"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.fault == "length":
            return web.Response(body=self.big, content_type="text/plain")
        if self.fault == "chunked":
            resp = web.StreamResponse()
            resp.enable_chunked_encoding()
            resp.content_type = "text/plain"
            await resp.prepare(request)
            view = memoryview(self.big)
            try:
                for i in range(0, len(view), 1 << 20):
                    await resp.write(view[i:i + (1 << 20)])
            except (ConnectionError, RuntimeError):
                pass
            return resp
        if request.path.startswith("/v1/models"):
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        if request.path.startswith("/metrics"):
            return web.Response(body=NORMAL, content_type="text/plain")
        return web.Response(text="")


def serve(source: Source) -> int:
    import asyncio

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", source.handle)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
    threading.Thread(target=loop.run_forever, daemon=True).start()
    return port


def _rss(pid: int) -> float:
    try:
        return psutil.Process(pid).memory_info().rss / MB
    except psutil.Error:
        return float("nan")


def run_once(kind: str, url: str, source: Source, framing: str, args: argparse.Namespace) -> dict[str, float]:
    state = tempfile.mkdtemp(prefix="enginedeck-bodycap-")
    env = {**os.environ, "ENGINEDECK_STATE_DIR": state, "ENGINEDECK_CONFIG_DIR": state}
    session = ""
    if kind == "status":
        proc = subprocess.Popen([PY, "-m", "console", "status", "--watch", "1", "--sample", "0", "--gpus", "none",
                                 "--engine", f"vllm@{url}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        pid = proc.pid
    else:
        session = f"bodycap-{os.getpid()}"
        cmd = f"cd {REPO} && ENGINEDECK_STATE_DIR={state} ENGINEDECK_CONFIG_DIR={state} {PY} -m console attach " \
              f"vllm@{url} --gpus none"
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd], check=True)
        time.sleep(1.0)
        out = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True,
                             text=True, check=True).stdout.split()
        shell = psutil.Process(int(out[0]))
        pid = next(c.pid for c in [shell, *shell.children(recursive=True)] if "console" in " ".join(c.cmdline()))
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    phases = (("idle", args.idle, ""), ("fault", args.fault, framing), ("after", args.after, ""))
    try:
        for name, seconds, fault in phases:
            source.fault = fault
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                samples.append((time.monotonic() - t0, _rss(pid)))
                time.sleep(0.5)
            if name == "idle":
                idle_end = time.monotonic() - t0
            elif name == "fault":
                fault_end = time.monotonic() - t0
    finally:
        source.fault = ""
        if kind == "status":
            os.killpg(pid, signal.SIGTERM)
            proc.wait(timeout=10)
        else:
            subprocess.run(["tmux", "kill-session", "-t", session], check=False)
        shutil.rmtree(state, ignore_errors=True)
    idle = [v for t, v in samples if idle_end - 5 <= t <= idle_end]
    peak = max(v for t, v in samples if idle_end < t <= fault_end)
    last = samples[-1][1]
    idle_rss = sum(idle) / len(idle)
    return {"idle": idle_rss, "peak": peak, "after": last, "delta": last - idle_rss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=15)
    ap.add_argument("--fault", type=float, default=30)
    ap.add_argument("--after", type=float, default=15)
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--framing", choices=("length", "chunked", "both"), default="both")
    ap.add_argument("--only", choices=("status", "console"))
    args = ap.parse_args()
    source = Source(args.mb)
    url = f"http://127.0.0.1:{serve(source)}"
    framings = ("length", "chunked") if args.framing == "both" else (args.framing,)
    kinds = (args.only,) if args.only else ("status", "console")
    print(f"{args.mb} MB bodies for {args.fault:g} s; RSS in MB (idle = last 5 s before the fault, after = "
          f"{args.after:g} s after it ended)")
    print(f"{'client':<8} {'framing':<8} {'idle':>7} {'peak':>7} {'after':>7} {'after-idle':>11}")
    for kind in kinds:
        for framing in framings:
            r = run_once(kind, url, source, framing, args)
            print(f"{kind:<8} {framing:<8} {r['idle']:7.1f} {r['peak']:7.1f} {r['after']:7.1f} {r['delta']:+11.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
