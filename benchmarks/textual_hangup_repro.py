"""Minimal reproduction: a Textual app can block forever in shutdown once its terminal hangs up.

Standalone (Textual and the standard library only). Each trial runs a tiny app on a fresh pty; the
app repaints a counter every 20 ms and, like any app that wants to clean up on a lost terminal,
exits on SIGHUP through ``loop.add_signal_handler``. The trial then hangs the terminal up by
closing the pty's master side (what sshd or tmux do when the connection or the session goes) and
waits for the app to end. Two Textual behaviours combine:

1. On hang-up the kernel sends SIGHUP *and* SIGCONT. ``LinuxDriver``'s SIGCONT handler resumes
   application mode even though nothing suspended it; on a hung-up tty ``os.isatty()`` is False,
   so the check that would stop it is skipped, and ``start_application_mode`` starts a second
   ``WriterThread`` (and input thread). The first writer, idle, waits in ``Queue.get`` for good.
2. A ``WriterThread`` whose ``write``/``flush`` raises (EIO on the hung-up tty) dies, and nothing
   drains its bounded queue (30 writes): the 31st write, or ``stop()``'s ``put(None)``, blocks the
   event loop forever in ``Queue.put``. Signals handled through the loop (SIGTERM too) then never
   run: only SIGKILL ends the process.

Modes: ``hangup`` (the above, N trials: how many apps were still alive 5 s after the hang-up, and
where their threads were), ``sigcont`` (a live terminal, one SIGCONT: threads before and after).

    python benchmarks/textual_hangup_repro.py hangup --trials 20
    python benchmarks/textual_hangup_repro.py sigcont
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pty
import select
import signal
import sys
import tempfile
import time
from pathlib import Path

APP = r'''
import asyncio, faulthandler, signal, sys
from textual.app import App
from textual.widgets import Static

faulthandler.register(signal.SIGUSR1, file=open(sys.argv[1], "w"), all_threads=True)
CLEANUP = float(sys.argv[2])

class Tick(App[None]):
    def compose(self):
        yield Static("0", id="n")
    def on_mount(self):
        # Clean up, then exit (stop background work, save state): CLEANUP seconds.
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, self.set_timer, CLEANUP, self.exit)
        loop.add_signal_handler(signal.SIGTERM, self.exit)
        self.n = 0
        self.set_interval(0.02, self.tick)
    def tick(self):
        self.n += 1
        self.query_one("#n", Static).update(str(self.n) * 40)

Tick().run()
'''


def start(app_file: Path, stacks: Path, cleanup: float = 0.0) -> tuple[int, int]:
    pid, master = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, str(app_file), str(stacks), str(cleanup)])
    return pid, master


def drain(master: int, seconds: float) -> int:
    got, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                got += len(os.read(master, 65536))
            except OSError:
                break
    return got


def wait_exit(pid: int, seconds: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def hangup(trials: int, tmp: Path, app_file: Path, cleanup: float) -> None:
    hung = 0
    for i in range(trials):
        stacks = tmp / f"stacks-{i}.txt"
        pid, master = start(app_file, stacks, cleanup)
        drain(master, 1.5)  # the app is up and painting
        before = threads(pid)
        os.close(master)  # the terminal hangs up
        took = wait_exit(pid, 5.0)
        if took is None:
            hung += 1
            after = threads(pid)
            os.kill(pid, signal.SIGUSR1)  # faulthandler: every thread's stack
            time.sleep(0.3)
            os.kill(pid, signal.SIGTERM)
            term_ended = wait_exit(pid, 2.0) is not None
            if not term_ended:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            print(f"trial {i}: HUNG 5 s after the hang-up; threads {before} -> {after}; "
                  f"SIGTERM {'ended it' if term_ended else 'ignored'}")
            text = stacks.read_text()
            for block in text.split("\n\n"):  # innermost frame first
                lines = [ln.strip() for ln in block.splitlines() if ln.strip().startswith("File")]
                if lines:
                    print("   ", " <- ".join(_short(ln) for ln in lines[:5]))
        else:
            print(f"trial {i}: ended {took:.2f} s after the hang-up")
    print(f"\n{hung}/{trials} apps did not end after their terminal hung up")


def _short(frame_line: str) -> str:
    # 'File "/.../textual/drivers/_writer_thread.py", line 67 in stop' -> '_writer_thread.py:67 stop'
    try:
        path, rest = frame_line.split('", line ')
        line, func = rest.split(" in ")
        name = Path(path.split('"', 1)[-1]).name
        return f"{name}:{line} {func}"
    except ValueError:
        return frame_line


def sigcont(tmp: Path, app_file: Path) -> None:
    pid, master = start(app_file, tmp / "stacks.txt")
    try:
        drain(master, 1.5)
        before = threads(pid)
        os.kill(pid, signal.SIGCONT)  # no SIGTSTP came first
        drain(master, 1.0)
        after = threads(pid)
        print(f"threads before SIGCONT: {before}, after: {after} "
              f"({'a second writer and input thread were started' if after > before else 'unchanged'})")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(master)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("hangup", "sigcont"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--cleanup", type=float, default=0.5, help="hangup: seconds from SIGHUP to exit (default 0.5)")
    args = ap.parse_args()
    import textual

    print(f"textual {textual.__version__}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="textual-hangup-") as d:
        tmp = Path(d)
        app_file = tmp / "tick_app.py"
        app_file.write_text(APP)
        if args.mode == "hangup":
            hangup(args.trials, tmp, app_file, args.cleanup)
        else:
            sigcont(tmp, app_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
