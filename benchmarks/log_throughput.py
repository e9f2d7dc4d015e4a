"""Log ingestion throughput of the lifecycle LogBuffer, and how often it wakes a UI.

Prints measured figures (nothing is hard-coded):

1. in-memory: engine-like lines fed as 64 KiB chunks (what the pipe/docker readers do), as fast
   as possible: lines/s, and notifications/s with one listener;
2. paced: 10,000 lines/s for a few seconds (a chatty engine): notification rate (target <= ~10/s)
   and the time the appending thread spends per second of log;
3. a real process: a child printing lines as fast as it can, read through the process backend's
   pipe reader (``ProcessHandle.follow_logs``): lines/s end to end.

    .venv/bin/python benchmarks/log_throughput.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

from console.lifecycle.logs import LogBuffer, LogUpdate

LINE = (
    "INFO 11-29 15:54:13 [loader.py:{i}] Loading safetensors checkpoint shards: {p}% Completed | "
    "{i}/4000 [00:{s:02d}<00:30, 131.2it/s] worker_id=3 rank=0"
)


class Counter:
    def __init__(self) -> None:
        self.n = 0
        self.times: list[float] = []

    def __call__(self, u: LogUpdate) -> None:
        self.n += 1
        self.times.append(time.monotonic())

    def max_rate_1s(self) -> int:
        best, j = 0, 0
        for i, t in enumerate(self.times):
            while self.times[j] < t - 1.0:
                j += 1
            best = max(best, i - j + 1)
        return best


def in_memory(seconds: float) -> None:
    buf = LogBuffer(10_000)
    c = Counter()
    buf.subscribe(c)
    lines = "\n".join(LINE.format(i=i, p=i % 100, s=i % 60) for i in range(2000)) + "\n"
    chunks = [lines[k : k + 65536] for k in range(0, len(lines), 65536)]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for ch in chunks:
            buf.feed(ch)
    elapsed = time.perf_counter() - t0
    buf.flush()
    print(f"in-memory feed:   {buf.end / elapsed:12,.0f} lines/s  ({buf.end:,} lines in {elapsed:.2f} s)")
    print(f"  notifications:  {c.n / elapsed:12.1f} /s   (max in any 1 s window: {c.max_rate_1s()})")


def paced(seconds: float, rate: int = 10_000) -> None:
    buf = LogBuffer(10_000)
    c = Counter()
    buf.subscribe(c)
    batch = rate // 100  # one append every 10 ms, as a reader would deliver a chunk
    busy = 0.0
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < seconds:
        s = time.perf_counter()
        buf.extend(LINE.format(i=n + k, p=k % 100, s=k % 60) for k in range(batch))
        busy += time.perf_counter() - s
        n += batch
        nxt = t0 + n / rate
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    elapsed = time.monotonic() - t0
    buf.flush()
    print(f"paced {rate:,} lines/s for {elapsed:.1f} s: {n / elapsed:,.0f} lines/s delivered")
    print(f"  notifications:  {c.n / elapsed:12.1f} /s   (max in any 1 s window: {c.max_rate_1s()})")
    print(f"  appending cost: {1000 * busy / elapsed:12.1f} ms of CPU per second of log ({100 * busy / elapsed:.1f}%)")


def real_process(seconds: float) -> None:
    from console.lifecycle.process_backend import ProcessHandle

    code = (
        "import sys, time\n"
        f"line = {LINE!r}\n"
        "t0 = time.monotonic(); i = 0; w = sys.stdout.write\n"
        f"while time.monotonic() - t0 < {seconds}:\n"
        "    w(''.join(line.format(i=i + k, p=k % 100, s=k % 60) + '\\n' for k in range(200))); i += 200\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    handle = ProcessHandle(proc, "bench")
    handle.log_file.close()
    handle.log_file.f = None  # no disk copy: measure the pipe and the buffer only
    buf = LogBuffer(10_000)
    c = Counter()
    buf.subscribe(c)
    t0 = time.perf_counter()
    handle.follow_logs(buf, lambda: None, threading.Event())
    elapsed = time.perf_counter() - t0
    proc.wait()
    print(f"real pipe:        {buf.end / elapsed:12,.0f} lines/s  ({buf.end:,} lines in {elapsed:.2f} s)")
    print(f"  notifications:  {c.n / elapsed:12.1f} /s   (max in any 1 s window: {c.max_rate_1s()})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    in_memory(a.seconds)
    paced(a.seconds)
    real_process(a.seconds)


if __name__ == "__main__":
    main()
