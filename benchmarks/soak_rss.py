"""Soak: the console's memory over a long run at a 1 s refresh with 8 simulated engines.

    .venv/bin/python benchmarks/soak_rss.py [--minutes 60] [--every 10] [--warmup 60] [--size 160x48]

Runs `enginedeck attach` on 8 simulated engines (two of each flavour, synthetic load in another
process) in a real pty (tmux), visits the engine detail and GPU screens once a minute (first at 10 s), and samples
the console process's RSS every --every seconds. Prints the RSS after the warm-up (history rings,
caches and first layouts are allocated by then), at the end, the growth between them and the
least-squares slope over the samples after the warm-up, in MB per hour. Asserts nothing. Needs tmux.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from console_cpu import PY, Pane

from console.sim.fleet import start_fleet
from console.sim.fleet_spec import FLEET_ENGINES

MB = 1e6


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, bytes) points, in MB per hour."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return 0.0 if den == 0 else sum((t - mt) * (v - mv) for t, v in points) / den * 3600 / MB


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between RSS samples")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds before the first counted sample")
    ap.add_argument("--size", default="160x48")
    a = ap.parse_args()
    if shutil.which("tmux") is None:
        print("needs tmux", file=sys.stderr)
        return 2
    w, h = (int(x) for x in a.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="enginedeck-soak-"))
    fleet = start_fleet(list(FLEET_ENGINES) * 2, load=False, seed=1)
    loader = subprocess.Popen([PY, "-m", "console", "sim", "--seed", "1",
                               *(x for p, u, _ in fleet.endpoints for x in ("--load", f"{p}@{u}"))],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # fmt: skip
    refs = " ".join(shlex.quote(f"{p}@{u}") for p, u, _ in fleet.endpoints)
    pane = Pane(f"soak-{os.getpid()}", f"{PY} -m console attach {refs} --gpus simulated --refresh 1", (w, h),
                {"ENGINEDECK_CONFIG_DIR": str(tmp / "cfg"), "ENGINEDECK_STATE_DIR": str(tmp / "state"),
                 "TERM": "xterm-256color"})  # fmt: skip
    # Keep the pane after an exit, to show why.
    subprocess.run(["tmux", "set-option", "-t", pane.name, "remain-on-exit", "on"], check=False)
    print(f"machine: {psutil.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; 8 engines "
          f"({', '.join(FLEET_ENGINES)} x 2) under load; attach at 1 s; {a.minutes:g} min, RSS every {a.every:g} s",
          flush=True)
    points: list[tuple[float, float]] = []
    try:
        start = time.monotonic()
        end = start + a.minutes * 60
        next_visit = start + 10  # the first visit falls in the warm-up
        while time.monotonic() < end:
            time.sleep(a.every)
            if not pane.alive():
                shown = subprocess.run(["tmux", "capture-pane", "-p", "-t", pane.name], capture_output=True,
                                       text=True, check=False).stdout.strip()
                print(f"the console exited after {(time.monotonic() - start) / 60:.1f} min:\n{shown[-1500:]}",
                      file=sys.stderr)
                return 1
            now = time.monotonic()
            if now >= next_visit:  # engine detail, back, GPUs, overview: screens come and go
                for key in ("Enter", "Escape", "g", "o"):
                    pane.keys(key)
                    time.sleep(1.0)
                next_visit = now + 60
            rss = pane.proc.memory_info().rss
            if now - start >= a.warmup:
                points.append((now - start, float(rss)))
                if len(points) % max(1, int(300 / a.every)) == 1:
                    print(f"  {(now - start) / 60:5.1f} min: RSS {rss / MB:.1f} MB", flush=True)
        pane.keys("q")
        time.sleep(1.5)
    finally:
        pane.close()
        os.killpg(loader.pid, signal.SIGTERM)
        loader.wait(10)
        fleet.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if len(points) < 2:
        print("too short: no samples after the warm-up")
        return 1
    first, last = points[0][1], points[-1][1]
    span = (points[-1][0] - points[0][0]) / 60
    peak = max(v for _, v in points)
    print(f"RSS after warm-up {first / MB:.1f} MB, at the end {last / MB:.1f} MB, peak {peak / MB:.1f} MB: "
          f"growth {(last - first) / MB:+.2f} MB over {span:.1f} min; slope {slope_per_hour(points):+.2f} MB/h "
          f"({len(points)} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
