"""Console CPU, memory and time to first data, measured on the real app in a real pty (tmux).

    .venv/bin/python benchmarks/console_cpu.py [--seconds 60] [--size 160x48]

(a) CPU of the console process only (psutil on its PID; the simulated fleet is a separate process
    group and is not counted) over --seconds at a 1 s refresh, running `enginedeck demo`
    (4 simulated engines, 8 simulated GPUs);
(b) the same measurement for a bare Textual app that updates one label once a second (baseline);
(c) the console's RSS at the end of (a);
(e) the telemetry Hub alone, headless, on the same fleet, to split (a) into collection and UI;
(d) time from launch to the first frame showing engine data: once with `enginedeck attach` to an
    already running simulated fleet (the console's own start-up), once for `enginedeck demo`
    (which also boots the fleet). The app writes the time of that frame to
    $ENGINEDECK_FIRST_FRAME_FILE.
Prints figures; asserts nothing. Needs tmux.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

BARE_APP = """
import time
from textual.app import App, ComposeResult
from textual.widgets import Static

class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield Static(id="clock")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.tick)

    def tick(self) -> None:
        self.query_one(Static).update(time.strftime("%H:%M:%S"))

Bare().run()
"""


HUB_ONLY = """
import json, sys, time
import psutil
from console.config import parse_engine_ref
from console.telemetry.hub import Hub
eps = json.loads(sys.argv[1])
seconds = float(sys.argv[2])
insts = [parse_engine_ref(f"{e['profile']}@{e['url']}") for e in eps]
hub = Hub(insts, refresh=1.0, gpu_source="simulated",
          gpu_assignment={i.name: (2 * k, 2 * k + 1) for k, i in enumerate(insts)})
hub.start()
time.sleep(5)
me = psutil.Process()
t0, w0 = me.cpu_times(), time.monotonic()
time.sleep(seconds)
t1 = me.cpu_times()
print(100.0 * ((t1.user - t0.user) + (t1.system - t0.system)) / (time.monotonic() - w0))
hub.stop()
"""


class Pane:
    """A command running in its own tmux session (a real pty of a fixed size)."""

    def __init__(self, name: str, cmd: str, size: tuple[int, int], env: dict[str, str]) -> None:
        self.name = name
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]),
                        f"cd {shlex.quote(str(ROOT))} && exec env {exports} {cmd}"], check=True)
        self.launched = time.time()
        out = subprocess.run(["tmux", "list-panes", "-t", name, "-F", "#{pane_pid}"], capture_output=True,
                             text=True, check=True)
        self.pid = int(out.stdout.split()[0])
        self.proc = psutil.Process(self.pid)

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=False)

    def alive(self) -> bool:
        return self.proc.is_running() and self.proc.status() != psutil.STATUS_ZOMBIE

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def cpu_percent(proc: psutil.Process, seconds: float) -> float:
    t0 = proc.cpu_times()
    w0 = time.monotonic()
    time.sleep(seconds)
    t1 = proc.cpu_times()
    used = (t1.user - t0.user) + (t1.system - t0.system)
    return 100.0 * used / (time.monotonic() - w0)


def wait_file(path: Path, timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return float(path.read_text().strip())
        time.sleep(0.02)
    return None


def descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def survivors(procs: list[psutil.Process]) -> list[int]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def start_fleet(flavours: Sequence[str] = ()) -> tuple[subprocess.Popen[str], list[dict[str, object]]]:
    """``enginedeck sim --fleet`` (``flavours``: only these engines) and its endpoints, one per engine."""
    more = ["--engines", ",".join(flavours)] if flavours else []
    proc = subprocess.Popen([PY, "-m", "console", "sim", "--fleet", "--print-json", *more], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    eps: list[dict[str, object]] = []
    assert proc.stdout is not None
    while len(eps) < (len(flavours) or 4):
        line = proc.stdout.readline()
        if not line:
            break
        eps.append(json.loads(line))
    return proc, eps


def stop_group(proc: subprocess.Popen[str]) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--size", default="160x48")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        print("needs tmux", file=sys.stderr)
        return 2
    w, h = (int(x) for x in args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="enginedeck-bench-"))
    base_env = {"ENGINEDECK_CONFIG_DIR": str(tmp / "cfg"), "TERM": "xterm-256color"}
    print(f"machine: {psutil.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; window {w}x{h}; "
          f"measuring {args.seconds:.0f} s each")

    # (d1) start-up of the console itself: attach to a fleet that is already running.
    fleet, eps = start_fleet()
    try:
        # (e) the telemetry hub alone (no UI) on the same fleet: how the console's CPU splits.
        out = subprocess.run([PY, "-c", HUB_ONLY, json.dumps(eps), str(args.seconds)], cwd=ROOT,
                             capture_output=True, text=True, check=True)
        hub_cpu = float(out.stdout.strip().splitlines()[-1])
        marker = tmp / "attach.first"
        refs = " ".join(shlex.quote(f"{e['profile']}@{e['url']}") for e in eps)
        pane = Pane("bench-attach", f"{PY} -m console attach {refs} --gpus simulated --refresh 1",
                    (w, h), {**base_env, "ENGINEDECK_FIRST_FRAME_FILE": str(marker)})
        first = wait_file(marker, 30)
        attach_first = None if first is None else first - pane.proc.create_time()
        pane.keys("q")
        time.sleep(2)
        pane.close()
    finally:
        stop_group(fleet)

    # (a) + (c) + (d2): the demo.
    marker = tmp / "demo.first"
    pane = Pane("bench-demo", f"{PY} -m console demo --refresh 1", (w, h),
                {**base_env, "ENGINEDECK_FIRST_FRAME_FILE": str(marker)})
    try:
        first = wait_file(marker, 90)
        demo_first = None if first is None else first - pane.proc.create_time()
        time.sleep(5)  # settle: history fills, first layouts done
        started = descendants(pane.proc)
        demo_cpu = cpu_percent(pane.proc, args.seconds)
        rss = pane.proc.memory_info().rss
        uss = pane.proc.memory_full_info().uss
        threads = pane.proc.num_threads()
        pane.keys("q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and pane.alive():
            time.sleep(0.1)
        time.sleep(1)
        left = survivors([pane.proc, *started])
    finally:
        pane.close()

    # (b) the bare Textual baseline.
    bare_path = tmp / "bare_app.py"
    bare_path.write_text(BARE_APP)
    pane = Pane("bench-bare", f"{PY} {bare_path}", (w, h), base_env)
    try:
        time.sleep(5)
        bare_cpu = cpu_percent(pane.proc, args.seconds)
        bare_rss = pane.proc.memory_info().rss
    finally:
        pane.close()

    def secs(v: float | None) -> str:
        return "not seen" if v is None else f"{v:.2f} s"

    print(f"(a) console CPU, demo fleet (4 engines, 8 sim GPUs), 1 s refresh: {demo_cpu:.2f}% of one core")
    print(f"(b) bare Textual app, 1 s interval:                          {bare_cpu:.2f}% of one core")
    print(f"(e) of (a), the telemetry hub alone (headless, same fleet):   {hub_cpu:.2f}% of one core "
          f"-> UI about {demo_cpu - hub_cpu:.2f}%")
    print(f"(c) console RSS {rss / 2**20:.1f} MiB (USS {uss / 2**20:.1f} MiB, {threads} threads); "
          f"bare app RSS {bare_rss / 2**20:.1f} MiB")
    print(f"(d) launch -> first frame with engine data: attach {secs(attach_first)}; "
          f"demo incl. booting the fleet {secs(demo_first)}")
    print(f"processes left after quitting the demo: {len(left)} {left if left else ''}".rstrip())
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
