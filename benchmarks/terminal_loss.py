"""Terminal loss: does the console always end, and leave nothing behind, when its terminal goes away?

Starts the console at 200x50 in a private tmux server (``tmux -L``; never the user's) and takes its
terminal away, the methods mixed in a seeded order:

  kill-session   tmux kill-session (tmux closes the pane's pty: SIGHUP, then EOF/EIO on the tty)
  kill-server    tmux kill-server (the whole terminal emulator goes)
  sighup         SIGHUP to the console only (the terminal stays)
  sigterm        SIGTERM to the console only
  stall          the terminal stops reading the console's output for --stall seconds (like an SSH
                 link that stalls), then tmux kill-session. The console runs on a pty of its own
                 behind a relay in the pane, as behind sshd; the relay stops reading that pty, and
                 makes the console redraw (window size changes) so its output really backs up.

Two kinds of console: ``attach`` on a live simulated fleet (``enginedeck sim --fleet``, started once;
monitor-only engines, which no policy ever touches: the fleet must survive every trial) and ``demo``
(which starts its own simulators: its terminal-loss policy is "stop", so every simulator must be
gone when the console has exited).

Per trial: the time from the event until the console process has ended (2 s is the acceptance
limit), every process that descended from the console and is still alive once it ended (snapshot of
the process tree taken just before the event, plus a sweep for a per-trial marker in the
environment), and the audit entry of the demo's terminal-loss stop. A console still alive
--hang-after seconds after the event is reported as hung and SIGKILLed. Everything started here is
ended by PID (process groups it started itself, and each private tmux server by its socket name).

    python benchmarks/terminal_loss.py                      # 100 attach + 20 demo trials
    python benchmarks/terminal_loss.py --attach 10 --demo 0 --stall 3
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import random
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
METHODS = ("kill-session", "kill-server", "sighup", "sigterm", "stall")
COLS, ROWS = 200, 50
MARK = "ENGINEDECK_TL_MARK"


# --------------------------------------------------------------------------- the stall relay
def relay_main(argv: list[str]) -> int:
    """In the tmux pane: run ``argv`` on a pty of its own and copy its output to the pane.

    SIGUSR1: stop reading that pty (the stall) and resize it twice so the console redraws
    everything into a pty nobody reads. SIGHUP (the pane going away) ends the relay by default
    action, which closes the pty's master side: the console's terminal is gone, unread."""
    stalled = False

    def on_usr1(signum: int, frame: object) -> None:
        nonlocal stalled
        stalled = True

    signal.signal(signal.SIGUSR1, on_usr1)
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _set_size(master, ROWS, COLS)
    os.kill(pid, signal.SIGWINCH)
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    redraws = 0
    while True:
        if stalled:
            if redraws < 4:  # a full repaint each time: more than a pty buffer holds
                _set_size(master, ROWS, COLS - 1 + redraws % 2)
                redraws += 1
            with contextlib.suppress(InterruptedError):
                select.select([stdin], [], [], 0.5)  # read nothing from the console any more
            continue
        try:
            ready, _, _ = select.select([master, stdin], [], [], 0.5)
        except InterruptedError:
            continue
        try:
            if master in ready:
                data = os.read(master, 65536)
                if not data:
                    break
                os.write(stdout, data)
            if stdin in ready:
                data = os.read(stdin, 4096)
                if not data:
                    break
                os.write(master, data)
        except OSError:
            break
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    return 0


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


# --------------------------------------------------------------------------- one trial
@dataclass
class Trial:
    kind: str
    method: str
    index: int
    start_s: float = 0.0  # command to a ready screen
    exit_s: float | None = None  # event to process end (None: did not end within --hang-after)
    event_at: float = 0.0  # time.monotonic() of the event
    leftovers: list[str] = field(default_factory=list)
    policy_ok: bool = True
    policy_note: str = ""
    audit: str = ""
    stall_backed_up: bool | None = None  # stall only: was the console's output backed up (pty full)?
    error: str = ""


class Tmux:
    """One private tmux server (its own socket name); never touches another server."""

    def __init__(self, name: str, conf: Path) -> None:
        self.name = name
        self.conf = conf

    def cmd(self, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.name, "-f", str(self.conf), *args], capture_output=True,
                              text=True, timeout=10, check=check)

    def kill_server(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.cmd("kill-server")


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _describe(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline())[:100]}"
    except psutil.Error:
        return str(p.pid)


def _marked(mark: str) -> list[psutil.Process]:
    """Processes of ours whose environment carries this trial's marker (orphans included)."""
    out = []
    me = os.getuid()
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] is None or p.info["uids"].real != me or p.pid == os.getpid():
                continue
            if p.environ().get(MARK) == mark and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _output_backed_up(console: psutil.Process) -> bool:
    """Whether the console's terminal (its stderr, where Textual writes) takes no more output now:
    nobody reads it and the pty buffer is full, so the console's writes wait."""
    fd = os.open(os.readlink(f"/proc/{console.pid}/fd/2"), os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK)
    try:
        p = select.poll()
        p.register(fd, select.POLLOUT)
        return not p.poll(0)
    finally:
        os.close(fd)


def _audit_lines(state: Path) -> list[dict[str, str]]:
    try:
        text = (state / "audit.log").read_text()
    except OSError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_trial(t: Trial, console_argv: list[str], run_id: str, workdir: Path, args: argparse.Namespace,
              ready_marker: str) -> Trial:
    tmux = Tmux(f"enginedeck-tl-{run_id}-{t.index}", workdir / "tmux.conf")
    mark = f"{run_id}-{t.index}"
    state = workdir / f"state-{t.index}"
    state.mkdir()
    env_prefix = ["env", f"{MARK}={mark}", f"ENGINEDECK_STATE_DIR={state}",
                  f"ENGINEDECK_CONFIG_DIR={workdir / 'config'}"]
    argv = [*env_prefix, *console_argv]
    if t.method == "stall":
        argv = [*env_prefix, sys.executable, str(Path(__file__).resolve()), "relay", "--", *console_argv]
    command = "exec " + " ".join(_quote(a) for a in argv)
    console: psutil.Process | None = None
    tree: list[psutil.Process] = []
    try:
        started = time.monotonic()
        tmux.cmd("new-session", "-d", "-s", "c", "-c", str(REPO), "-x", str(COLS), "-y", str(ROWS), command,
                 check=True)
        pane_pid = int(tmux.cmd("display-message", "-p", "-t", "c", "#{pane_pid}", check=True).stdout)
        pane = psutil.Process(pane_pid)
        deadline = started + args.start_timeout
        while time.monotonic() < deadline:
            text = tmux.cmd("capture-pane", "-p", "-t", "c").stdout
            if ready_marker in text:
                break
            time.sleep(0.25)
        else:
            last = [ln.strip() for ln in text.splitlines() if ln.strip()][-4:]
            dead = tmux.cmd("display-message", "-p", "-t", "c", "#{pane_dead} #{pane_dead_status}").stdout.split()
            how = f"ended with status {dead[1]}" if dead[:1] == ["1"] and len(dead) > 1 else "still running"
            t.error = f"not ready within {args.start_timeout:g} s ({how}); screen ends: {' | '.join(last)[:400]}"
            return t
        t.start_s = time.monotonic() - started
        time.sleep(1.0)  # a steady state: live data on screen, collectors running
        console = pane
        if t.method == "stall":
            kids = pane.children()
            if len(kids) != 1:
                t.error = f"relay has {len(kids)} children"
                return t
            console = kids[0]
        tree = console.children(recursive=True)
        if t.method == "stall":
            os.kill(pane.pid, signal.SIGUSR1)
            time.sleep(args.stall)
            t.stall_backed_up = _output_backed_up(console)
            if not _alive(console):
                t.error = "console ended during the stall"
                return t
        event = t.event_at = time.monotonic()
        if t.method in ("kill-session", "stall"):
            tmux.cmd("kill-session", "-t", "c")
        elif t.method == "kill-server":
            tmux.kill_server()
        elif t.method == "sighup":
            os.kill(console.pid, signal.SIGHUP)
        elif t.method == "sigterm":
            os.kill(console.pid, signal.SIGTERM)
        while _alive(console) and time.monotonic() - event < args.hang_after:
            time.sleep(0.005)
        if _alive(console):
            t.error = f"hung: still alive {args.hang_after:g} s after the event"
        else:
            t.exit_s = time.monotonic() - event
        # Anything that outlived the console: its process tree, and whatever carries the marker.
        time.sleep(0.3)
        left = {p.pid: p for p in tree if _alive(p)}
        left.update({p.pid: p for p in _marked(mark) if p.pid not in (pane.pid,)})
        t.leftovers = [_describe(p) for p in left.values()]
        if t.kind == "demo":
            stopped = [e for e in _audit_lines(state) if e.get("action") == "terminal-loss"]
            t.audit = stopped[-1].get("detail", "") if stopped else ""
            t.policy_ok = not left and bool(stopped) and stopped[-1].get("result") == "ok"
            t.policy_note = "simulators stopped" if t.policy_ok else "simulators not stopped / no audit entry"
        return t
    except (OSError, subprocess.SubprocessError, psutil.Error, ValueError) as exc:
        t.error = t.error or f"{type(exc).__name__}: {exc}"
        return t
    finally:
        if t.error:
            t.policy_ok = False
        # Leave nothing: the console and its tree by PID, then this trial's own tmux server.
        for p in ([console] if console is not None else []) + tree + _marked(mark):
            if _alive(p):
                with contextlib.suppress(psutil.Error):
                    p.kill()
        tmux.kill_server()


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


# --------------------------------------------------------------------------- the attach fleet
class Fleet:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "console", "sim", "--fleet"], cwd=REPO, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
        self.refs: list[str] = []
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        while len(self.refs) < 4 and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if "@http" in line:
                self.refs.append(line.strip())
        if len(self.refs) < 4:
            self.stop()
            raise SystemExit(f"sim --fleet printed {self.refs}")
        self.members = [self.root(), *self.root().children(recursive=True)]

    def root(self) -> psutil.Process:
        return psutil.Process(self.proc.pid)

    def all_alive(self) -> bool:
        return all(_alive(p) for p in self.members)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


# --------------------------------------------------------------------------- report
def report(trials: list[Trial], limit: float) -> bool:
    ok_all = True
    for kind in ("attach", "demo"):
        rows = [t for t in trials if t.kind == kind]
        if not rows:
            continue
        print(f"\n{kind}: {len(rows)} trials")
        within_head = f"ended<={limit:g}s"
        print(f"  {'method':<13} {'n':>3} {within_head:>10} {'max s':>7} {'median s':>9} "
              f"{'leftover procs':>15} {'policy ok':>10} {'errors':>7}")
        for m in METHODS:
            r = [t for t in rows if t.method == m]
            if not r:
                continue
            times = [t.exit_s for t in r if t.exit_s is not None]
            within = sum(1 for t in r if t.exit_s is not None and t.exit_s <= limit and not t.error)
            left = sum(len(t.leftovers) for t in r)
            pol = sum(1 for t in r if t.policy_ok)
            errs = sum(1 for t in r if t.error)
            mx = f"{max(times):.2f}" if times else "-"
            med = f"{statistics.median(times):.2f}" if times else "-"
            print(f"  {m:<13} {len(r):>3} {within:>10} {mx:>7} {med:>9} {left:>15} {pol:>10} {errs:>7}")
            ok_all &= within == len(r) and left == 0 and pol == len(r)
        times = [t.exit_s for t in rows if t.exit_s is not None]
        within = sum(1 for t in rows if t.exit_s is not None and t.exit_s <= limit and not t.error)
        print(f"  {'all':<13} {len(rows):>3} {within:>10} {max(times, default=0):>7.2f}"
              f" {statistics.median(times) if times else 0:>9.2f} {sum(len(t.leftovers) for t in rows):>15}"
              f" {sum(1 for t in rows if t.policy_ok):>10} {sum(1 for t in rows if t.error):>7}")
        starts = [t.start_s for t in rows if t.start_s]
        if starts:
            print(f"  start to a ready screen: median {statistics.median(starts):.1f} s, max {max(starts):.1f} s")
        stalls = [t for t in rows if t.method == "stall" and t.stall_backed_up is not None]
        if stalls:
            print(f"  stall: the console's output was backed up (pty full, writes waiting) at the end of the "
                  f"stall in {sum(1 for t in stalls if t.stall_backed_up)}/{len(stalls)} trials")
        for t in rows:
            if t.error or t.leftovers or not t.policy_ok or (t.exit_s or 0) > limit:
                print(f"  ! #{t.index} {t.method}: exit {t.exit_s} error {t.error!r} leftovers {t.leftovers} "
                      f"{t.policy_note}")
        audits = [t.audit for t in rows if t.audit]
        if audits:
            print(f"  audit entries: {len(audits)}/{len(rows)}, e.g. {audits[0]!r}")
    return ok_all


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "relay":
        return relay_main(sys.argv[sys.argv.index("--") + 1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attach", type=int, default=100, help="trials of `enginedeck attach` (default 100)")
    ap.add_argument("--demo", type=int, default=20, help="trials of `enginedeck demo` (default 20)")
    ap.add_argument("--stall", type=float, default=10.0, help="seconds the terminal reads nothing (default 10)")
    ap.add_argument("--limit", type=float, default=2.0, help="acceptance: seconds from event to exit (default 2)")
    ap.add_argument("--hang-after", type=float, default=10.0, help="a console alive this long after is hung")
    ap.add_argument("--start-timeout", type=float, default=60.0, help="seconds for a console to show data")
    ap.add_argument("--time-limit", type=float, default=3600.0, help="start no trial after this many seconds")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--json", metavar="FILE", help="also write every trial as JSON")
    args = ap.parse_args()
    # SIGTERM/SIGHUP unwind like Ctrl-C, so the fleet and the tmux servers are ended below.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))
    if shutil.which("tmux") is None:
        print("tmux is not installed", file=sys.stderr)
        return 2
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}")
    rng = random.Random(args.seed)

    def plan(n: int) -> list[str]:
        order = [methods[i % len(methods)] for i in range(n)]
        rng.shuffle(order)
        return order

    run_id = f"{os.getpid()}"
    begun = time.monotonic()
    trials: list[Trial] = []
    python = [sys.executable, "-m", "console"]
    with tempfile.TemporaryDirectory(prefix="enginedeck-tl-") as tmp:
        workdir = Path(tmp)
        (workdir / "config").mkdir()
        # A pane whose program ended stays, so a console that died at start shows why.
        (workdir / "tmux.conf").write_text("set -g remain-on-exit on\n")
        fleet: Fleet | None = None
        try:
            if args.attach:
                fleet = Fleet()
                print(f"fleet: {' '.join(fleet.refs)}", flush=True)
                for i, m in enumerate(plan(args.attach)):
                    if time.monotonic() - begun > args.time_limit:
                        print("time limit reached; no more trials", flush=True)
                        break
                    t = run_trial(Trial("attach", m, i), [*python, "attach", *fleet.refs], run_id, workdir, args,
                                  ready_marker="engines ready")
                    if not fleet.all_alive():
                        t.policy_ok, t.policy_note = False, "the attached (monitor-only) fleet did not survive"
                    trials.append(t)
                    _progress(t)
            base = args.attach
            for j, m in enumerate(plan(args.demo)):
                if time.monotonic() - begun > args.time_limit:
                    print("time limit reached; no more trials", flush=True)
                    break
                t = run_trial(Trial("demo", m, base + j), [*python, "demo"], run_id, workdir, args,
                              ready_marker="engines ready")
                trials.append(t)
                _progress(t)
        finally:
            if fleet is not None:
                fleet.stop()
    ok = report(trials, args.limit)
    print(f"\ntotal {time.monotonic() - begun:.0f} s; acceptance {'met' if ok else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps([t.__dict__ for t in trials], indent=1))
    return 0 if ok else 1


def _progress(t: Trial) -> None:
    ex = f"{t.exit_s:.2f}s" if t.exit_s is not None else "-"
    flag = "" if not (t.error or t.leftovers or not t.policy_ok) else f"  !! {t.error} {t.leftovers} {t.policy_note}"
    print(f"#{t.index:<3} {t.kind:<6} {t.method:<12} ready {t.start_s:4.1f}s exit {ex}{flag}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
