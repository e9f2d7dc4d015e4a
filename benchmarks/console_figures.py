"""Issue 12's console figures, each beside its target, from one run (2 shared cores: compare in one run).

    .venv/bin/python benchmarks/console_figures.py [--seconds 60] [--size 200x50] [--engines 4] [--rounds 3]
        [--compare DIR ...] [--py-spy DIR]

1. CPU of `enginedeck attach` on the engines of `enginedeck sim --fleet` (--engines: the first N of its
   4 flavours, only those started) at a 1 s refresh, divided by the CPU of the floor: the minimal
   dashboard of `floor_dashboard.py` (header, footer, four labels, three Sparklines, prometheus_client
   parsing one engine's /metrics once a second), and beside it a bare Textual app that polls the same
   /metrics and updates one label. All run at the same time, each in its own tmux pane, over the same
   --seconds window, so a change in the machine's load hits all of them. Only each console's own
   process is counted (psutil on its PID). With --py-spy DIR, each console is also sampled by
   `py-spy record --gil --threads -f raw` over that window (DIR/<n>.txt; `pyspy_areas.py` reads them):
   the sampling costs the consoles CPU, so the figures of such a run are not the ones to quote.
2. The console's RSS at the end of that window (after --seconds + 5 s of running).
3. Launch -> first frame with data: the time from starting the command until `tmux capture-pane`
   shows a scraped percentage (KV cache, prefix hits) in a row of the overview's engines table;
   attach (to the fleet already running) and demo (boots its own fleet). Median of --rounds.
4. Quit -> shell back: the time from sending "q" until the console's process is gone; attach and demo.
5. `enginedeck --help`: wall time of the process, median of 10.
6. With --hour: the console's RSS holding a full hour of history for 4 engines and 8 GPUs. 30 s of the
   fleet (4 engines under load, 8 simulated GPUs) are recorded, their snapshots repeated along an hour
   at 1 s (benchmarks/recording.py's day, an hour long), and `enginedeck replay` opens it at its last
   second: the seek rebuilds the rings and the hour's 5 s summaries of every series, as the live console
   holds them after an hour. RSS after the engine detail's charts are drawn at the 1h window.
--compare DIR (repeatable) measures the console package in DIR too, in the same run (before/after a
change); the start prints which console package each variant imports.
Prints figures; asserts nothing. Needs tmux. Uses a private tmux server (-L).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from console_cpu import start_fleet, stop_group  # this folder: the same fleet start/stop

from console.sim.fleet_spec import FLEET_ENGINES

ROOT = Path(__file__).resolve().parent.parent
FLOOR = Path(__file__).resolve().parent / "floor_dashboard.py"
PY = sys.executable
BIN = str(Path(PY).parent / "enginedeck")
SOCKET = f"edfig{os.getpid()}"
# An engines-table row (it starts with the engine's name) showing scraped percentages (KV cache
# and prefix hits, side by side): data from /metrics, not a placeholder; GPU rows start with a digit.
DATA = re.compile(r"^ *[A-Za-z][^\n]*\d%\s+\d+%", re.MULTILINE)

BARE_POLLING_APP = """
import sys
import httpx
from textual.app import App, ComposeResult
from textual.widgets import Static

URL = sys.argv[1]

class Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield Static(id="value")

    async def on_mount(self) -> None:
        self.client = httpx.AsyncClient(timeout=2.0)
        self.set_interval(1.0, self.poll)

    async def poll(self) -> None:
        r = await self.client.get(URL)
        lines = sum(1 for line in r.text.splitlines() if line and not line.startswith("#"))
        self.query_one(Static).update(f"{URL}: {lines} series")

Bare().run()
"""


def tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=False)


class Pane:
    """A command in its own session of the private tmux server (a real pty of a fixed size)."""

    def __init__(self, name: str, cmd: str, size: tuple[int, int], env: dict[str, str]) -> None:
        self.name = name
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.launched = time.monotonic()
        tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]),
             f"cd {shlex.quote(str(ROOT))} && exec env {exports} {cmd}")
        out = tmux("list-panes", "-t", name, "-F", "#{pane_pid}")
        self.pid = int(out.stdout.split()[0])
        self.proc = psutil.Process(self.pid)

    def text(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.name).stdout

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.name, *keys)

    def alive(self) -> bool:
        try:
            return self.proc.is_running() and self.proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def first_data(self, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if DATA.search(self.text()):
                return time.monotonic() - self.launched
            time.sleep(0.01)
        return None

    def quit(self, timeout: float = 30.0) -> float | None:
        t0 = time.monotonic()
        self.keys("q")
        while time.monotonic() - t0 < timeout:
            if not self.alive():
                return time.monotonic() - t0
            time.sleep(0.005)
        return None

    def close(self) -> None:
        tmux("kill-session", "-t", self.name)


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def median(xs: list[float | None]) -> str:
    seen = [x for x in xs if x is not None]
    if not seen:
        return "not seen"
    more = f" (of {', '.join(f'{x:.2f}' for x in seen)})" if len(seen) > 1 else ""
    missed = f"; {len(xs) - len(seen)} not seen" if len(seen) < len(xs) else ""
    return f"{statistics.median(seen):.2f} s{more}{missed}"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def console_package(env: dict[str, str]) -> str:
    """Where a variant's console package is imported from (PYTHONPATH must win over this tree's)."""
    out = subprocess.run([PY, "-c", "import console; print(console.__file__)"], capture_output=True, text=True,
                         check=True, env={**os.environ, **env}, cwd="/")
    return str(Path(out.stdout.strip()).parent)


def help_ms(env: dict[str, str]) -> float:
    walls = []
    for _ in range(10):
        t0 = time.perf_counter()
        subprocess.run([BIN, "--help"], capture_output=True, check=True, env={**os.environ, **env})
        walls.append(time.perf_counter() - t0)
    return 1000 * statistics.median(walls)


def hour_recording(tmp: Path) -> tuple[Path, float]:
    """An hour of the fleet's snapshots at 1 s (see part 6); the folder and its last recorded time."""
    from recording import _day, record  # this folder

    from console.recording import Recording

    src = tmp / "rec30"
    record(argparse.Namespace(seconds=30.0), src)
    hour = tmp / "hour"
    _day(src, hour, 3600)
    span = Recording.open(hour).span
    assert span is not None
    return hour, span[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--size", default="200x50")
    ap.add_argument("--engines", type=int, default=len(FLEET_ENGINES), choices=range(1, len(FLEET_ENGINES) + 1),
                    help=f"the console attaches to the first N of {', '.join(FLEET_ENGINES)} (only those run)")
    ap.add_argument("--py-spy", metavar="DIR", default="",
                    help="also record each console with py-spy (raw, --gil, --threads) over the CPU window")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma list of parts to skip: cpu,start,demo,help")
    ap.add_argument("--hour", action="store_true", help="also the RSS with a full hour of history (part 6)")
    ap.add_argument("--compare", metavar="DIR", action="append", default=[],
                    help="also measure the console package in DIR (e.g. `git archive REV console | tar -x -C DIR`), "
                         "in the same run: the consoles side by side for CPU, alternating rounds for the timings; "
                         "repeatable")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if shutil.which("tmux") is None:
        print("needs tmux", file=sys.stderr)
        return 2
    w, h = (int(x) for x in args.size.split("x"))
    tmp = Path(tempfile.mkdtemp(prefix="enginedeck-fig-"))
    env = {"ENGINEDECK_CONFIG_DIR": str(tmp / "cfg"), "TERM": "xterm-256color"}
    variants: list[tuple[str, dict[str, str]]] = [("this tree", env)]
    for other in args.compare:
        variants.append((other, {**env, "PYTHONPATH": str(Path(other).resolve())}))
    flavours = FLEET_ENGINES[: args.engines]
    print(f"machine: {psutil.cpu_count()} CPUs, load average {loadavg()}; window {w}x{h}; "
          f"engines {','.join(flavours)}")
    for label, venv in variants:
        print(f"[{label}] console package: {console_package(venv)}")
    results: list[str] = []
    fleet, eps = start_fleet(flavours)
    try:
        refs = " ".join(shlex.quote(f"{e['profile']}@{e['url']}") for e in eps)
        attach = f"{BIN} attach {refs} --gpus simulated --refresh 1"
        if "start" not in skip:
            firsts: dict[str, list[float | None]] = {v: [] for v, _ in variants}
            quits: dict[str, list[float | None]] = {v: [] for v, _ in variants}
            for i in range(args.rounds):
                for n, (label, venv) in enumerate(variants):
                    pane = Pane(f"attach{i}-{n}", attach, (w, h), venv)
                    try:
                        firsts[label].append(pane.first_data(30))
                        time.sleep(1)
                        quits[label].append(pane.quit())
                    finally:
                        pane.close()
            for label, _ in variants:
                results.append(f"[{label}] launch -> first frame with data, attach: {median(firsts[label])}  "
                               "(target <= 0.8 s)")
                results.append(f"[{label}] quit -> shell back, attach: {median(quits[label])}  (target <= 0.5 s)")
        if "cpu" not in skip:
            bare_path = tmp / "bare_polling_app.py"
            bare_path.write_text(BARE_POLLING_APP)
            url = f"{eps[0]['url']}/metrics"
            n_eng = f"x{len(eps)}"
            consoles = [(label, Pane(f"console{n}", attach, (w, h), venv)) for n, (label, venv) in enumerate(variants)]
            floor = Pane("floor", f"{PY} {FLOOR} {shlex.quote(url)}", (w, h), env)
            bare = Pane("bare", f"{PY} {bare_path} {shlex.quote(url)}", (w, h), env)
            spies: list[subprocess.Popen[bytes]] = []
            try:
                for _, pane in consoles:  # started (a loaded machine takes seconds to import it all)
                    pane.first_data(60)
                time.sleep(5)  # settle: first layouts, history starts
                if args.py_spy:
                    Path(args.py_spy).mkdir(parents=True, exist_ok=True)
                    for n, (label, pane) in enumerate(consoles):
                        out = Path(args.py_spy) / f"{n}.txt"
                        print(f"[{label}] py-spy -> {out}")
                        spies.append(subprocess.Popen(
                            ["py-spy", "record", "--gil", "--threads", "-r", "100", "-d", str(round(args.seconds)),
                             "-f", "raw", "-o", str(out), "--pid", str(pane.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                load0 = loadavg()
                c0 = [cpu_seconds(p.proc) for _, p in consoles]
                f0, b0, t0 = cpu_seconds(floor.proc), cpu_seconds(bare.proc), time.monotonic()
                time.sleep(args.seconds)
                c1 = [cpu_seconds(p.proc) for _, p in consoles]
                f1, b1, t1 = cpu_seconds(floor.proc), cpu_seconds(bare.proc), time.monotonic()
                for spy in spies:
                    spy.wait(timeout=60)
                floor_pct = 100 * (f1 - f0) / (t1 - t0)
                bare_pct = 100 * (b1 - b0) / (t1 - t0)
                floor_rss = floor.proc.memory_info().rss / 1e6
                bare_rss = bare.proc.memory_info().rss / 1e6
                notes = ("" if "tok/s" in floor.text() else " (the floor dashboard never showed data!)") + (
                    "" if "series" in bare.text() else " (the bare app's label never showed data!)")
                results.append(f"CPU window {t1 - t0:.0f} s, {w}x{h}, load average {load0} -> {loadavg()}; "
                               f"floor dashboard {floor_pct:.2f}% of a core, bare one-label app {bare_pct:.2f}%"
                               f"{notes}")
                first = 100 * (c1[0] - c0[0]) / (t1 - t0)
                for (label, pane), a, b in zip(consoles, c0, c1, strict=True):
                    pct = 100 * (b - a) / (t1 - t0)
                    rss = pane.proc.memory_info().rss / 1e6
                    vs = f"; this tree / it {first / pct:.2f}" if label != consoles[0][0] else ""
                    results.append(f"[{label}] console CPU, attach {n_eng} at 1 s: {pct:.2f}% of a core; "
                                   f"/ floor dashboard {pct / floor_pct:.2f} (target <= 1.0); "
                                   f"/ bare app {pct / bare_pct:.2f}{vs}")
                    results.append(f"[{label}] console RSS after {args.seconds + 5:.0f} s (attach {n_eng}): "
                                   f"{rss:.1f} MB; floor dashboard {floor_rss:.1f} MB, bare app {bare_rss:.1f} MB  "
                                   "(target <= 60 MB)")
            finally:
                for spy in spies:
                    if spy.poll() is None:
                        spy.kill()
                for _, pane in consoles:
                    pane.close()
                floor.close()
                bare.close()
    finally:
        stop_group(fleet)
    if "demo" not in skip:
        dfirsts: dict[str, list[float | None]] = {v: [] for v, _ in variants}
        dquits: dict[str, list[float | None]] = {v: [] for v, _ in variants}
        for i in range(args.rounds):
            for n, (label, venv) in enumerate(variants):
                pane = Pane(f"demo{i}-{n}", f"{BIN} demo --refresh 1", (w, h), venv)
                try:
                    dfirsts[label].append(pane.first_data(90))
                    time.sleep(1)
                    dquits[label].append(pane.quit())
                finally:
                    pane.close()
        for label, _ in variants:
            results.append(f"[{label}] launch -> first frame with data, demo: {median(dfirsts[label])}  "
                           "(target <= 2.0 s)")
            results.append(f"[{label}] quit -> shell back, demo: {median(dquits[label])}  (target <= 2.0 s)")
    if args.hour:
        hour, end = hour_recording(tmp)
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(end))
        for n, (label, venv) in enumerate(variants):
            replay = f"{BIN} replay {shlex.quote(str(hour))} -t {shlex.quote(at)} --paused"
            pane = Pane(f"hour{n}", replay, (w, h), venv)
            try:
                seen = pane.first_data(60)
                time.sleep(5)  # the seek's whole history follows its snapshot
                pane.keys("Enter")  # the engine detail: its charts at 5m, then the 1h window
                time.sleep(2)
                pane.keys("w", "w")
                time.sleep(5)
                hour_ok = "· 1h" in pane.text()
                rss = pane.proc.memory_info().rss / 1e6
                note = "" if seen is not None and hour_ok else " (the replay's data or its 1h charts never showed!)"
                results.append(f"[{label}] console RSS with a full hour of history (replay of 1 h, 4 engines, 8 GPUs, "
                               f"engine detail at 1h): {rss:.1f} MB{note}  (target <= 60 MB)")
            finally:
                pane.close()
    if "help" not in skip:
        for label, venv in variants:
            results.append(f"[{label}] enginedeck --help: {help_ms(venv):.0f} ms (median of 10)  (target <= 150 ms)")
    tmux("kill-server")
    shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(results))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
